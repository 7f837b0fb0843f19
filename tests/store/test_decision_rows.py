"""The decision rows of /v1/stats/fallback, /v1/stats/overview, /v1/stats/fairness and
/v1/stats/health, and the skip-reason rows, on a handful of records whose figures are worked out by hand, and each figure
they return defined once in ``audit.metrics.decision_rows``."""

from __future__ import annotations

from typing import Any

import pytest

from audit.api.stats import Ask, fairness, fallback, health, overview
from audit.metrics import catalog, decision_rows
from audit.records import DecisionRecord
from audit.store.queries import AuditStore, DecisionFilter
from tests.builders import decision, device, tier
from tests.store.conftest import write_all

WHOLE_DAY = DecisionFilter(since="2026-11-01T00:00:00Z", until="2026-11-02T00:00:00Z")
OFF_HOUR = DecisionFilter(since="2026-10-31T23:59:30Z")  # every record, but not on an hour: raw rows
# the preferred tier as a fallback or an unschedulable attempt saw it
H100_BUSY = {"in_use": 6, "unhealthy": 2}


def _record(n: int, tenant: str, outcome: str, *, model: str = "", tier_index: int = -1, devices: int = 0,
            fallback: bool = False, tiers: dict[str, dict[str, int]] | None = None,
            retry_class: str = "") -> DecisionRecord:
    """Decision ``n`` of a pod of ``tenant`` preferring H100 over A100, ``n`` minutes into the day;
    ``tiers`` gives each tier's device verdicts by model."""
    node = f"node-{n}" if devices else ""
    return decision(
        "c1", f"claim-{n}", 0, seq=n + 1, time=f"2026-11-01T00:{n:02d}:00.000Z", tenant=tenant, pod=f"train-{n}",
        claims=["gpu"], preference=["H100", "A100"], outcome=outcome, node=node,
        devices=[device(node, model, f"gpu/{model.lower()}", g) for g in range(devices)], tier_index=tier_index,
        preferred_model="H100", allocated_model=model, fallback=fallback, retry_class=retry_class,
        tiers=[tier(i, m, reasons, f"gpu/{m.lower()}") for i, (m, reasons) in enumerate((tiers or {}).items())])


# acme: four attempts, two allocated (one of them a fallback), one unschedulable, one deferred;
# globex: one unschedulable attempt and one error, nothing allocated
RECORDS = [
    _record(0, "acme", "allocated", model="H100", tier_index=0, devices=2, tiers={"H100": {"selected": 2}}),
    _record(1, "acme", "allocated", model="A100", tier_index=1, devices=1, fallback=True,
            tiers={"H100": H100_BUSY, "A100": {"selected": 1, "in_use": 3}}),
    _record(2, "acme", "unschedulable", tiers={"H100": H100_BUSY, "A100": {"in_use": 4}}, retry_class="unschedulable"),
    _record(3, "acme", "deferred"),
    _record(4, "globex", "unschedulable", tiers={"H100": {"in_use": 8}, "A100": {"unhealthy": 4}}, retry_class="quota"),
    _record(5, "globex", "error", retry_class="terminal"),
]
# a bind that found one device taken and another's slice moved on, retried
BIND_FAILED = _record(6, "acme", "unschedulable", tiers={"H100": {"selected": 1, "binding_conflict": 1,
                                                                  "stale_slice": 1}}, retry_class="binding_conflict")
FALLBACK_ROWS = {
    "acme": {"decisions": 4, "allocated": 2, "fallback_decisions": 1, "fallback_rate": 0.5, "unschedulable": 1},
    # nothing allocated: no fallback rate, not 0
    "globex": {"decisions": 2, "allocated": 0, "fallback_decisions": 0, "fallback_rate": None, "unschedulable": 1},
}
FAIRNESS_ROWS = {
    "acme": {"decisions": 4, "allocated": 2, "devices_allocated": 3},
    "globex": {"decisions": 2, "allocated": 0, "devices_allocated": 0},
}


