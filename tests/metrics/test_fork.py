"""A forked fold: two histories that share a beginning fold it once and go on apart.

Each fork ends in exactly the state, and reads exactly the lifecycle, of a fold of its own whole
log from the start (every float compared bit for bit, every container in its iteration order);
and folding events into one fork leaves the other, and the lifecycles it handed out, as they were.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.events import WorldEvent
from audit.metrics import Lifecycle, LifecycleFold, Window, fairness_report, fallback_report
from tests.metrics.eventlog import MIN, T0, Log, policy_doc
from tests.metrics.foldstate import fold_state
from tests.metrics.histories import PodPlan, TaintPlan, history, plans, taint_plans


def _fold(*parts: list[WorldEvent], read_between: bool = False, judge_last: bool = False) -> LifecycleFold:
    """A fold of the parts' events, in order, read (``lifecycle()``) after each part but the last
    if ``read_between`` (what a fork read before it was taken must equal: reading fixes the
    columns' codes), its last instant judged if ``judge_last``."""
    fold = LifecycleFold("c1")
    for i, part in enumerate(parts):
        fold.apply_all(part)
        if read_between and i < len(parts) - 1:
            fold.lifecycle()
    if judge_last:
        fold.end_instant()
    return fold


def _assert_as_alone(fold: LifecycleFold, alone: LifecycleFold) -> None:
    """``fold`` reads the lifecycle of, and is in the state of, ``alone``: a fold of its whole log."""
    assert _figures(fold.lifecycle()) == _figures(alone.lifecycle())
    assert fold_state(fold) == fold_state(alone)


def _figures(life: Lifecycle) -> Any:
    window = Window(T0, T0 + 120 * MIN)
    return fold_state([life, fairness_report(life, window), fallback_report(life, window)])


@settings(max_examples=80)
@given(plans, taint_plans, st.floats(0, 1), st.booleans(), st.booleans(), st.data())
def test_each_fork_goes_on_exactly_as_a_fold_of_its_whole_log(
        pods: list[PodPlan], taints: list[TaintPlan], at: float, read_before: bool, judge_last: bool,
        data: st.DataObject) -> None:
    events = history(pods, taints).events
    k = int(at * len(events))  # anywhere, the middle of an instant included
    head, ours = events[:k], events[k:]
    # the other side goes on with some of the same later events: a history of its own after ``head``
    keep = data.draw(st.lists(st.booleans(), min_size=len(ours), max_size=len(ours)))
    theirs = [e for e, kept in zip(ours, keep, strict=True) if kept]
    base = LifecycleFold("c1").apply_all(head)
    if read_before:
        base.lifecycle()
    fork = base.fork()
    for fold, rest in ((fork, ours), (base, theirs)):
        fold.apply_all(rest)
        if judge_last:
            fold.end_instant()
        _assert_as_alone(fold, _fold(head, rest, read_between=read_before, judge_last=judge_last))


def _fallback_then(release: bool) -> Log:
    """An H100 node of 4 held by team-z/x1 and an A100 node of 8: team-a/p asks for 4, H100 first,
    and falls back to the A100 node at minute 1. Up to minute 3 both histories are the same; then
    x1 leaves at minute 5 (team-a/p is regretted: its first choice fits now) or stays."""
    log = Log(policy_doc("1", {"team-a": 1, "team-z": 1})).nodes("H100", 1, 4).nodes("A100", 1, 8)
    log.at(0).pod("team-z/x1", ("gpu", ["H100"], 4)).bind("team-z/x1", "h100-0", {"gpu": ("", [0, 1, 2, 3])})
    log.at(1).pod("team-a/p", ("gpu", ["H100", "A100"], 4)).bind("team-a/p", "a100-0", {"gpu": ("a100", [0, 1, 2, 3])})
    log.tick(3).pod("team-z/x2", ("gpu", ["A100"], 2))
    if release:
        log.at(5).finish("team-z/x1")
    log.at(6).bind("team-z/x2", "a100-0", {"gpu": ("", [4, 5])})
    log.tick(30)
    return log


def _shared_head() -> tuple[list[WorldEvent], list[WorldEvent], list[WorldEvent]]:
    released, kept = _fallback_then(True).events, _fallback_then(False).events
    k = next(i for i, (a, b) in enumerate(zip(released, kept, strict=False)) if a != b)
    assert k > 0 and released[k - 1].time < released[k].time  # the head ends with an instant
    return released[:k], released[k:], kept[k:]


def _regretted(life: Lifecycle) -> bool:
    (p,) = [p for p in life.pods if p.key == "team-a/p"]
    assert p.fallback
    return p.regretted


def test_folding_into_a_fork_leaves_the_fold_it_came_from_and_what_that_handed_out_as_they_were() -> None:
    head, released, kept = _shared_head()
    base = LifecycleFold("c1").apply_all(head)
    handed_out = base.lifecycle()
    before, figures_before = fold_state(base), _figures(handed_out)
    fork = base.fork()
    fork.apply_all(released)
    fork.end_instant()
    assert _regretted(fork.lifecycle())  # the fork's rows, world and regret watch moved on ...
    assert fold_state(base) == before  # ... and none of it was the fold's own
    assert _figures(handed_out) == figures_before
    base.apply_all(kept)
    base.end_instant()
    assert not _regretted(base.lifecycle())
    _assert_as_alone(base, _fold(head, kept, read_between=True, judge_last=True))


def test_folding_into_the_fold_a_fork_came_from_leaves_the_fork_as_it_was() -> None:
    head, released, kept = _shared_head()
    base = LifecycleFold("c1").apply_all(head)
    fork = base.fork()
    before = fold_state(fork)
    base.apply_all(released)
    base.end_instant()
    assert _regretted(base.lifecycle())
    assert fold_state(fork) == before
    fork.apply_all(kept)
    fork.end_instant()
    assert not _regretted(fork.lifecycle())
    _assert_as_alone(fork, _fold(head, kept, judge_last=True))


def test_a_fork_holds_every_field_its_original_does() -> None:
    """A field added to a fold, its world, its regret watch or its columns and not to ``fork`` fails here."""
    head, _, _ = _shared_head()
    base = LifecycleFold("c1").apply_all(head)
    base.lifecycle()
    fork = base.fork()
    for ours, theirs in ((base, fork), (base.world, fork.world), (base._regret, fork._regret),
                         (base._columns, fork._columns)):
        assert list(vars(theirs)) == list(vars(ours))
    assert fold_state(fork) == fold_state(base)
