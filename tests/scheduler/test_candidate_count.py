"""The number of nodes a tier could use, as evidence counts it, is the length of the sorted list
the search walks: counted without ordering the names, for every kind of tier."""

from __future__ import annotations

import pytest

from audit.scheduler import engine
from audit.scheduler.tiers import Tier
from tests.scheduler.worlds import cluster, hold


def _tier(models: tuple[str, ...], count: int, tolerates: bool = False) -> Tier:
    return Tier("alpha/c", "gpu", "", 0, count, False, "gpu.nvidia.com", (), tolerates, models)


@pytest.mark.parametrize("models", [("H100",), ("A100",), ("H100", "A100"), ("H100", "A100", "L40S"), ("none",)])
@pytest.mark.parametrize("count", [1, 3, 8, 9])
@pytest.mark.parametrize("tolerates", [False, True])
def test_candidate_count_is_the_length_of_the_candidate_list(models: tuple[str, ...], count: int, tolerates: bool) -> None:
    sim = cluster()
    hold(sim, "h100-000", [0, 1, 2, 3, 4, 5])
    hold(sim, "a100-001", [0, 1])
    sim.lose_node("h100-001")  # its slice goes: a node no longer in the cluster is never counted
    t = _tier(models, count, tolerates)
    assert engine._candidate_count(sim.world, t) == len(engine.candidate_nodes(sim.world, t))


def test_candidate_count_leaves_out_a_node_without_enough_free_devices() -> None:
    sim = cluster()
    t = _tier(("H100", "A100"), 4)
    assert engine._candidate_count(sim.world, t) == 4  # both H100 and both A100 nodes
    hold(sim, "h100-000", [0, 1, 2, 3, 4, 5])
    assert engine._candidate_count(sim.world, t) == 3
    assert engine.candidate_nodes(sim.world, t) == ["a100-000", "a100-001", "h100-001"]