def _ask(store: AuditStore, f: DecisionFilter, keys: list[str]) -> Ask:
    return Ask(db=store, own=f, folded=f, scope=None, keys=keys)


def _figures(rows: list[dict[str, Any]], group: tuple[str, ...]) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(r[k] for k in group): {k: v for k, v in r.items() if k not in group} for r in rows}


@pytest.mark.parametrize("f", [WHOLE_DAY, OFF_HOUR], ids=["rollup", "raw-rows"])
@pytest.mark.parametrize("kind", [fallback, overview], ids=["fallback", "overview"])
def test_fallback_rows_count_decision_records_by_hand(store: AuditStore, f: DecisionFilter, kind: Any) -> None:
    write_all(store, RECORDS)
    rows = kind.KIND.answer(_ask(store, f, ["tenant"]))["rows"]
    got = _figures(rows, ("tenant",))
    assert {t: {k: g[k] for k in decision_rows.FALLBACK_ROW} for (t,), g in got.items()} == FALLBACK_ROWS


@pytest.mark.parametrize(("keys", "expected"), [
    pytest.param(["tenant"], {(t,): row for t, row in FAIRNESS_ROWS.items()}, id="per-tenant"),
    pytest.param(["hour", "tenant"], {("2026-11-01T00:00:00Z", t): row for t, row in FAIRNESS_ROWS.items()},
                 id="per-hour-and-tenant"),
])
def test_fairness_rows_count_decisions_and_devices_allocated_by_hand(store: AuditStore, keys: list[str],
                                                                     expected: dict[tuple[str, ...], dict]) -> None:
    write_all(store, RECORDS)
    rows = fairness.KIND.answer(_ask(store, WHOLE_DAY, keys))["rows"]
    assert _figures(rows, tuple(keys)) == expected


def test_a_device_plugin_allocation_adds_no_devices_allocated(store: AuditStore) -> None:
    # 4 GPUs on a node by count: the record names no device, so only ``allocated`` counts it
    plugin = decision("c1", "plugin-0", 0, seq=8, time="2026-11-01T00:08:00.000Z", tenant="globex", pod="infer-0",
                      claims=[], claim_uids=[], preference=["nvidia.com/gpu"], outcome="allocated",
                      node="dp-node-0", track="device-plugin", message="allocated 4 nvidia.com/gpu on dp-node-0")
    write_all(store, [*RECORDS, plugin])
    rows = fairness.KIND.answer(_ask(store, WHOLE_DAY, ["tenant"]))["rows"]
    assert _figures(rows, ("tenant",))[("globex",)] == {"decisions": 3, "allocated": 1, "devices_allocated": 0}


@pytest.mark.parametrize(("keys", "f", "expected"), [
    # records 1 and 2 saw H100 busy in the tier not chosen, record 4 (globex) saw all eight in use;
    # record 0 got its preferred model, and the A100 tiers are not the preferred model's
    pytest.param(["reason"], WHOLE_DAY, {("in_use",): 20, ("unhealthy",): 4}, id="per-reason"),
    pytest.param(["reason", "preferred"], WHOLE_DAY, {("in_use", "H100"): 20, ("unhealthy", "H100"): 4},
                 id="per-reason-and-preferred"),
    pytest.param(["reason"], DecisionFilter(tenant="globex"), {("in_use",): 8}, id="one-tenant"),
])
def test_skip_reason_rows_count_device_verdicts_by_hand(store: AuditStore, keys: list[str], f: DecisionFilter,
                                                        expected: dict[tuple[str, ...], int]) -> None:
    write_all(store, RECORDS)
    rows = fallback.KIND.answer(_ask(store, f, keys))["rows"]
    assert {k: g["devices"] for k, g in _figures(rows, tuple(keys)).items()} == expected


HEALTH_BY_MODEL = {  # every tier counts, the chosen one included
    "H100": {"unhealthy": 4, "binding_conflict": 1, "stale_slice": 1},
    "A100": {"unhealthy": 4, "binding_conflict": 0, "stale_slice": 0},
}


