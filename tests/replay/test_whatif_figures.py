"""The what-if comparison shows audit.metrics' pod figures, as docs/metrics.md defines them.

A two-tenant history written by hand pins every figure of both columns to values worked out on
paper; a simulated window is recounted from its raw event log by a scan written here; and the
recorded column of a simulated hour is held equal to what ``audit.metrics`` reports for the same
window over the whole recorded log (what the ``simulate`` summary and ``/v1/stats/*`` show).
"""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest

from audit.metrics import LifecycleFold, Window, fairness_report, fallback_report, fold_lifecycle
from audit.replay.service import counterfactual
from audit.replay.whatif import Side, WhatIf, delta_lines, deltas, side_lifecycle
from audit.timestamps import parse_time_ms
from tests.metrics.eventlog import MIN, T0, Log, policy_doc
from tests.replay.runs import busy, busy_source

HOUR = 60 * MIN


# ---- a history worked out by hand -----------------------------------------------------------------


def _side(b_gets_h100: bool) -> Log:
    """One H100 node and one A100 node (4 GPUs each: 4 + 4 × 0.5 = 6 H100-eq); tenants a, b, c of
    weight 1. a/p1 asks for 2 of H100-else-A100 at 0 and gets 2 H100 at 10 min; b/p2 asks for 1
    at 0 and gets, at 30 min, an A100 (recorded: a fallback) or an H100 (counterfactual). c has no
    pod. Both run past the window [0, 60 min); the history goes on after it."""
    log = Log(policy_doc("1", {"a": 1, "b": 1, "c": 1})).nodes("H100", 1, 4).nodes("A100", 1, 4)
    log.pod("a/p1", ("gpu", ["H100", "A100"], 2)).pod("b/p2", ("gpu", ["H100", "A100"], 1))
    log.at(10).bind("a/p1", "h100-0", {"gpu": ("h100", (0, 1))})
    if b_gets_h100:
        log.at(30).bind("b/p2", "h100-0", {"gpu": ("h100", (2,))})
    else:
        log.at(30).bind("b/p2", "a100-0", {"gpu": ("a100", (0,))})
    return log


@pytest.fixture(scope="module")
def by_hand() -> dict:
    lives = [side_lifecycle(LifecycleFold("c1"), [e for e in _side(gets).events if parse_time_ms(e.time) < T0 + HOUR],
                            True) for gets in (False, True)]
    w = WhatIf(Side([], [], [], lives[0]), Side([], [], [], lives[1]), T0, T0 + HOUR)
    return deltas(w)


def _jain(xs: list[Fraction]) -> float:
    return float(sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)))


def test_jain_whole_is_h100_eq_hours_against_entitlement_worked_out_by_hand(by_hand: dict) -> None:
    # entitlement: 6 H100-eq × 1 h × 1/3 = 2 H100-eq-h each. a used 2 H100 × 50 min = 5/3;
    # b used an A100 × 30 min = 1/4 (recorded) or an H100 × 30 min = 1/2; c used nothing.
    entitled = Fraction(2)
    recorded = _jain([Fraction(5, 3) / entitled, Fraction(1, 4) / entitled, Fraction(0)])
    replayed = _jain([Fraction(5, 3) / entitled, Fraction(1, 2) / entitled, Fraction(0)])
    assert by_hand["jain_whole"] == pytest.approx([recorded, replayed], abs=1e-12)
    assert by_hand["jain_whole"][0] == pytest.approx(0.4311, abs=1e-4)
    assert by_hand["jain_contention"] == [None, None] and by_hand["contention_windows"] == [0, 0]


def test_tenant_figures_count_pods_in_seconds_with_nulls_for_empty_populations(by_hand: dict) -> None:
    t = by_hand["tenants"]
    assert list(t) == ["a", "b", "c"]
    assert t["a"] == {"pods_started": [1, 1], "wait_p50_s": [600.0, 600.0], "wait_p95_s": [600.0, 600.0],
                      "pending_at_end": [0, 0], "failed": [0, 0], "pods_with_preference": [1, 1],
                      "first_choice_rate": [1.0, 1.0], "fallbacks": [0, 0],
                      "h100_eq_hours": pytest.approx([5 / 3, 5 / 3]), "entitlement_h100_eq_hours": [2.0, 2.0]}
    assert t["b"] == {"pods_started": [1, 1], "wait_p50_s": [1800.0, 1800.0], "wait_p95_s": [1800.0, 1800.0],
                      "pending_at_end": [0, 0], "failed": [0, 0], "pods_with_preference": [1, 1],
                      "first_choice_rate": [0.0, 1.0], "fallbacks": [1, 0],
                      "h100_eq_hours": pytest.approx([0.25, 0.5]), "entitlement_h100_eq_hours": [2.0, 2.0]}
    # c had no pod: no wait to take a percentile of and no pod to be first choice — null, not 0
    assert t["c"] == {"pods_started": [0, 0], "wait_p50_s": [None, None], "wait_p95_s": [None, None],
                      "pending_at_end": [0, 0], "failed": [0, 0], "pods_with_preference": [0, 0],
                      "first_choice_rate": [None, None], "fallbacks": [0, 0],
                      "h100_eq_hours": [0.0, 0.0], "entitlement_h100_eq_hours": [2.0, 2.0]}
    assert by_hand["models"] == {"a/H100": [1, 1], "b/A100": [1, 0], "b/H100": [0, 1]}


