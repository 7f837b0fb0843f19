"""The pod lifecycle folded from an event log: one row per pod, what it got, when."""

from __future__ import annotations

import pytest

from audit.metrics import fold_lifecycle
from tests.metrics.eventlog import MIN, T0, Log


def _one(log: Log, pod: str) -> object:
    rows = [p for p in fold_lifecycle(log.events, "c1").pods if p.key == pod]
    assert len(rows) == 1
    return rows[0]


def test_a_pod_retried_many_times_is_one_row_with_its_first_bind() -> None:
    log = Log().nodes("H100", 1, 2).at(1).pod("team-a/p", ("gpu", ["H100", "A100"], 2))
    for minute in range(2, 12):  # failed attempts leave records, not events: nothing here to count
        log.tick(minute)
    log.at(15).bind("team-a/p", "h100-0", {"gpu": ("h100", [0, 1])})
    rows = fold_lifecycle(log.events, "c1").pods
    assert [(p.key, p.created_ms - T0, p.bound_ms - T0) for p in rows] == [("team-a/p", 1 * MIN, 15 * MIN)]


def test_a_multi_request_claim_falling_back_on_its_second_request_is_a_fallback() -> None:
    log = Log().nodes("H100", 1, 4).second_pool("h100-0", "A100", 4)
    log.at(0).pod("team-a/p", ("first", ["H100", "A100"], 1), ("second", ["H100", "A100"], 1))
    log.at(1).bind("team-a/p", "h100-0", {"first": ("h100", [0]), "second": ("a100", [1], "h100-0-a100")})
    p = _one(log, "team-a/p")
    assert (p.tiers, p.first_choice, p.fallback, p.alternatives) == ((0, 1), False, True, True)
    # each device weighs its own model: an H100 (1.0) and an A100 (0.5) in the default table
    assert (p.devices, p.allocated, p.h100_eq) == (2, "A100|H100", 1.5)


def test_rows_per_track_and_outcome() -> None:
    log = Log().nodes("H100", 1, 8).dp_nodes("L4", 1, 4)
    log.at(0).pod("team-a/bound", ("gpu", ["H100", "A100"], 2)).dp_pod("team-b/dp", 3).pod("team-a/failed", ("gpu", ["H100"], 1))
    log.pod("team-a/pending", ("gpu", ["H100"], 16))
    log.at(5).bind("team-a/bound", "h100-0", {"gpu": ("h100", [0, 1])}).bind("team-b/dp", "l4-dp-0")
    log.at(6).fail("team-a/failed")
    log.at(30).finish("team-a/bound")
    rows = {p.key: p for p in fold_lifecycle(log.events, "c1").pods}
    got = {k: (p.track, p.bound_ms is not None, p.failed_ms is not None, p.devices, p.allocated, p.h100_eq,
               p.allocated_ms is not None and p.allocated_ms - T0, p.released_ms is not None and p.released_ms - T0)
           for k, p in rows.items()}
    assert got == {
        "team-a/bound": ("dra", True, False, 2, "H100", 2.0, 5 * MIN, 30 * MIN),
        "team-b/dp": ("device-plugin", True, False, 3, "L4", 3 * 0.12, 5 * MIN, False),
        "team-a/failed": ("dra", False, True, 0, "", 0.0, False, False),
        "team-a/pending": ("dra", False, False, 0, "", 0.0, False, False),
    }
    assert rows["team-a/failed"].failed_ms == T0 + 6 * MIN
    assert (rows["team-a/pending"].alternatives, rows["team-a/bound"].preferred) == (False, "H100")


def test_the_policy_and_capacity_timelines_follow_the_log() -> None:
    from tests.metrics.eventlog import policy_doc

    log = Log(policy_doc("1", {"a": 1, "b": 1})).nodes("H100", 1, 8).nodes("A100", 1, 8)
    log.at(60).emit("Policy", "", "p", policy_doc("2", {"a": 1, "b": 2}))
    log.tick(61)
    life = fold_lifecycle(log.events, "c1")
    assert [(t - T0, p.version) for t, p in life.policies] == [(0, "1"), (60 * MIN, "2")]
    assert [(t - T0, cap) for t, cap in life.capacity] == [(0, 8 * 1.0 + 8 * 0.5)]


PRODUCT = "nvidia.com/gpu.product"  # the label GPU feature discovery sets on device-plugin nodes


def _requiring(*values: str) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": PRODUCT, "operator": "In", "values": list(values)}]}]}}}


@pytest.mark.parametrize(
    ("constraints", "asked"),
    [
        ({"nodeSelector": {PRODUCT: "NVIDIA-H100-80GB-HBM3"}}, "H100"),
        ({"affinity": _requiring("NVIDIA-L4")}, "L4"),
        ({"affinity": _requiring("NVIDIA-L4", "NVIDIA-H100-80GB-HBM3")}, "H100|L4"),
        ({}, "H100|L4"),  # no constraint: any device-plugin GPU
        ({"nodeSelector": {PRODUCT: "NVIDIA-A100-SXM4-80GB"}}, ""),  # no device-plugin node has it
        # a selector and an affinity must both hold
        ({"nodeSelector": {PRODUCT: "NVIDIA-L4"}, "affinity": _requiring("NVIDIA-H100-80GB-HBM3")}, ""),
    ],
    ids=["node-selector", "affinity", "affinity-of-two", "unconstrained", "no-node-has-it", "selector-and-affinity"],
)
def test_a_device_plugin_pod_asks_for_the_models_of_the_nodes_its_constraints_admit(constraints: dict,
                                                                                    asked: str) -> None:
    log = Log().nodes("H100", 1, 8).dp_nodes("H100", 1, 8).dp_nodes("L4", 2, 8)
    log.at(0).dp_pod("team-a/dp", 1, **constraints).pod("team-a/dra", ("gpu", ["H100", "A100"], 1))
    # it got an L4, whatever it asked for: what it asked for does not change with what it got
    log.at(1).bind("team-a/dp", "l4-dp-0")
    assert (_one(log, "team-a/dp").asked, _one(log, "team-a/dra").asked) == (asked, "")


def test_ending_the_instant_judges_it_as_the_next_event_would() -> None:
    """A fold cut at a window's end, its last instant ended, has the timelines of the whole log's
    fold up to that end: a node added in the last instant counts from then."""
    from audit.metrics import LifecycleFold

    log = Log().nodes("H100", 1, 4).at(59).nodes("A100", 1, 4).at(70).pod("team-a/p", ("gpu", ["H100"], 1))
    cut = [e for e in log.events if e.time < log.events[-1].time]
    whole = fold_lifecycle(log.events, "c1")
    unended = LifecycleFold("c1").apply_all(cut).lifecycle()
    fold = LifecycleFold("c1").apply_all(cut)
    fold.end_instant()
    ended = fold.lifecycle()
    assert whole.capacity == [(T0, 4.0), (T0 + 59 * MIN, 6.0)]
    assert unended.capacity == whole.capacity[:1]  # the instant at 59 min not judged yet
    assert ended.capacity == whole.capacity and ended.policies == whole.policies
    fold.apply_all(log.events[len(cut):])  # folding on after it judges nothing twice
    assert fold.lifecycle().capacity == whole.capacity
