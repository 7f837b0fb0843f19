"""The default scenario the benchmarks simulate, ``ingest/simulate/scenarios/cluster-day.yaml``.

Each call loads it afresh, so a benchmark that measures a policy variant can edit the policies it
gets without touching another's. An edit applies to the scenario's policy and to the policy of
every change in it (the noon change), so the variant holds for the whole day.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ingest.simulate.scenario import Scenario, load_scenario_text

SCENARIO = Path(__file__).resolve().parents[1] / "ingest" / "simulate" / "scenarios" / "cluster-day.yaml"


def cluster_day(edit: Callable[[dict[str, Any]], None] | None = None) -> Scenario:
    """The scenario, with ``edit`` applied to the ``spec`` of each of its policies when given."""
    sc = load_scenario_text(SCENARIO.read_text(encoding="utf-8"), SCENARIO.name)
    if edit is None:
        return sc
    if sc.policy is None:
        raise ValueError(f"{SCENARIO.name}: no policy to edit")
    sc.policy = copy.deepcopy(sc.policy)
    for doc in [sc.policy, *(d for _, d in sc.policy_changes)]:
        edit(doc["spec"])
    return sc
