"""``may_place`` is a necessary condition: whenever ``decide`` places a pod, it said the pod may fit.

The cluster loop parks a pod ``may_place`` turns down until the next change, so a False for a pod
that fits would leave it waiting on idle devices. Checked on every placement of simulated hours
under the policies that shape the answer (quotas with borrowing, fallback holds, reservations).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from audit.scheduler import engine
from ingest.simulate.loop import Simulator
from ingest.simulate.scenario import load_scenario_text
from tests.simulate.runs import SCENARIO


class _Checked(Simulator):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.placements = 0
        self.turned_down: list[str] = []

    def before_bind(self, key: str, attempt: int, decision: engine.Decision) -> None:
        self.placements += 1
        if not engine.may_place(self.world, key, self.now):
            self.turned_down.append(f"{key} at seq {self.world.seq}")
        super().before_bind(key, attempt, decision)


@pytest.mark.parametrize("spec", [
    {},
    {"fallback": {"mode": "wait-for-preferred", "wait": "5m"}},
    {"fallback": {"mode": "adaptive", "maxWait": "10m"}},
    {"queueing": {"mode": "best-effort", "reserveAfter": "10m"}},
], ids=["quotas-immediate", "wait-for-preferred", "adaptive", "reservations"])
def test_every_pod_decide_places_was_one_may_place_let_through(spec: dict[str, Any]) -> None:
    with open(SCENARIO, encoding="utf-8") as fh:
        scenario = load_scenario_text(fh.read(), "cluster-day.yaml")
    scenario.policy = copy.deepcopy(scenario.policy)
    for doc in [scenario.policy, *(d for _, d in scenario.policy_changes)]:
        doc["spec"].update(copy.deepcopy(spec))
    sim = _Checked(scenario, seed=2, hours=4)
    sim.run()
    assert sim.placements > 200
    assert sim.turned_down == []