def test_the_table_names_each_figure_as_the_reference_does_with_its_unit(by_hand: dict) -> None:
    rows = {line[:40].strip(): line[40:].split() for line in delta_lines(by_hand)[1:]}
    assert rows["jain_whole"] == ["0.431", "0.517"]
    assert rows["jain_contention"] == ["-", "-"]
    assert rows["a wait_p50_s"] == ["600.0s", "600.0s"]  # seconds, and labelled so
    assert rows["b first_choice_rate"] == ["0.0%", "100.0%"]
    assert rows["c first_choice_rate"] == ["-", "-"]
    assert rows["c wait_p95_s"] == ["-", "-"]
    assert rows["b h100_eq_hours"] == ["0.2", "0.5"]
    assert rows["b/H100 pods_started"] == ["0", "1"]
    assert not any(label.endswith("_ms") or "fallback_rate" in label for label in rows)


# ---- a simulated window ---------------------------------------------------------------------------

HOURS = 3.0


def _window() -> tuple[int, int]:
    t0 = parse_time_ms(busy(HOURS).events[0].time)
    return t0 + HOUR, t0 + 2 * HOUR  # an hour in the middle: history before it and after it


def _whatif(doc: dict) -> WhatIf:
    day = busy(HOURS)
    since, until = _window()
    return counterfactual(busy_source(HOURS), day.world.cluster, day.events, day.records, doc, since, until)


@pytest.fixture(scope="module")
def same() -> WhatIf:
    return _whatif(busy(HOURS).events[0].payload)


@pytest.fixture(scope="module")
def tighter() -> WhatIf:
    doc = copy.deepcopy(busy(HOURS).events[0].payload)
    for t in doc["spec"]["tenants"]:
        if t["name"] == "team-b":
            t["quotas"] = {"H100": {"nominal": 2, "borrowingLimit": 0}}
    return _whatif(doc)


def test_the_recorded_column_is_what_audit_metrics_reports_for_the_window(same: WhatIf) -> None:
    """The ``simulate`` summary's and ``/v1/stats/*``'s figures: the whole log folded, the window cut."""
    day = busy(HOURS)
    window = Window(*_window())
    life = fold_lifecycle(day.events, day.world.cluster)
    fair = fairness_report(life, window)
    d = deltas(same)
    assert d["jain_whole"] == [fair["jain_whole"]] * 2
    assert d["jain_contention"] == [fair["jain_contention"]] * 2
    assert d["contention_windows"] == [fair["contention_windows"]] * 2
    assert fair["contention_windows"] >= 1  # the hour was contended: the index is not the trivial one
    assert sorted(d["tenants"]) == sorted(row["tenant"] for row in fair["tenants"]) == ["team-a", "team-b"]
    for row in fair["tenants"]:
        fb = fallback_report(life, window, scope=row["tenant"])
        figures = d["tenants"][row["tenant"]]
        assert row["pods_started"] > 0 and fb["pods_with_preference"] > 0
        for name, (recorded, replayed) in figures.items():
            expected = row[name] if name in row else fb[name]
            assert recorded == replayed == expected, name


def _independent_waits(events: list, until_ms: int, since_ms: int) -> dict[str, list[int]]:
    """Per namespace, first bind − creation of every pod asking for GPUs first bound in the window,
    read straight off the Pod objects of the log (no world fold, no audit.metrics)."""
    created: dict[str, int] = {}
    bound: dict[str, int] = {}
    for ev in events:
        if ev.object_kind != "Pod" or ev.type != "upsert" or parse_time_ms(ev.time) >= until_ms:
            continue
        key = f"{ev.namespace}/{ev.name}"
        spec = ev.payload.get("spec") or {}
        if not spec.get("resourceClaims"):
            continue
        created.setdefault(key, parse_time_ms(ev.payload["metadata"]["creationTimestamp"]))
        if spec.get("nodeName") and key not in bound:
            bound[key] = parse_time_ms(ev.time)
    out: dict[str, list[int]] = {}
    for key, at in bound.items():
        if since_ms <= at < until_ms:
            out.setdefault(key.split("/")[0], []).append(at - created[key])
    return {ns: sorted(w) for ns, w in out.items()}


def _rank(sorted_ms: list[int], pct: int) -> float:
    n = len(sorted_ms)
    return sorted_ms[max(1, -(-pct * n // 100)) - 1] / 1000  # the ⌈pct·n/100⌉-th smallest, in seconds


def test_both_columns_recount_from_the_raw_event_logs(tighter: WhatIf) -> None:
    """Pods started and their wait percentiles, recounted per side from the events before the
    window and that side's events of it; the tighter quota moves team-b's waits."""
    day = busy(HOURS)
    since, until = _window()
    before = [e for e in day.events if parse_time_ms(e.time) < since]
    d = deltas(tighter)
    for column, side in enumerate((tighter.recorded, tighter.counterfactual)):
        waits = _independent_waits(before + side.events, until, since)
        assert sorted(waits) == sorted(d["tenants"])
        for tenant, ms in waits.items():
            figures = d["tenants"][tenant]
            assert figures["pods_started"][column] == len(ms)
            assert figures["wait_p50_s"][column] == _rank(ms, 50)
            assert figures["wait_p95_s"][column] == _rank(ms, 95)
    assert d["tenants"]["team-b"]["pods_started"][0] != d["tenants"]["team-b"]["pods_started"][1]
