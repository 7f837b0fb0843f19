"""Cluster-level decisions: tiers, policy gates, node choice, bind-time re-checks, records.

``engine.decide`` is the pure per-attempt function (``tiers`` -> ``quota``/fallback gates ->
``filters`` -> the exact per-node allocator via ``nodealloc`` -> node choice -> ``evidence``
summaries -> a sealed record); ``binding.bind`` re-checks a proposal at bind time;
``deviceplugin`` decides legacy ``nvidia.com/gpu`` pods; ``queue`` orders pending work by
fairness and ``fairshare`` optionally defers tenants above their share. Nothing here does I/O or
reads a clock.
"""
