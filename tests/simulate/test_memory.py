"""A finished simulation leaves nothing of its cluster behind in the process.

Long-lived processes (the API server, replay workers, a notebook) run many simulations and
replays; caches keyed to one world must die with it, or each run pins its claims and every
later garbage collection walks them.
"""

from __future__ import annotations

import gc

from ingest.simulate.loop import simulate
from ingest.simulate.scenario import load_scenario_text
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
