"""Watching a live Kubernetes cluster: list+watch, the world event log, observed decisions.

``resources`` names what is watched, ``reflector`` keeps one resource in sync across
disconnects and 410 Gone, ``eventlog`` turns what reflectors see into WorldEvents without gaps
or doubles, ``observe`` turns claims, pods and scheduler events into DecisionRecords,
``agreement`` re-runs the allocator on observed allocations, ``lease`` elects one watcher per
cluster and ``watcher`` ties them together.
"""