@pytest.mark.parametrize(("keys", "expected"), [
    pytest.param(["hour"], {("2026-11-01T00:00:00Z",): {
        "decisions": 7, "retries": {"unschedulable": 1, "quota": 1, "binding_conflict": 1}, "terminal_failures": 1,
        "unhealthy": 8, "binding_conflict": 1, "stale_slice": 1}}, id="per-hour"),
    pytest.param(["model"], {(m,): row for m, row in HEALTH_BY_MODEL.items()}, id="per-model"),
    pytest.param(["hour", "model"], {("2026-11-01T00:00:00Z", m): row for m, row in HEALTH_BY_MODEL.items()},
                 id="per-hour-and-model"),
])
@pytest.mark.parametrize("f", [WHOLE_DAY, OFF_HOUR], ids=["rollup", "raw-rows"])
def test_health_rows_count_retries_failures_and_verdicts_by_hand(store: AuditStore, f: DecisionFilter, keys: list[str],
                                                                 expected: dict[tuple[str, ...], dict]) -> None:
    write_all(store, [*RECORDS, BIND_FAILED])
    rows = health.KIND.answer(_ask(store, f, keys))["rows"]
    assert _figures(rows, tuple(keys)) == expected


@pytest.mark.parametrize(("kind", "keys", "figures"), [
    pytest.param(fallback, ["tenant", "preferred", "model"], decision_rows.FALLBACK_ROW, id="fallback"),
    pytest.param(fallback, ["hour", "outcome"], decision_rows.FALLBACK_ROW, id="fallback-by-hour-and-outcome"),
    pytest.param(fallback, ["reason", "preferred"], decision_rows.REASON_ROW, id="fallback-skip-reasons"),
    pytest.param(overview, ["tenant"], (*decision_rows.FALLBACK_ROW, "pending_now", "starving_pods"), id="overview"),
    pytest.param(fairness, ["tenant"], decision_rows.FAIRNESS_ROW, id="fairness"),
    pytest.param(fairness, ["hour", "tenant"], decision_rows.FAIRNESS_ROW, id="fairness-by-hour"),
    pytest.param(health, ["hour"], decision_rows.HEALTH_ROW, id="health"),
    pytest.param(health, ["model"], decision_rows.HEALTH_MODEL_ROW, id="health-by-model"),
    pytest.param(health, ["hour", "model"], decision_rows.HEALTH_MODEL_ROW, id="health-by-hour-and-model"),
])
def test_every_figure_of_the_rows_has_a_definition(store: AuditStore, kind: Any, keys: list[str],
                                                   figures: tuple[str, ...]) -> None:
    write_all(store, RECORDS)
    rows = kind.KIND.answer(_ask(store, WHOLE_DAY, keys))["rows"]
    assert rows
    # a field added to the rows fails here until it is listed, and so defined, with its surface
    assert {k for r in rows for k in r} - set(keys) == set(figures)
    defined = {d.name for d in decision_rows.DEFINITIONS}
    pod_figures = {d.name for d in catalog.DEFINITIONS if d.counts == "pod"}
    # overview's pending and starving pods come from the pod lifecycle: defined with the pod families
    assert {n for n in figures if n not in defined} <= pod_figures
    assert {n for n in figures if n not in pod_figures} <= defined


def test_each_decision_row_figure_is_defined_once_with_its_unit() -> None:
    names = [d.name for d in decision_rows.DEFINITIONS]
    assert sorted(names) == sorted({*decision_rows.FALLBACK_ROW, *decision_rows.FAIRNESS_ROW,
                                    *decision_rows.REASON_ROW, *decision_rows.HEALTH_ROW})
    assert {d.family for d in decision_rows.DEFINITIONS} == {"decision_rows"}
    assert all(d.counts.startswith(("decision record", "device verdict")) for d in decision_rows.DEFINITIONS)
