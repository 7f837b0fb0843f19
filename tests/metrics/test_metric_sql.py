"""The metrics in SQL over the store's ``pods`` table equal the reference functions exactly.

Random small histories (``tests.metrics.histories``: pods retried many times, two-request claims,
device-plugin pods, a policy change at the first hour, pods failed or still pending at the end,
devices tainted unhealthy and healed) are ingested into a real chDB store in two batches, so the
background fold writes each pod's row more than once and reads must take its latest version.
Then every per-pod pass ``audit.store.metric_sql`` runs in SQL, and the finished fairness,
fallback and health figures built from them, must equal the reference functions over the whole
log's ``PodLife`` rows — floats to the last bit — for a random window and tenant scope.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings

from audit.events import WorldEvent
from audit.metrics import Window, fairness_report, fallback_report, fold_lifecycle, health_report
from audit.metrics.report import RowPods
from audit.store import metric_sql
from audit.store.podschema import PODS
from audit.store.podtable import POD_COLUMNS, pod_rows
from audit.store.queries import AuditStore
from tests.metrics.eventlog import MIN, T0, Log, policy_doc
from tests.metrics.histories import PodPlan, TaintPlan, history, plans, taint_plans
from tests.metrics.test_columnar import scopes, windows


def _ingest(store: AuditStore, events: list[WorldEvent]) -> None:
    body = "".join(json.dumps(e.to_dict()) + "\n" for e in events).encode()
    assert store.ingest_jsonl(body, "events", "test").delivered
    assert store.wait_pod_table(120)


def _waits(stats: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    return {k: (s.pods_started, s.p(0.5), s.p(0.95), s.p(0.99), s.pending_at_end, s.failed, s.longest_wait_ms)
            for k, s in stats.items()}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plans, taint_plans, windows, scopes)
def test_sql_equals_the_reference_for_every_metric(store: AuditStore, pods: list[PodPlan], taints: list[TaintPlan],
                                                   window: Window, scope: str | None) -> None:
    log = history(pods, taints)
    cluster = f"c{abs(hash((tuple(pods), tuple(taints)))) % 10**12}"
    for ev in log.events:
        ev.cluster = cluster
    half = len(log.events) // 2
    _ingest(store, log.events[:half])
    _ingest(store, log.events[half:])
    life = dataclasses.replace(fold_lifecycle(log.events, cluster), columns=None)
    stored = store._query(f"SELECT {', '.join(POD_COLUMNS)} FROM pods FINAL WHERE cluster = {{c:String}} ORDER BY row",
                          {"c": cluster}).result_rows
    want = pod_rows(cluster, life.pods, range(len(life.pods)), 0)
    assert [dict(zip(POD_COLUMNS, r, strict=True)) | {"version": 0} for r in stored] == [
        {k: want[k][i] for k in POD_COLUMNS} for i in range(len(life.pods))]  # every field of every pod
    rows, sql = RowPods(life.pods), metric_sql.SqlPods(store._query, cluster, scope)
    group = (lambda t: t) if scope is None else (lambda t: t if t == scope else "(others)")
    assert sql.usage(window) == rows.usage(window)
    assert sql.alive_tenants(window) == rows.alive_tenants(window)
    assert _waits(sql.waits(window, group)) == _waits(rows.waits(window, group))
    assert sql.starving(window, 20 * MIN, group) == rows.starving(window, 20 * MIN, group)
    assert sql.pending(window) == rows.pending(window)
    assert sql.hourly_use(window) == rows.hourly_use(window)
    assert sql.fallback(window, scope) == rows.fallback(window, scope)
    assert store.insight(metric_sql.fairness_sql, cluster, window, scope) == fairness_report(life, window, scope)
    assert store.insight(metric_sql.fallback_sql, cluster, window, scope) == fallback_report(life, window, scope)
    assert store.insight(metric_sql.health_sql, cluster, window) == health_report(life, window)


def test_the_pods_table_follows_the_events_as_they_are_stored(store: AuditStore) -> None:
    """A pod pending after the first batch is bound by the second: its row is rewritten with a
    later version, and the table (read FINAL) shows the bind without anyone asking for a figure."""
    log = Log().nodes("H100", 1, 4).at(0).pod("team-a/p", ("gpu", ["H100", "A100"], 2))
    first = len(log.events)
    log.at(5).bind("team-a/p", "h100-0", {"gpu": ("h100", [0, 1])}).tick(6)
    _ingest(store, log.events[:first])
    read = "SELECT pod, bound_ms, models, devices, version FROM pods FINAL WHERE cluster = 'c1'"
    assert store._query(read).result_rows == [("p", None, [], 0, first - 1)]
    _ingest(store, log.events[first:])
    assert store._query(read).result_rows == [("p", T0 + 5 * MIN, ["H100"], 2, log.events[-1].seq)]
    versions = store._query("SELECT count() FROM pods WHERE cluster = 'c1'").result_rows[0][0]
    assert versions == 2  # both writes are kept until a merge; FINAL reads the later


def test_nearest_rank_percentiles_in_sql_are_observed_waits(store: AuditStore) -> None:
    """Eleven pods waiting 1..11 minutes: p50 is the ⌈5.5⌉ = 6th smallest, p95 the ⌈10.45⌉ = 11th,
    p99 the 11th (an interpolating quantile would give 6, 10.5 and 10.9 minutes; rounding the rank
    to nearest would give the 10th for p95)."""
    log = Log().nodes("H100", 3, 4)
    for i in range(11):
        log.at(0).pod(f"team-a/p{i}", ("gpu", ["H100"], 1))
    for i in range(11):
        log.at(i + 1).bind(f"team-a/p{i}", f"h100-{i // 4}", {"gpu": ("h100", [i % 4])})
    log.tick(30)
    _ingest(store, log.events)
    row = fairness_report(fold_lifecycle(log.events, "c1"), Window(T0, T0 + 60 * MIN))["tenants"][0]
    got = store.insight(metric_sql.fairness_sql, "c1", Window(T0, T0 + 60 * MIN))["tenants"][0]
    assert (got["pods_started"], got["wait_p50_s"], got["wait_p95_s"], got["wait_p99_s"]) == (11, 360.0, 660.0, 660.0)
    assert got == row


def _fairness_by(evaluation: str, request: pytest.FixtureRequest, events: list[WorldEvent], window: Window,
                 scope: str | None) -> dict[str, Any]:
    """``fairness_report`` with its per-pod passes run on the ``PodLife`` rows, the columns or SQL."""
    life = fold_lifecycle(events, "c1")
    if evaluation == "sql":
        store: AuditStore = request.getfixturevalue("store")
        _ingest(store, events)
        return store.insight(metric_sql.fairness_sql, "c1", window, scope)
    return fairness_report(life if evaluation == "columns" else dataclasses.replace(life, columns=None), window, scope)


@pytest.mark.parametrize(("scope", "expected"), [
    pytest.param(None, {"team-a": (1, 900.0), "team-b": (0, None), "team-c": (0, None), "team-d": (0, None),
                        "team-e": (0, None)}, id="per-tenant"),
    pytest.param("team-a", {"team-a": (1, 900.0), "(others)": (0, None)}, id="others-folded"),
])
@pytest.mark.parametrize("evaluation", ["rows", "columns", "sql"])
def test_a_tenant_with_pods_but_none_started_has_null_wait_percentiles(
        request: pytest.FixtureRequest, evaluation: str, scope: str | None,
        expected: dict[str, tuple[int, float | None]]) -> None:
    """Four pods created at once: team-a's is bound 15 minutes later, inside the window; team-b's
    stays pending, team-c's fails unbound and team-d's was bound before the window opened. Those
    three started no pod in the window, and team-e, which the policy names, has no pod at all: no
    wait to rank, so their percentiles are null (a 0 would read as pods served at once)."""
    log = Log(policy_doc(weights={"team-e": 1.0})).nodes("H100", 1, 4)
    for t in "abcd":
        log.at(0).pod(f"team-{t}/p", ("gpu", ["H100"], 1))
    log.at(5).bind("team-d/p", "h100-0", {"gpu": ("h100", [0])})
    log.at(15).bind("team-a/p", "h100-0", {"gpu": ("h100", [1])})
    log.at(20).fail("team-c/p")
    log.tick(70)
    fair = _fairness_by(evaluation, request, log.events, Window(T0 + 10 * MIN, T0 + 60 * MIN), scope)
    assert {t["tenant"]: (t["pods_started"], t["wait_p50_s"]) for t in fair["tenants"]} == expected
    for t in fair["tenants"]:
        assert t["wait_p50_s"] == t["wait_p95_s"] == t["wait_p99_s"]


def test_pending_runs_merge_alike_when_many_pods_share_one_interval(store: AuditStore) -> None:
    """Many pods created and bound at the same moments (a burst of replicas): equal intervals must
    fall into one run however the engine orders ties, so the backlogged hours come out the same."""
    pods = [PodPlan("a", "one", 4, 0, 50, 30, "bind", 0), PodPlan("b", "one", 4, 0, 55, 30, "bind", 0),
            PodPlan("a", "one", 4, 2, 70, 30, "bind", 0), PodPlan("b", "one", 4, 5, 90, 20, "bind", 0),
            PodPlan("a", "two", 1, 60, 20, 30, "pend", 0), PodPlan("b", "one", 2, 61, 10, 30, "fail", 0)]
    log = history(pods)
    _ingest(store, log.events)
    life = fold_lifecycle(log.events, "c1")
    copies = 400
    columns = [c.split()[0] for c in PODS.columns]
    picked = ", ".join({"row": f"row + {len(life.pods)} * k", "pod": "concat(pod, '-', toString(k))"}.get(c, c)
                       for c in columns)
    store.client.command(f"INSERT INTO pods ({', '.join(columns)}) SELECT {picked} FROM pods FINAL "
                         f"CROSS JOIN (SELECT number + 1 AS k FROM numbers({copies - 1})) AS copies")
    many = dataclasses.replace(life, columns=None, pods=[
        dataclasses.replace(p, pod=f"{p.pod}-{k}") for k in range(copies) for p in life.pods])
    window = Window(T0, T0 + 120 * MIN)
    assert metric_sql.SqlPods(store._query, "c1").pending(window) == RowPods(many.pods).pending(window)
    assert store.insight(metric_sql.fairness_sql, "c1", window) == fairness_report(many, window)
