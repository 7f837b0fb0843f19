"""The simulator and counterfactual replay run one cluster loop: pinned digests of both.

The digests below are of a seeded simulated run and of a counterfactual window over it under a
tighter quota (so the counterfactual decides on its own, not only repeats the recorded run). They
change only when the engine's decisions deliberately change; a refactoring of the loop must leave
them as they are.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest

from audit.records import to_jsonl
from audit.replay.whatif import whatif
from audit.scheduler.loop import ClusterLoop
from audit.timestamps import parse_time_ms
from audit.world import World
from ingest.simulate.loop import SimulationResult
from tests.scheduler.busysmall import HOUR, busy_small, window_start

SIMULATED_DIGEST = "dad94ef54b727b7b8ba76f72ae824f2d8905a0ccb7281293456ad6879b2ac258"
COUNTERFACTUAL_DIGEST = "d38432568a0b66d5afbb413bf799369d6335809b9787330a8addf1161d141add"


def _run(queueing: str = "") -> SimulationResult:
    return busy_small((("mode", queueing),) if queueing else ())


def _digest(records, events) -> str:  # noqa: ANN001
    h = hashlib.sha256(to_jsonl(records).encode())
    for e in events:
        h.update(json.dumps(e.to_dict(), sort_keys=True).encode())
    return h.hexdigest()


def _window(policy_doc, queueing=""):  # noqa: ANN001, ANN202
    res = _run(queueing)
    start, since, until = window_start(res)
    return whatif(start, res.events, res.records, policy_doc, since, until)


def test_a_simulated_run_is_unchanged():
    res = _run()
    assert len(res.records) > 3000
    assert _digest(res.records, res.events) == SIMULATED_DIGEST


def test_a_counterfactual_window_under_another_quota_is_unchanged():
    doc = copy.deepcopy(_run().events[0].payload)
    for t in doc["spec"]["tenants"]:
        if t["name"] == "team-b":
            t["quotas"] = {"H100": {"nominal": 2, "borrowingLimit": 0}}
    w = _window(doc)
    assert to_jsonl(w.counterfactual.records) != to_jsonl(w.recorded.records)
    assert _digest(w.counterfactual.records, w.counterfactual.events) == COUNTERFACTUAL_DIGEST


@pytest.mark.parametrize("queueing", ["", "strict"], ids=["best-effort-by-default", "strict"])
def test_the_recorded_policy_reproduces_the_window(queueing):
    res = _run(queueing)
    t0 = parse_time_ms(res.events[0].time)
    active = [e for e in res.events if e.object_kind == "Policy" and parse_time_ms(e.time) < t0 + 2 * HOUR][-1]
    assert active.payload["spec"].get("queueing", {}).get("mode", "") == queueing
    w = _window(active.payload, queueing)
    assert len(w.recorded.records) > 400
    assert to_jsonl(w.counterfactual.records) == to_jsonl(w.recorded.records)
    assert [e.to_dict() for e in w.counterfactual.events] == [e.to_dict() for e in w.recorded.events]


@pytest.mark.parametrize("fallback", [
    pytest.param((("mode", "adaptive"), ("maxWait", "10m")), id="adaptive"),
    pytest.param((("mode", "wait-for-preferred"), ("wait", "5m")), id="wait-for-preferred"),
])
def test_the_recorded_policy_reproduces_a_window_with_pods_holding_for_their_first_choice(fallback):
    """The wakes that end a wait for the preferred model (an adaptive recheck, ``maxWait``, a
    ``wait-for-preferred`` wait) are read from the pods' last records, so a window restores the
    pending ones and its decisions are the run's."""
    res = busy_small(fallback=fallback)
    start, since, until = window_start(res)
    active = [e for e in res.events if e.object_kind == "Policy" and parse_time_ms(e.time) < since][-1]
    assert active.payload["spec"]["fallback"]["mode"] == dict(fallback)["mode"]
    w = whatif(start, res.events, res.records, active.payload, since, until)
    assert sum(r.outcome == "deferred" for r in w.recorded.records) > 20
    assert to_jsonl(w.counterfactual.records) == to_jsonl(w.recorded.records)
    assert [e.to_dict() for e in w.counterfactual.events] == [e.to_dict() for e in w.recorded.events]


def test_the_world_keeps_each_tenants_pending_pods_in_queue_order():
    """``World.pending_order`` (what queue-skip evidence reads) is the sorted pending pods per
    tenant at every point of a run, and a world rebuilt from a snapshot has the same."""
    res = _run()
    world = World(res.world.cluster)
    checked = 0
    for i, ev in enumerate(res.events):
        world.apply(ev)
        if i % 250 == 0 or i == len(res.events) - 1:
            expected: dict[str, list[tuple[int, str]]] = {}
            for key, created in world.pending.items():
                expected.setdefault(world.policy.tenant_for(key.split("/")[0]), []).append((created, key))
            assert {t: v for t, v in world.pending_order.items() if v} == {t: sorted(v) for t, v in expected.items()}
            checked += bool(expected)
    assert checked > 10
    rebuilt = World.from_snapshot(world.snapshot())
    assert {t: v for t, v in rebuilt.pending_order.items() if v} == {t: v for t, v in world.pending_order.items() if v}


@pytest.mark.parametrize("queueing", ["", "strict"], ids=["best-effort-by-default", "strict"])
def test_every_decision_of_the_run_replays_to_its_digests(queueing):
    from audit.replay import MemorySource, Verifier

    res = _run(queueing)
    results = list(Verifier(MemorySource(res.events)).run(res.records))
    assert len(results) == len(res.records) > 1500
    assert [r.decision_id for r in results if not r.match] == []
    # the run exercised what changed: bind failures retried, and placements past a waiting head
    assert any("bind failure 1 of 4; retrying" in r.message for r in res.records)
    skips = [r for r in res.records if any(b.code == "queue_skip" for b in r.blockers)]
    assert skips


class _Recorder(ClusterLoop):
    """A loop with no pods whose own timed actions only say when they ran."""

    def __init__(self) -> None:
        super().__init__(World("t"), 0)
        self.ran: list[tuple[int, str]] = []

    def on_action(self, kind: str, data: Any) -> None:
        self.ran.append((self.now, data))


def test_actions_scheduled_ahead_run_merged_with_the_others_in_time_then_scheduling_order() -> None:
    loop = _Recorder()
    loop.schedule(5, "note", "before")
    loop.schedule_in_order([(3, "note", "a3"), (5, "note", "a5"), (5, "note", "a5b"), (2, "note", "late2"), (9, "note", "a9")])
    loop.schedule(4, "note", "after4")
    loop.schedule(5, "note", "after5")
    loop.run_until(9)
    assert loop.ran == [(2, "late2"), (3, "a3"), (4, "after4"), (5, "before"), (5, "a5"), (5, "a5b"), (5, "after5")]
    loop.run_until(10)
    assert loop.ran[-1] == (9, "a9")
