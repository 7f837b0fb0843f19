"""The simulator and counterfactual replay run one cluster loop: pinned digests of both.

The digests below are of a seeded simulated run and of a counterfactual window over it under a
tighter quota (so the counterfactual decides on its own, not only repeats the recorded run). They
change only when the engine's decisions deliberately change; a refactoring of the loop must leave
them as they are.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os

from audit.records import to_jsonl
from audit.replay.whatif import whatif
from audit.world import World, parse_time_ms
from ingest.simulate.loop import SimulationResult, simulate
from ingest.simulate.scenario import load_scenario_text

SCENARIO = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "replay", "busy-small.yaml")
HOUR = 3_600_000

SIMULATED_DIGEST = "0fcd30cb88a8e81268d8c4a0d8dc4f2abda2b9b2a72997419c721be07b3f1a74"
COUNTERFACTUAL_DIGEST = "457409f03d10f39df5df985ca6f372e4a44757bc4a663209079a67585f3f66af"


@functools.lru_cache(maxsize=1)
def _run() -> SimulationResult:
    with open(SCENARIO, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "busy-small.yaml")
    return simulate(sc, seed=3, hours=4.0)


def _digest(records, events) -> str:  # noqa: ANN001
    h = hashlib.sha256(to_jsonl(records).encode())
    for e in events:
        h.update(json.dumps(e.to_dict(), sort_keys=True).encode())
    return h.hexdigest()


def _window(policy_doc):  # noqa: ANN001, ANN202
    res = _run()
    t0 = parse_time_ms(res.events[0].time)
    since, until = t0 + int(1.5 * HOUR) + 777, t0 + int(2.9 * HOUR)
    start = World(res.world.cluster)
    for e in res.events:
        if parse_time_ms(e.time) < since:
            start.apply(e)
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


def test_the_recorded_policy_reproduces_the_window():
    res = _run()
    t0 = parse_time_ms(res.events[0].time)
    active = [e for e in res.events if e.object_kind == "Policy" and parse_time_ms(e.time) < t0 + 2 * HOUR][-1]
    w = _window(active.payload)
    assert len(w.recorded.records) > 500
    assert to_jsonl(w.counterfactual.records) == to_jsonl(w.recorded.records)
    assert [e.to_dict() for e in w.counterfactual.events] == [e.to_dict() for e in w.recorded.events]
