"""A finished simulation leaves nothing of its cluster behind in the process.

Long-lived processes (the API server, replay workers, a notebook) run many simulations and
replays; caches keyed to one world must die with it, or each run pins its claims and every
later garbage collection walks them.
"""

from __future__ import annotations

import gc
from typing import Any

import pytest

from ingest.simulate.loop import simulate
from ingest.simulate.scenario import Scenario, load_scenario_text
from tests.simulate.runs import SCENARIO


def _claims_alive(uids: set[str]) -> int:
    return sum(
        1
        for o in gc.get_objects()
        if type(o) is dict and o.get("kind") == "ResourceClaim" and o.get("metadata", {}).get("uid") in uids
    )


def _run_and_collect_claim_uids() -> set[str]:
    with open(SCENARIO, encoding="utf-8") as fh:
        scenario = load_scenario_text(fh.read(), "cluster-day.yaml")
    result = simulate(scenario, seed=11, hours=0.5)
    uids = {uid for record in result.records for uid in record.claim_uids}
    assert len(uids) > 20
    return uids


def test_no_claim_of_a_finished_simulation_stays_in_memory() -> None:
    uids = _run_and_collect_claim_uids()
    gc.collect()
    assert _claims_alive(uids) == 0


def _scenario_with(spec: dict[str, Any]) -> Scenario:
    with open(SCENARIO, encoding="utf-8") as fh:
        scenario = load_scenario_text(fh.read(), "cluster-day.yaml")
    for doc in [scenario.policy, *(d for _, d in scenario.policy_changes)]:
        doc["spec"].update(spec)
    return scenario


@pytest.mark.parametrize("spec", [
    {},
    {"preemption": {"enabled": True, "minRuntime": "10m"}},
    {"fallback": {"mode": "adaptive", "maxWait": "10m"}},
    {"queueing": {"mode": "best-effort", "reserveAfter": "10m"}},
], ids=["default", "reclaim", "adaptive", "reservations"])
def test_a_simulation_makes_no_cyclic_garbage_so_pausing_the_collector_loses_nothing(spec: dict[str, Any]) -> None:
    """The simulator pauses cyclic collection for its run: every object it makes is either kept
    or freed by reference counting. A cycle introduced anywhere in the loop shows up here."""
    scenario = _scenario_with(spec)
    gc.collect()
    result = simulate(scenario, seed=3, hours=2)
    assert len(result.records) > 100
    assert gc.collect() == 0


@pytest.mark.parametrize("enabled", [True, False])
def test_a_simulation_leaves_the_collector_as_it_found_it(enabled: bool) -> None:
    scenario = _scenario_with({})
    if not enabled:
        gc.disable()
    try:
        simulate(scenario, seed=3, hours=0.25)
        assert gc.isenabled() is enabled
    finally:
        gc.enable()
