"""Property: the reason counts add up to the model's devices, each device has the expected reason,
and the answer does not depend on the order of objects in the dump."""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.explain import ClusterView, explain
from tests.explain.builders import claim, gpu, node, scenario, slice_, sub

STATES = ("free", "in_use", "old_driver", "unhealthy", "maintenance")
DRIVER_550 = "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('550.0.0')) >= 0"

device_st = st.tuples(st.sampled_from(["H100", "A100"]), st.sampled_from(STATES))
node_st = st.tuples(st.sampled_from(["a", "b"]), st.lists(device_st, min_size=1, max_size=4))


def _build(nodes: list[tuple[str, list[tuple[str, str]]]]) -> tuple[list[dict[str, Any]], Counter[str]]:
    objects: list[dict[str, Any]] = []
    held: list[tuple[str, str]] = []
    expected: Counter[str] = Counter()
    for i, (zone, devices) in enumerate(nodes):
        name = f"node-{i}"
        objects.append(node(name, zone=zone))
        gpus = []
        for j, (model, state) in enumerate(devices):
            taints = {"unhealthy": [{"key": "gpu.nvidia.com/unhealthy", "effect": "NoSchedule"}],
                      "maintenance": [{"key": "example.com/maintenance", "effect": "NoExecute"}]}.get(state)
            gpus.append(gpu(f"gpu-{j}", model, driver_version="535.104.5" if state == "old_driver" else "580.105.8",
                            taints=taints))
            if state == "in_use":
                held.append((name, f"gpu-{j}"))
            if model != "H100":
                continue
            # The independent oracle: the first failing check in the documented order.
            expected[("node_filtered" if zone != "a" else
                      {"free": "available", "in_use": "in_use", "old_driver": "request_selector_mismatch",
                       "unhealthy": "unhealthy", "maintenance": "taint_not_tolerated"}[state])] += 1
        objects.append(slice_(name, gpus))
    if held:
        objects.append(claim("holder", "team-b", allocated=held))
    pod_claim = claim("train-gpu", subs=[sub("h100", "H100", DRIVER_550), sub("a100", "A100")])
    return scenario(*objects, pod_claim=pod_claim, pod_spec={"nodeSelector": {"zone": "a"}}), expected


@settings(max_examples=15, deadline=None)
@given(st.lists(node_st, min_size=1, max_size=4), st.integers(min_value=0, max_value=2**32 - 1))
def test_reason_counts_match_an_independent_oracle_in_any_input_order(
        nodes: list[tuple[str, list[tuple[str, str]]]], seed: int) -> None:
    objects, expected = _build(nodes)
    answer = explain(ClusterView.from_objects(objects), "team-a/train", "H100", detail=True)
    assert answer.reasons == dict(expected) or (not expected and answer.reasons == {})
    assert answer.visible == sum(expected.values()) == len(answer.devices or [])
    shuffled = list(objects)
    random.Random(seed).shuffle(shuffled)
    again = explain(ClusterView.from_objects(shuffled), "team-a/train", "H100", detail=True)
    assert again.to_dict() == answer.to_dict()
