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

from audit.policy import Policy, parse_policy
from audit.scheduler.adaptive import duration_text
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


def _fallback_text(policy: Policy) -> str:
    mode = policy.fallback_mode
    if mode == "wait-for-preferred":
        return f"wait-for-preferred fallback (wait {duration_text(policy.fallback_wait_ms)})"
    if mode == "adaptive":
        return f"adaptive fallback (maxWait {duration_text(policy.fallback_max_wait_ms)})"
    return f"{mode} fallback"


def fallback_label(scenario: Scenario, hours: float) -> str:
    """The fallback the scenario's policies use over its first ``hours``, in words, read from the
    policies themselves so that a row's name cannot claim a mode that a policy change at noon
    replaced: ``immediate fallback``, or ``immediate fallback, then wait-for-preferred fallback
    (wait 5m) from 12h00m`` when a change within the day brings another mode."""
    if scenario.policy is None:
        raise ValueError(f"{SCENARIO.name}: no policy to describe")
    text = _fallback_text(parse_policy(scenario.policy))
    label, last = text, text
    for at, doc in scenario.policy_changes:
        if at >= hours * 3_600_000:
            continue
        text = _fallback_text(parse_policy(doc))
        if text != last:
            label += f", then {text} from {duration_text(at)}"
            last = text
    return label
