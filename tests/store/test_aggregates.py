"""Fallback, fairness, health and migration aggregates equal what the records say."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.api.stats.fairness import usage_by_model
from audit.metrics import cohorts
from audit.records import DecisionRecord
from audit.store.queries import AuditStore, DecisionFilter
from audit.store.rows import epoch_ms
from tests.store.conftest import write_all
from tests.store.factory import make_record, make_records

WHOLE_DAY = DecisionFilter(since="2026-11-01T00:00:00Z", until="2026-11-02T00:00:00Z")
PART_DAY = DecisionFilter(since="2026-11-01T00:00:30Z", until="2026-11-02T00:00:00Z")
OFF_HOUR = DecisionFilter(since="2026-10-31T23:59:30Z")  # every record, but not on an hour: raw rows


def truth(records: list[DecisionRecord], key) -> dict:
    out: dict = {}
    for r in records:
        acc = out.setdefault(key(r), {"decisions": 0, "allocated": 0, "fallback_decisions": 0, "unschedulable": 0})
        acc["decisions"] += 1
        acc["allocated"] += r.outcome == "allocated"
        acc["fallback_decisions"] += r.outcome == "allocated" and r.fallback
        acc["unschedulable"] += r.outcome == "unschedulable"
    return out


@pytest.mark.parametrize("f", [WHOLE_DAY, PART_DAY, DecisionFilter(namespace="acme-ml")],
                         ids=["rollup", "raw-rows-partial-hour", "raw-rows-namespace"])
def test_fallback_stats_by_tenant_and_model_match_the_records(store: AuditStore, f: DecisionFilter) -> None:
    records = make_records(200, seconds_apart=60)
    write_all(store, records)
    since = epoch_ms(f.since) if f.since else 0
    selected = [r for r in records if epoch_ms(r.time) >= since and (f.namespace is None or r.namespace == f.namespace)]
    expected = truth(selected, lambda r: (r.tenant, r.allocated_model))
    got = store.fallback_stats(f, ["tenant", "model"])
    assert {(g["tenant"], g["model"]): {k: g[k] for k in ("decisions", "allocated", "fallback_decisions", "unschedulable")}
            for g in got} == expected
    for g in got:
        assert g["fallback_rate"] == (g["fallback_decisions"] / g["allocated"] if g["allocated"] else None)


@pytest.mark.parametrize("f", [WHOLE_DAY, OFF_HOUR], ids=["rollup", "raw-rows"])
@pytest.mark.parametrize(("outcomes", "fallback_rate"), [
    pytest.param(["unschedulable", "unschedulable", "error"], None, id="nothing-allocated-has-no-fallback-rate"),
    pytest.param(["allocated", "unschedulable"], 0.0, id="allocated-without-fallback-is-zero"),
])
def test_fallback_stats_fallback_rate_is_null_without_an_allocation(store: AuditStore, f: DecisionFilter,
                                                                   outcomes: list[str],
                                                                   fallback_rate: float | None) -> None:
    records = [dataclasses.replace(make_record(i), tenant="acme", outcome=o, fallback=False)
               for i, o in enumerate(outcomes)]
    write_all(store, records)
    (got,) = store.fallback_stats(f, ["tenant"])
    assert (got["decisions"], got["allocated"], got["fallback_rate"]) == (
        len(outcomes), outcomes.count("allocated"), fallback_rate)


def test_fallback_stats_by_hour_uses_iso_hours(store: AuditStore) -> None:
    records = make_records(120, seconds_apart=60)  # two hours
    write_all(store, records)
    got = store.fallback_stats(WHOLE_DAY, ["hour"])
    assert [(g["hour"], g["decisions"]) for g in got] == [("2026-11-01T00:00:00Z", 60), ("2026-11-01T01:00:00Z", 60)]


def test_hourly_groups_work_for_a_tenant_scoped_caller(store: AuditStore) -> None:
    records = make_records(120, seconds_apart=60)
    write_all(store, records)
    got = store.fallback_stats(WHOLE_DAY, ["hour"], scope_tenant="acme")
    assert [(g["hour"], g["decisions"]) for g in got] == [("2026-11-01T00:00:00Z", 60), ("2026-11-01T01:00:00Z", 60)]


def test_allocated_is_a_count_and_not_a_grouping(store: AuditStore) -> None:
    from audit.errors import UserError

    with pytest.raises(UserError, match="group_by 'allocated'"):
        store.fallback_stats(WHOLE_DAY, ["allocated"])


@pytest.mark.parametrize("f", [WHOLE_DAY, OFF_HOUR], ids=["rollup", "raw-rows"])
def test_scope_tenant_folds_other_tenants_into_others(store: AuditStore, f: DecisionFilter) -> None:
    records = make_records(40)
    write_all(store, records)
    got = store.fallback_stats(f, ["tenant"], scope_tenant="acme")
    assert [(g["tenant"], g["decisions"]) for g in got] == [("(others)", 30), ("acme", 10)]
    rows = store.insight(usage_by_model, f, False, scope_tenant="acme")
    assert {t: sum(r["decisions"] for r in rows if r["tenant"] == t) for t in ("(others)", "acme")} == {
        "(others)": 30, "acme": 10}


def test_health_stats_counts_retries_and_unhealthy_verdicts(store: AuditStore) -> None:
    records = make_records(70)
    records[0].retry_class = "binding_conflict"
    records[1].retry_class = "terminal"
    records[2].outcome = "error"
    write_all(store, records)
    (hour,) = store.health_stats(DecisionFilter())
    unschedulable = [r for r in records if r.retry_class == "unschedulable"]
    assert hour["decisions"] == 70
    assert hour["retries"] == {"unschedulable": len(unschedulable), "binding_conflict": 1}
    assert hour["terminal_failures"] == 2
    assert hour["unhealthy"] == sum(t.reasons.get("unhealthy", 0) for r in records for t in r.tiers)
    assert hour["binding_conflict"] == 0 and hour["stale_slice"] == 0


def test_migration_stats_per_track_and_template_cohort(store: AuditStore) -> None:
    records = make_records(60)
    for r in records[:20]:
        r.track = "device-plugin"
    write_all(store, records)
    got = {(g["track"], g["template_version"]): g for g in store.migration_stats(DecisionFilter())}
    for (track, template), g in got.items():
        cohort = [r for r in records if r.track == track and r.template_version == template]
        allocated = [r for r in cohort if r.outcome == "allocated"]
        assert g["decisions"] == len(cohort)
        assert g["success_rate"] == len(allocated) / len(cohort)
        assert g["fallback_rate"] == sum(r.fallback for r in allocated) / len(allocated)
    assert sum(g["decisions"] for g in got.values()) == 60
    assert set(got) == {("device-plugin", "t1"), ("device-plugin", "t2"), ("dra", "t1"), ("dra", "t2")}


def cohort(waits: list[int], track: str = "dra", template: str = "t1", cluster: str = "c1",
           start: int = 0) -> list[DecisionRecord]:
    """Decisions of one cohort, one per wait, numbered from ``start``."""
    return [dataclasses.replace(make_record(start + i, cluster=cluster), wait_ms=w, track=track, template_version=template)
            for i, w in enumerate(waits)]


def ceil_rank(waits: list[int], percent: int) -> float:
    """The ⌈percent·n / 100⌉-th smallest wait, the rank in integers: nearest rank, worked out apart
    from the code under test."""
    ordered = sorted(waits)
    return float(ordered[max(1, -(-percent * len(ordered) // 100)) - 1])


@pytest.mark.parametrize(("waits", "p50", "p95"), [
    # ClickHouse's quantilesExact takes the element at index ⌊q·n⌋ of the sorted values: 300 and 400 here
    pytest.param([400, 100, 300, 200], 200.0, 400.0, id="four-p50-is-the-2nd-smallest"),
    # quantilesExact: 550 and 1000; 0.95 × 20 is 19.000000000000004 in floating point, the rank 19
    pytest.param([50 * k for k in range(20, 0, -1)], 500.0, 950.0, id="twenty-p95-is-the-19th-smallest"),
    pytest.param([7000], 7000.0, 7000.0, id="one-decision"),
])
def test_migration_stats_wait_percentiles_are_nearest_rank(store: AuditStore, waits: list[int], p50: float,
                                                           p95: float) -> None:
    records = cohort(waits)
    write_all(store, records)
    write_all(store, records[: len(records) // 2])  # a redelivered half must not count twice
    (got,) = store.migration_stats(DecisionFilter())
    assert (got["decisions"], got["wait_p50_ms"], got["wait_p95_ms"]) == (len(waits), p50, p95)


_examples = itertools.count()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(decisions=st.lists(st.tuples(st.sampled_from([("dra", "t1"), ("dra", "t2"), ("device-plugin", "")]),
                                    st.integers(0, 10**7)), min_size=1, max_size=80))
def test_migration_stats_wait_percentiles_equal_a_ceil_rank_recomputation(
        store: AuditStore, decisions: list[tuple[tuple[str, str], int]]) -> None:
    cluster = f"p{next(_examples)}"  # each example its own cluster of the one store
    records = [dataclasses.replace(make_record(i, cluster=cluster), track=track, template_version=template, wait_ms=w)
               for i, ((track, template), w) in enumerate(decisions)]
    write_all(store, records)
    waits: dict[tuple[str, str], list[int]] = {}
    for (key, w) in decisions:
        waits.setdefault(key, []).append(w)
    got = {(g["track"], g["template_version"]): (g["decisions"], g["wait_p50_ms"], g["wait_p95_ms"])
           for g in store.migration_stats(DecisionFilter(cluster=cluster))}
    assert got == {key: (len(ws), ceil_rank(ws, 50), ceil_rank(ws, 95)) for key, ws in waits.items()}


@pytest.mark.parametrize(("outcomes", "success_rate", "fallback_rate"), [
    pytest.param(["unschedulable", "unschedulable", "error"], 0.0, None, id="nothing-allocated-has-no-fallback-rate"),
    pytest.param(["allocated", "unschedulable"], 0.5, 0.0, id="allocated-without-fallback-is-zero"),
])
def test_migration_stats_fallback_rate_is_null_without_an_allocation(store: AuditStore, outcomes: list[str],
                                                                    success_rate: float,
                                                                    fallback_rate: float | None) -> None:
    records = [dataclasses.replace(r, outcome=o, fallback=False) for r, o in zip(cohort([1000] * len(outcomes)), outcomes,
                                                                                   strict=True)]
    write_all(store, records)
    (got,) = store.migration_stats(DecisionFilter())
    assert (got["decisions"], got["allocated"], got["success_rate"], got["fallback_rate"]) == (
        len(outcomes), outcomes.count("allocated"), success_rate, fallback_rate)


def test_every_migration_cohort_figure_has_a_definition(store: AuditStore) -> None:
    write_all(store, make_records(10))
    figures = {k for g in store.migration_stats(DecisionFilter()) for k in g} - {"track", "template_version"}
    assert figures == {d.name for d in cohorts.DEFINITIONS}
    assert {d.reference for d in cohorts.DEFINITIONS} == {"audit.store.aggregates.migration_stats"}
