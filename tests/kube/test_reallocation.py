"""An allocation the scheduler gave up on (a binding cycle that failed: the claim is deallocated
and allocated again, maybe on another node) never becomes the pod's observed decision."""

from __future__ import annotations

import copy
import threading
from typing import Any

import pytest

from audit.records import DecisionRecord
from ingest.kube.observe import DecisionObserver
from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import FIXED_TIME, CollectingSink, load_docs, make_watcher, wait_caught_up

CHANGES = load_docs("changes.yaml")
CLAIM, POD = CHANGES[0], CHANGES[1]  # unallocated, pending
ALLOCATED, BOUND = CHANGES[3], CHANGES[4]  # on node-a gpu-0, bound to node-a


def allocated(node: str, device: str) -> dict[str, Any]:
    claim = copy.deepcopy(ALLOCATED)
    claim["status"]["allocation"]["devices"]["results"][0].update(pool=node, device=device)
    claim["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]["values"] = [node]
    return claim


def bound(node: str, phase: str = "Running") -> dict[str, Any]:
    pod = copy.deepcopy(BOUND)
    pod["spec"]["nodeName"] = node
    pod["status"]["phase"] = phase
    return pod


def _observe(steps: list[dict[str, Any]]) -> list[DecisionRecord]:
    """Each step is applied once the watcher has seen the one before: the order is the cluster's."""
    with FakeApiServer() as server:
        for obj in load_docs("cluster.yaml") + [CLAIM, POD]:
            server.add(obj)
        server.release_all()
        sink = CollectingSink()
        observer = DecisionObserver("test-cluster", lambda: FIXED_TIME, check_allocations=False)
        watcher = make_watcher(server, sink, observer=observer)
        stop = threading.Event()
        thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
        thread.start()
        try:
            for obj in steps:
                wait_caught_up(server, watcher)
                server.add(obj)
            wait_caught_up(server, watcher)
        finally:
            stop.set()
            thread.join(5)
    return sink.records


STEPS = {
    # (what the cluster does, the node and devices of the one allocated record)
    "bound_after_reallocation_on_another_node": (
        [allocated("node-a", "gpu-0"), CLAIM, bound("node-b"), allocated("node-b", "gpu-1")],
        ("node-b", ["gpu.nvidia.com/node-b/gpu-1"])),
    "bound_after_reallocation_on_the_same_node": (
        [allocated("node-a", "gpu-0"), CLAIM, bound("node-a"), allocated("node-a", "gpu-1")],
        ("node-a", ["gpu.nvidia.com/node-a/gpu-1"])),
    "seen_bound_only_when_finished_and_deallocated": (
        [allocated("node-a", "gpu-1"), CLAIM, bound("node-a", "Succeeded")],
        ("node-a", ["gpu.nvidia.com/node-a/gpu-1"])),
    "plain_allocation": ([allocated("node-a", "gpu-0"), bound("node-a")], ("node-a", ["gpu.nvidia.com/node-a/gpu-0"])),
}


@pytest.mark.parametrize(("steps", "expected"), list(STEPS.values()), ids=list(STEPS))
def test_a_pod_is_recorded_with_the_allocation_it_was_bound_with(steps: list[dict[str, Any]], expected: tuple) -> None:
    (record,) = [r for r in _observe(steps) if r.outcome == "allocated"]
    assert (record.node, [d.device for d in record.devices]) == expected
