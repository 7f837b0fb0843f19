"""The columnar passes equal the reference functions exactly, and the fold keeps its columns exact.

Random small histories (``tests.metrics.histories``: pods retried many times, two-request claims,
device-plugin pods, a policy change at the first hour, pods failed or still pending at the end)
are folded once; every per-pod pass, both finished reports and their rows per hour and per model
are then computed on the columns and on the ``PodLife`` rows by the reference functions, for a
random window (clipping pods at both ends, partial hours) and a random tenant scope, and must be
equal — floats to the last bit.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.metrics import LifecycleFold, Window, fairness_report, fallback_report, fold_lifecycle
from audit.metrics.breakdown import BREAKDOWNS, regret_breakdown, wait_breakdown
from audit.metrics.columnar import ColumnarPods
from audit.metrics.columns import PodColumns
from audit.metrics.report import RowPods
from tests.metrics.eventlog import MIN, T0
from tests.metrics.histories import PodPlan, history, plans

windows = st.tuples(st.integers(-10, 135), st.integers(0, 140)).map(
    lambda ab: Window(T0 + min(ab) * MIN + 7_001, T0 + max(ab) * MIN + 13_003))
scopes = st.sampled_from((None, "a", "b", "c", "nobody"))


def _waits(stats: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    return {k: ([int(w) for w in s.waits_ms], s.pending_at_end, s.failed, s.longest_wait_ms) for k, s in stats.items()}


@settings(max_examples=200, deadline=None)
@given(plans, windows, scopes)
def test_columnar_passes_equal_the_reference(pods: list[PodPlan], window: Window, scope: str | None) -> None:
    life = fold_lifecycle(history(pods).events, "c1")
    assert life.columns is not None
    rows, cols = RowPods(life.pods), ColumnarPods(life.columns)
    group = (lambda t: t) if scope is None else (lambda t: t if t == scope else "(others)")
    assert cols.usage(window) == rows.usage(window)
    assert cols.alive_tenants(window) == rows.alive_tenants(window)
    assert _waits(cols.waits(window, group)) == _waits(rows.waits(window, group))
    assert cols.starving(window, 20 * MIN, group) == rows.starving(window, 20 * MIN, group)
    assert cols.pending(window) == rows.pending(window)
    assert cols.hourly_use(window) == rows.hourly_use(window)
    assert cols.fallback(window, scope) == rows.fallback(window, scope)
    reference = dataclasses.replace(life, columns=None)
    assert fairness_report(life, window, scope) == fairness_report(reference, window, scope)
    assert fallback_report(life, window, scope) == fallback_report(reference, window, scope)
    for by in BREAKDOWNS:
        assert wait_breakdown(life, window, by, scope) == wait_breakdown(reference, window, by, scope)
        assert regret_breakdown(life, window, by, scope) == regret_breakdown(reference, window, by, scope)


@settings(max_examples=100, deadline=None)
@given(plans, st.lists(st.integers(0, 400), max_size=6))
def test_columns_kept_row_by_row_equal_columns_built_at_once(pods: list[PodPlan], reads: list[int]) -> None:
    """Reading the lifecycle part-way (the store does, between batches) syncs only changed rows;
    the columns at the end are still exactly the final rows'."""
    events = history(pods).events
    fold = LifecycleFold("c1")
    for i, ev in enumerate(events):
        fold.apply(ev)
        if i in reads:
            fold.lifecycle()
    life = fold.lifecycle()
    assert life.columns is not None
    got, want = life.columns, PodColumns.of(life.pods).view()
    for f in dataclasses.fields(got):
        a, b = getattr(got, f.name), getattr(want, f.name)
        if f.name in ("tenant", "preferred", "allocated"):  # codes depend on first sight: compare the strings
            a, b = [got.names[x] for x in a.tolist()], [want.names[x] for x in b.tolist()]
        elif f.name == "h100_eq":
            a, b = [got.weights[x] for x in a.tolist()], [want.weights[x] for x in b.tolist()]
        elif f.name in ("names", "weights"):
            continue
        assert np.array_equal(a, b), f.name


def test_pending_intervals_merge_alike_when_creation_times_lie_decades_apart() -> None:
    """A pod created at the epoch (a creationTimestamp a cluster got wrong) beside pods of 2026:
    the starts no longer fit the single sort key, and the merge must still equal the reference's."""
    from tests.metrics.test_breakdown import _pod

    pods = [_pod("old", "a", 0, 1), _pod("p1", "a", T0 // MIN, T0 // MIN + 30), _pod("p2", "b", T0 // MIN + 10),
            _pod("p3", "a", T0 // MIN + 20, T0 // MIN + 40)]
    window = Window(0, T0 + 60 * MIN)
    got = ColumnarPods(PodColumns.of(pods).view()).pending(window)
    assert got == RowPods(pods).pending(window) == {
        "a": [(0, MIN), (T0, T0 + 40 * MIN)], "b": [(T0 + 10 * MIN, T0 + 60 * MIN)]}


def test_a_snapshot_handed_out_keeps_its_rows_while_the_fold_goes_on() -> None:
    """The store computes a figure from a snapshot outside its lock while the next request folds
    new events: the snapshot's columns must stay what they were when it was taken."""
    from tests.metrics.test_breakdown import _pod

    pods = [_pod("p1", "a", 0), _pod("p2", "b", 5)]
    columns = PodColumns.of(pods)
    before = columns.view()
    bound_before = before.bound_ms.copy()
    pods[0] = dataclasses.replace(pods[0], bound_ms=10 * MIN)
    columns.sync(pods, [0])
    after = columns.view()
    assert np.array_equal(before.bound_ms, bound_before)
    assert after.bound_ms[0] == 10 * MIN and before.bound_ms[0] != 10 * MIN
