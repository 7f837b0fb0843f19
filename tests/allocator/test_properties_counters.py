"""Property tests for shared counters and consumable capacity against an independent accounting."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.allocator import Quirks, Status
from audit.dra.quantity import Quantity
from tests.allocator.helpers import (
    NODE_1,
    allocated,
    claim,
    device,
    device_class,
    request,
    resource_slice,
    result,
    run,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GI = 2**30


@st.composite
def partitioned(draw: st.DrawFn) -> list[dict[str, Any]]:
    budget = draw(st.integers(2, 10))
    devices = []
    for d in range(draw(st.integers(2, 5))):
        extra: dict[str, Any] = {"consumesCounters": [{"counterSet": "set", "counters": {"mem": {"value": f"{draw(st.integers(1, 6))}Gi"}}}]}
        if draw(st.booleans()):
            extra["allowMultipleAllocations"] = True
            extra["capacity"] = {"bw": {"value": "10G"}}
        devices.append(device(f"dev-{d}", **extra))
    objects: list[dict[str, Any]] = [
        device_class("class-a"),
        resource_slice("slice-0", None, "pool-1", count=2, sharedCounters=[{"name": "set", "counters": {"mem": {"value": f"{budget}Gi"}}}]),
        resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=devices),
    ]
    if draw(st.booleans()):
        taken = devices[draw(st.integers(0, len(devices) - 1))]
        extra_result: dict[str, Any] = {}
        if taken.get("allowMultipleAllocations"):
            extra_result = {"shareID": "s-0", "consumedCapacity": {"bw": f"{draw(st.integers(1, 9))}G"}}
        objects.append(allocated(claim("busy", request("r", "class-a")), result("r", "driver-a", "pool-1", taken["name"], **extra_result)))
    for c in range(draw(st.integers(1, 2))):
        requests = []
        for r in range(draw(st.integers(1, 2))):
            capacity = {"bw": f"{draw(st.integers(1, 6))}G"} if draw(st.booleans()) else None
            requests.append(request(f"req-{r}", "class-a", draw(st.integers(1, 2)), capacity=capacity))
        objects.append(claim(f"claim-{c}", *requests))
    return objects


def independent_check(objects: list[dict[str, Any]], allocations: list[dict[str, Any]]) -> list[str]:
    slices = [o for o in objects if o["kind"] == "ResourceSlice"]
    budget = Quantity.parse(slices[0]["spec"]["sharedCounters"][0]["counters"]["mem"]["value"]).value()
    devices = {d["name"]: d for d in slices[1]["spec"]["devices"]}
    used: dict[str, list[dict[str, Any]]] = defaultdict(list)  # device -> results occupying it
    for o in objects:
        if o["kind"] == "ResourceClaim" and o.get("status"):
            for r in o["status"]["allocation"]["devices"]["results"]:
                used[r["device"]].append(r)
    pending = [o for o in objects if o["kind"] == "ResourceClaim" and not o.get("status")]
    problems = []
    for claim_obj, alloc in zip(pending, allocations, strict=True):
        wanted = {r["name"]: r["exactly"] for r in claim_obj["spec"]["devices"]["requests"]}
        for r in alloc["results"]:
            dev = devices[r["device"]]
            spec = wanted[r["request"]]
            requested = spec.get("capacity", {}).get("requests", {})
            if requested and "capacity" not in dev:
                problems.append(f"{r['device']} lacks requested capacity")
            if dev.get("allowMultipleAllocations"):
                amount = requested.get("bw", dev["capacity"]["bw"]["value"])
                if r.get("consumedCapacity") != {"bw": str(Quantity.parse(amount))}:
                    problems.append(f"{r['device']} consumedCapacity {r.get('consumedCapacity')}")
            elif "shareID" in r or "consumedCapacity" in r:
                problems.append(f"exclusive {r['device']} has share fields")
            used[r["device"]].append(r)
    for name, results in used.items():
        dev = devices[name]
        exclusive = [r for r in results if "shareID" not in r]
        if exclusive and len(results) > 1:
            problems.append(f"{name} exclusive but used {len(results)} times")
        if dev.get("allowMultipleAllocations"):
            total = sum(Quantity.parse(r["consumedCapacity"]["bw"]).value() for r in results if "consumedCapacity" in r)
            if total > Quantity.parse("10G").value():
                problems.append(f"{name} bandwidth over capacity: {total}")
    consumed = sum(Quantity.parse(devices[n]["consumesCounters"][0]["counters"]["mem"]["value"]).value() for n in used)
    if consumed > budget * GI:
        problems.append(f"counter mem over budget: {consumed} > {budget * GI}")
    return problems


@SETTINGS
@given(partitioned())
def test_counters_and_capacity_never_overcommitted(objects: list[dict[str, Any]]) -> None:
    outcome = run(objects)
    if outcome.status is Status.SUCCESS:
        assert independent_check(objects, [a.to_api() for a in outcome.allocations]) == []
    else:
        assert outcome.status is Status.UNSATISFIABLE


@SETTINGS
@given(partitioned())
def test_the_leak_quirk_only_ever_removes_solutions(objects: list[dict[str, Any]]) -> None:
    quirky, fixed = run(objects), run(objects, quirks=Quirks.none())
    if quirky.status is Status.SUCCESS:
        assert fixed.status is Status.SUCCESS
        assert independent_check(objects, [a.to_api() for a in fixed.allocations]) == []
