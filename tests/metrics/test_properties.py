"""Properties of the metrics on random small histories (see ``tests.metrics.histories``).

The store's figures (its pod lifecycle folded from the events as they arrive, in two batches, in a
real chDB store, evaluated on the columns it keeps) are exactly the reference functions' over the
whole log's PodLife rows; and the reference keeps its
bookkeeping invariants: every pod is counted once as started, pending or failed; first choice
and fallback partition the pods with alternatives; entitlements add up to the capacity.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings

from audit.metrics import Window, fairness_report, fallback_report, fold_lifecycle, health_report
from audit.metrics.usage import entitlements
from tests.metrics.eventlog import MIN, T0
from tests.metrics.histories import PodPlan, history, plans

WINDOW = Window(T0, T0 + 120 * MIN)
CAPACITY_EQ = 8 * 1.0 + 4 * 0.5 + 4 * 0.12  # two H100 nodes of 4, an A100 node of 4, an L4 node of 4


@settings(max_examples=150, deadline=None)
@given(plans)
def test_reference_bookkeeping(pods: list[PodPlan]) -> None:
    log = history(pods)
    life = fold_lifecycle(log.events, "c1")
    fair, fb = fairness_report(life, WINDOW), fallback_report(life, WINDOW)
    created = [p for p in pods if p.created < 120]
    assert sum(t["pods_started"] + t["pending_at_end"] + t["failed"] for t in fair["tenants"]) == len(created)
    assert sum(t["starving_pods"] for t in fair["tenants"]) <= len(created)
    first = round(fb["first_choice_rate"] * fb["pods_with_preference"]) if fb["first_choice_rate"] is not None else 0
    assert first + fb["fallbacks"] == fb["pods_with_preference"] == sum(p["pods"] for p in fb["paths"])
    assert 0 <= fb["regretted"] <= fb["fallbacks"]
    assert sum(entitlements(life, WINDOW).values()) == pytest.approx(CAPACITY_EQ * 2, rel=1e-9)
    n = len([t for t in fair["tenants"] if t["entitlement_h100_eq_hours"] > 0])
    assert 1 / n - 1e-12 <= fair["jain_whole"] <= 1 + 1e-12
    if fair["jain_contention"] is not None:
        assert 0 < fair["jain_contention"] <= 1 + 1e-12 and fair["contention_windows"] >= 1
    for t in fair["tenants"]:
        waits = (t["wait_p50_s"], t["wait_p95_s"], t["wait_p99_s"])
        if t["pods_started"]:
            assert waits[0] <= waits[1] <= waits[2]
        else:  # no wait to rank: null, never 0 s
            assert waits == (None, None, None)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plans)
def test_the_store_serves_exactly_the_reference(store: object, pods: list[PodPlan]) -> None:
    log = history(pods)
    cluster = f"c{abs(hash(tuple(pods))) % 10**9}"
    for ev in log.events:
        ev.cluster = cluster
    half = len(log.events) // 2
    for batch in (log.events[:half], log.events[half:]):
        body = "".join(json.dumps(e.to_dict()) + "\n" for e in batch).encode()
        result = store.ingest_jsonl(body, "events", "test")  # type: ignore[attr-defined]
        assert result.delivered
        served = store.pod_lifecycle(cluster)  # type: ignore[attr-defined]
    whole = dataclasses.replace(fold_lifecycle(log.events, cluster), columns=None)
    assert served.columns is not None
    assert fairness_report(served, WINDOW) == fairness_report(whole, WINDOW)
    assert fallback_report(served, WINDOW) == fallback_report(whole, WINDOW)
    assert health_report(served, WINDOW) == health_report(whole, WINDOW)
