"""A policy that comes in force while pods wait moves their deadlines: the end of a wait for the
preferred model and the time a pod may make a reservation are those of the policy in force, not
those of the policy its last decision was made under; a window's replay restores them."""

from __future__ import annotations

import pytest

from audit.policy import policy_document
from audit.records import to_jsonl
from audit.replay.whatif import whatif
from audit.timestamps import parse_time_ms
from audit.world import World
from tests.scheduler.worlds import ALL_DEVICES, H100_NODES, MINUTE, cluster, hold, submit

NODES = ("h100-000", "h100-001", "a100-000", "a100-001", "l40s-000")


def waiting_for_h100(first: dict, then: dict, at_min: float, run_min: float, **policy: object):  # noqa: ANN202
    """Every H100 busy for the hour, A100 free: a pod that prefers H100 waits under ``first``;
    ``then`` comes in force ``at_min`` after it arrived; no release comes. ``policy``: more of both
    policies' spec (``queueing``, say)."""
    sim = cluster(fallback=first, **policy)
    for node in H100_NODES:
        hold(sim, node, ALL_DEVICES)
    submitted = sim.now
    submit(sim, "job")
    sim.schedule_pass()
    doc = policy_document(sim.world.policy)
    doc["spec"].update(version="2", fallback=then, **policy)
    sim.schedule(submitted + round(at_min * MINUTE), "policy", doc)
    sim.run_until(submitted + round(run_min * MINUTE))
    return sim, submitted, doc


WAIT_5 = {"mode": "wait-for-preferred", "wait": "5m"}


@pytest.mark.parametrize(("then", "expected"), [
    pytest.param({"mode": "wait-for-preferred", "wait": "3m"},
                 [("00:00:00", "deferred", "", "1"), ("00:03:00", "allocated", "A100", "2")],
                 id="a-shorter-wait-ends-at-its-own-end"),
    pytest.param({"mode": "wait-for-preferred", "wait": "10m"},
                 [("00:00:00", "deferred", "", "1"), ("00:10:00", "allocated", "A100", "2")],
                 id="a-longer-wait-ends-at-its-own-end-with-no-release"),
    # no H100 has ever been released: no estimate holds the pod
    pytest.param({"mode": "adaptive", "maxWait": "4m"},
                 [("00:00:00", "deferred", "", "1"), ("00:01:00", "allocated", "A100", "2")],
                 id="adaptive-with-no-estimate-falls-back-at-once"),
    pytest.param({"mode": "immediate"},
                 [("00:00:00", "deferred", "", "1"), ("00:01:00", "allocated", "A100", "2")],
                 id="immediate-fallback-at-once"),
])
def test_a_wait_for_the_preferred_model_ends_when_the_policy_in_force_says(then, expected):
    sim, _, _ = waiting_for_h100(WAIT_5, then, 1, 12)
    assert [(r.time[11:19], r.outcome, r.allocated_model, r.policy_version) for r in sim.records] == expected


@pytest.mark.parametrize(("then", "since_min", "fell_back"), [
    pytest.param({"mode": "wait-for-preferred", "wait": "3m"}, 2, "2026-11-02T00:03:00.000Z",
                 id="shorter-wait-window-from-after-the-change"),
    pytest.param({"mode": "wait-for-preferred", "wait": "10m"}, 6, "2026-11-02T00:10:00.000Z",
                 id="longer-wait-window-from-after-the-first-policys-end"),
])
def test_a_window_after_a_policy_change_restores_the_moved_deadline(then, since_min, fell_back):
    """A window of the recorded policy starting after the change (and, for the longer wait, after
    the end the first policy had armed) falls back when the run did."""
    sim, submitted, doc = waiting_for_h100(WAIT_5, then, 1, 12)
    since = submitted + since_min * MINUTE
    start = World(sim.world.cluster)
    for e in sim.events:
        if parse_time_ms(e.time) < since:
            start.apply(e)
    w = whatif(start, sim.events, sim.records, doc, since, submitted + 12 * MINUTE)
    assert [(r.time, r.outcome) for r in w.counterfactual.records] == [(fell_back, "allocated")]
    assert to_jsonl(w.counterfactual.records) == to_jsonl(w.recorded.records)
    assert [e.to_dict() for e in w.counterfactual.events] == [e.to_dict() for e in w.recorded.events]


def test_a_pod_past_a_shorter_reserve_after_is_tried_for_a_reservation_when_the_policy_comes_in_force():
    """``reserveAfter`` 10m, then 2m from minute 5: the 4-GPU pod that fits nowhere has waited
    past the new mark, so it is tried at once and reserves; the first policy's action at 10 min
    tries nothing more."""
    sim = cluster(queueing={"reserveAfter": "10m"})
    for node in NODES:
        hold(sim, node, [0, 1, 2, 3, 4])
    submitted = sim.now
    submit(sim, "big", size=4)
    sim.schedule_pass()
    doc = policy_document(sim.world.policy)
    doc["spec"].update(version="2", queueing={"reserveAfter": "2m"})
    sim.schedule(submitted + 5 * MINUTE, "policy", doc)
    sim.run_until(submitted + 12 * MINUTE)
    assert [(r.time[11:19], r.attempt, r.policy_version, [b.code for b in r.blockers if b.code.startswith("reserv")])
            for r in sim.records] == [("00:00:00", 1, "1", []), ("00:05:00", 2, "2", ["reservation_made"])]


def _busy_day_with_a_change():  # noqa: ANN202
    """Four hours of busy-small, waiting 5 minutes for the preferred model and reserving after
    10, until a policy at 3 h waits 2 and reserves after 4: pods are pending across the change."""
    from ingest.simulate.loop import simulate
    from ingest.simulate.scenario import load_scenario_text
    from tests.scheduler.busysmall import SCENARIO

    with open(SCENARIO, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "busy-small.yaml")
    sc.policy["spec"].update(fallback={"mode": "wait-for-preferred", "wait": "5m"}, queueing={"reserveAfter": "10m"})
    for _, doc in sc.policy_changes:
        doc["spec"].update(fallback={"mode": "wait-for-preferred", "wait": "2m"}, queueing={"reserveAfter": "4m"})
    return simulate(sc, seed=3, hours=4.0)


@pytest.mark.parametrize("after_change_min", [1, 7])
def test_a_busy_window_starting_after_a_policy_change_replays_as_the_run(after_change_min):
    res = _busy_day_with_a_change()
    change = next(e for e in res.events if e.object_kind == "Policy" and e.payload["spec"]["version"] == "2")
    since = parse_time_ms(change.time) + after_change_min * MINUTE + 777
    start = World(res.world.cluster)
    for e in res.events:
        if parse_time_ms(e.time) < since:
            start.apply(e)
    assert start.pending  # pods wait across the change
    w = whatif(start, res.events, res.records, change.payload, since, since + 40 * MINUTE)
    assert len(w.recorded.records) > 20
    assert to_jsonl(w.counterfactual.records) == to_jsonl(w.recorded.records)
    assert [e.to_dict() for e in w.counterfactual.events] == [e.to_dict() for e in w.recorded.events]
