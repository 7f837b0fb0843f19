"""The allocated state the per-node allocator gets: the node's devices in use, plus those a
reservation holds for another pod, less those a reclaim would free; nothing of other nodes."""

from __future__ import annotations

import pytest

from audit.allocator import AllocatedState
from audit.scheduler.nodealloc import allocated_state
from tests.scheduler.worlds import cluster, hold

D = "gpu.nvidia.com"


@pytest.mark.parametrize(("held", "freed", "expected"), [
    pytest.param((), frozenset(), {f"{D}/h100-000/gpu-0", f"{D}/h100-000/gpu-1"}, id="in-use-devices-of-the-node"),
    pytest.param((f"{D}/h100-000/gpu-5",), frozenset(),
                 {f"{D}/h100-000/gpu-0", f"{D}/h100-000/gpu-1", f"{D}/h100-000/gpu-5"}, id="plus-reserved-ones"),
    pytest.param((), frozenset({f"{D}/h100-000/gpu-1"}), {f"{D}/h100-000/gpu-0"}, id="less-those-a-reclaim-frees"),
])
def test_allocated_state_of_a_node(held: tuple[str, ...], freed: frozenset[str], expected: set[str]) -> None:
    sim = cluster()
    hold(sim, "h100-000", [0, 1])
    hold(sim, "h100-001", [2])  # another node's: never in this node's state
    state = allocated_state(sim.world, "h100-000", held, freed)
    assert state.allocated_devices == expected
    # the same state the allocator's own reading of those results gives
    reference = AllocatedState.from_results(
        [dict(zip(("driver", "pool", "device"), d.split("/", 2), strict=True)) for d in sorted(expected)])
    assert (state.allocated_devices, state.shared_ids, state.aggregated_capacity) == (
        reference.allocated_devices, reference.shared_ids, reference.aggregated_capacity)
