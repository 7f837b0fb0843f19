"""The API's migration cohorts, folded per pod in ClickHouse, equal ``audit.migration.build_cohorts``
over the same records and release events (several attempts per pod, a cohort change between
attempts, a pod that never bound, releases by pod name and by uid)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from audit import migration
from audit.api.app import create_app
from audit.api.auth import AuthConfig
from audit.api.deps import Settings
from audit.api.stats.migration import cohorts, migration_view
from audit.events import WorldEvent
from audit.records import DecisionRecord, decision_id, to_jsonl
from audit.store.filters import DecisionFilter
from audit.store.queries import AuditStore
from tests.api import factory
from tests.otlp.loopback import serve


def _attempt(base: DecisionRecord, pod: str, n: int, seq: int, time: str, **changes: object) -> DecisionRecord:
    return dataclasses.replace(base, decision_id=decision_id(factory.CLUSTER, f"cohort-{pod}", n), pod=pod,
                               pod_uid=f"uid-{pod}", attempt=n, seq=seq, time=time, **changes).seal()  # type: ignore[arg-type]


RECORDS = [
    # retried, then bound after a fallback: cohort dra/t1
    _attempt(factory.PENDING, "a", 1, 10, "2026-05-01T09:00:00.000000Z", wait_ms=5000, template_version="t1"),
    _attempt(factory.FALLBACK, "a", 2, 20, "2026-05-01T09:01:00.000000Z", wait_ms=8000, template_version="t1"),
    # device plugin, bound at once, released by a delete an hour later (by name)
    _attempt(factory.GOT_H100, "b", 1, 15, "2026-05-01T09:00:00.000000Z", wait_ms=1000, track="device-plugin"),
    # moved to template t2 between attempts and never bound: cohort dra/t2
    _attempt(factory.PENDING, "c", 1, 11, "2026-05-01T09:00:00.000000Z", wait_ms=2000, template_version="t1"),
    _attempt(factory.PENDING, "c", 2, 21, "2026-05-01T09:02:00.000000Z", wait_ms=3000, template_version="t2"),
    # bound on DRA, finished (Succeeded, by uid) 30 minutes later
    _attempt(factory.GOT_H100, "d", 1, 12, "2026-05-01T09:00:00.000000Z", wait_ms=2000, template_version="t1"),
]
EVENTS = [
    WorldEvent(cluster=factory.CLUSTER, seq=500, time="2026-05-01T10:00:00.000000Z", type="delete", object_kind="Pod",
               namespace="team-a", name="b", payload={}),
    WorldEvent(cluster=factory.CLUSTER, seq=501, time="2026-05-01T09:30:00.000000Z", type="upsert", object_kind="Pod",
               namespace="team-a", name="d", payload={"metadata": {"name": "d", "uid": "uid-d"},
                                                      "status": {"phase": "Succeeded"}}),
]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AuditStore]:
    s = AuditStore.open(f"chdb://{tmp_path}/db")
    try:
        s.ingest_jsonl("".join(json.dumps(e.to_dict()) + "\n" for e in EVENTS).encode(), "events", "t")
        s.ingest_jsonl(to_jsonl(RECORDS).encode(), "records", "t")
        yield s
    finally:
        s.close()


def _strata(found: dict[migration.CohortKey, migration.Cohort]) -> dict[str, dict]:
    return {str(k): c.strata() for k, c in found.items()}


def test_per_pod_fold_in_the_store_equals_build_cohorts(store: AuditStore) -> None:
    expected = migration.build_cohorts(RECORDS, migration.releases_from_events(e.to_dict() for e in EVENTS))
    # every statistic is over the multiset of pods of a stratum: its exact moments are all that count
    assert _strata(cohorts(store, DecisionFilter())) == _strata(expected)
    # the figures the fold must get right, by hand
    by_key = {str(k): c.pods for k, c in expected.items()}
    assert [(p.succeeded, p.fallback, p.latency_ms, p.pending_ms) for p in by_key["dra/t1"]] == \
        [(True, True, 8000.0, 8000.0), (True, False, 2000.0, 2000.0)]
    assert [p.utilisation for p in by_key["dra/t1"]] == [None, 1_800_000 / 1_802_000]
    assert [(p.succeeded, p.pending_ms) for p in by_key["dra/t2"]] == [(False, 3000.0)]
    assert [p.utilisation for p in by_key["device-plugin"]] == [3_600_000 / 3_601_000]


@pytest.mark.parametrize(("max_regression", "verdict"), [(2.0, "promote"), (-1.0, "rollback")],
                         ids=["any-regression-allowed", "no-regression-allowed"])
def test_the_servers_thresholds_decide_the_verdict(store: AuditStore, max_regression: float, verdict: str) -> None:
    thresholds = migration.Thresholds.from_dict({
        "baseline": {"track": "device-plugin"}, "candidate": {"track": "dra"}, "min_pods": 1,
        "metrics": {"success_rate": {"max_regression": max_regression}}})
    rows, _ = migration_view(store, DecisionFilter(), thresholds)
    # device plugin: pod b bound; DRA: a and d bound, c never (success 2/3)
    assert [(r["track"], r["template_version"], r["verdict"]) for r in rows] == [
        ("device-plugin", "", verdict), ("dra", "t1", verdict), ("dra", "t2", verdict)]
    assert [r["utilisation"] for r in rows] == [3_600_000 / 3_601_000, 1_800_000 / 1_802_000, None]


def test_the_apis_cohort_rows_are_the_stores_migration_stats(store: AuditStore) -> None:
    with serve(create_app(store, Settings(auth=AuthConfig(insecure_local=True))), lifespan="on") as base:
        r = httpx.get(f"{base}/v1/stats/migration", timeout=60)
    assert r.status_code == 200, r.text
    expected = store.migration_stats(DecisionFilter())
    rows = [{k: row[k] for k in expected[0]} for row in r.json()["rows"]]
    assert rows == expected
    # by hand, per decision record: dra/t1 waited 5, 8, 2 and 2 s (p50 the 2nd smallest of four, where
    # quantilesExact took the 3rd, 5 s), one of its two allocations fell back; dra/t2's one decision
    # was not allocated, so it has no fallback rate (not 0)
    assert [(g["track"], g["template_version"], g["decisions"], g["success_rate"], g["fallback_rate"],
             g["wait_p50_ms"], g["wait_p95_ms"]) for g in rows] == [
        ("device-plugin", "", 1, 1.0, 0.0, 1000.0, 1000.0),
        ("dra", "t1", 4, 0.5, 0.5, 2000.0, 8000.0),
        ("dra", "t2", 1, 0.0, None, 3000.0, 3000.0),
    ]
