"""``may_place`` remembers a pending pod's tiers only while its pod and claim objects stay the same.

The cluster loop asks ``may_place`` about every parked pod on every release; it keeps the tiers it
found per pod and reuses them while the world still holds the very same objects. A claim or pod
replaced by an event must be read again, and devices freed since must count.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from audit.scheduler import engine
from tests.scheduler.worlds import cluster, hold, submit

_NODES = ("a100-000", "a100-001", "h100-000", "h100-001", "l40s-000")  # the small cluster's DRA nodes


def _with_count(claim: dict[str, Any], count: int) -> dict[str, Any]:
    claim = copy.deepcopy(claim)
    for sub in claim["spec"]["devices"]["requests"][0]["firstAvailable"]:
        sub["count"] = count
    return claim


def _replace_claim_with_one_device(sim: Any, key: str) -> None:
    ns, name = key.split("/", 1)
    claim_name = f"{name}-gpu"
    sim.emit("ResourceClaim", ns, claim_name, _with_count(sim.world.get("ResourceClaim", ns, claim_name), 1))


def _replace_pod_with_one_that_names_a_small_claim(sim: Any, key: str) -> None:
    ns, name = key.split("/", 1)
    small = _with_count(sim.world.get("ResourceClaim", ns, f"{name}-gpu"), 1)
    small["metadata"] = {**small["metadata"], "name": "small-claim", "uid": "uid-small-claim"}
    sim.emit("ResourceClaim", ns, "small-claim", small)
    pod = copy.deepcopy(sim.world.get("Pod", ns, name))
    pod["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "small-claim"}]
    sim.emit("Pod", ns, name, pod)


def _free_every_device(sim: Any, key: str) -> None:
    for node in _NODES:
        sim.emit("ResourceClaim", "ops", f"held-{node}", None, "delete")


@pytest.mark.parametrize("size, busy, change", [
    (16, False, _replace_claim_with_one_device),
    (16, False, _replace_pod_with_one_that_names_a_small_claim),
    (1, True, _free_every_device),
], ids=["claim-replaced", "pod-replaced", "devices-freed"])
def test_may_place_reads_what_changed_since_it_last_turned_the_pod_down(size: int, busy: bool, change: Any) -> None:
    sim = cluster()
    if busy:
        for node in _NODES:
            hold(sim, node, list(range(8)), name=f"held-{node}")
    key = submit(sim, "job-1", size=size)
    assert engine.may_place(sim.world, key, sim.now) is False
    assert engine.may_place(sim.world, key, sim.now) is False  # asked again: the remembered tiers
    change(sim, key)
    assert engine.may_place(sim.world, key, sim.now) is True


def test_room_found_for_one_tenant_answers_another_with_the_same_tiers_until_an_event() -> None:
    """Whether some node has room for a tier is kept per world seq and tier shape: a second tenant's
    pod of the same size gets the same answer, and a release seen by the world changes it for both."""
    sim = cluster()
    for node in _NODES:
        hold(sim, node, list(range(8)), name=f"held-{node}")
    first, second = submit(sim, "job-1", namespace="alpha"), submit(sim, "job-2", namespace="beta")
    assert [engine.may_place(sim.world, k, sim.now) for k in (first, second)] == [False, False]
    sim.emit("ResourceClaim", "ops", "held-h100-000", None, "delete")
    assert [engine.may_place(sim.world, k, sim.now) for k in (first, second)] == [True, True]


@pytest.mark.parametrize("sizes, expected", [((16, 1), [False, True]), ((1, 16), [True, False])],
                         ids=["larger-first", "smaller-first"])
def test_room_is_kept_per_device_count(sizes: tuple[int, int], expected: list[bool]) -> None:
    """One free node holds a one-device pod but not a 16-device one, whichever is asked first at the
    same seq: the kept answer for one count never stands for another."""
    sim = cluster()
    for node in _NODES[1:]:
        hold(sim, node, list(range(8)), name=f"held-{node}")
    keys = [submit(sim, f"job-{i}", size=size) for i, size in enumerate(sizes)]
    assert [engine.may_place(sim.world, k, sim.now) for k in keys] == expected
