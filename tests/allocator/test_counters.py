"""Partitionable devices: shared counters, their 1.36 quirks and invalid pools."""

from __future__ import annotations

import pytest

from audit.allocator import Quirks, Status
from tests.allocator.helpers import (
    DRIVER_B,
    NODE_1,
    NODE_2,
    allocated,
    claim,
    device,
    device_class,
    picks,
    request,
    resource_slice,
    result,
    run,
    verdicts,
)

CLASS_A = device_class("class-a")
CLASS_B = device_class("class-b", driver=DRIVER_B)


def counters(name: str, **values: str) -> dict:
    return {"name": name, "counters": {k: {"value": v} for k, v in values.items()}}


def consumes(counter_set: str, **values: str) -> list[dict]:
    return [{"counterSet": counter_set, "counters": {k: {"value": v} for k, v in values.items()}}]


def counter_slice(pool: str = "pool-1", driver: str = "driver-a", count: int = 2, name: str = "slice-0", **values: str) -> dict:
    return resource_slice(name, None, pool, driver=driver, count=count, sharedCounters=[counters("gpu-0-counters", **values)])


def part(name: str, mem: str, **attrs: object) -> dict:
    return device(name, attrs or None, consumesCounters=consumes("gpu-0-counters", mem=mem))


def test_partitions_share_one_counter_set() -> None:
    devices = [part("gpu-0-full", "8Gi"), part("gpu-0-half-1", "4Gi"), part("gpu-0-half-2", "4Gi")]
    objs = [CLASS_A, counter_slice(mem="8Gi"), resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=devices),
            claim("claim-0", request("req-0", "class-a", 2))]
    assert [p[2] for p in picks(run(objs))] == ["pool-1/gpu-0-half-1", "pool-1/gpu-0-half-2"]


def test_allocated_partition_blocks_the_full_device() -> None:
    devices = [part("gpu-0-full", "8Gi"), part("gpu-0-half-1", "4Gi"), part("gpu-0-half-2", "4Gi")]
    busy = allocated(claim("busy", request("req-0", "class-a")), result("req-0", "driver-a", "pool-1", "gpu-0-half-2"))
    objs = [CLASS_A, counter_slice(mem="8Gi"), resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=devices), busy,
            claim("claim-0", request("req-0", "class-a"))]
    outcome = run(objs, explain=True)
    assert picks(outcome) == [("claim-0", "req-0", "pool-1/gpu-0-half-1")]
    assert verdicts(outcome, "req-0") == {"gpu-0-full": "counters_exhausted", "gpu-0-half-1": "selected", "gpu-0-half-2": "not_reached"}
    assert outcome.evidence[0].verdicts[0].detail_dict() == {"counterSet": "gpu-0-counters", "counter": "mem"}


def test_over_consumed_counter_set_blocks_every_consumer_of_the_pool() -> None:
    # An allocated device consumes 8Gi of a 4Gi set: available is negative, so even a device
    # consuming a different counter of the set is rejected.
    sl0 = resource_slice("slice-0", None, "pool-1", count=2, sharedCounters=[counters("gpu-0-counters", mem="4Gi", cores="10")])
    devices = [part("big", "8Gi"), device("cores-only", consumesCounters=consumes("gpu-0-counters", cores="1"))]
    busy = allocated(claim("busy", request("req-0", "class-a")), result("req-0", "driver-a", "pool-1", "big"))
    objs = [CLASS_A, sl0, resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=devices), busy,
            claim("claim-0", request("req-0", "class-a"))]
    assert run(objs).status is Status.UNSATISFIABLE


def test_devices_of_other_nodes_consume_the_pool_counters() -> None:
    sl0 = counter_slice(count=3, mem="8Gi")
    here = resource_slice("slice-1", NODE_1, "pool-1", count=3, devices=[part("here", "6Gi")])
    there = resource_slice("slice-2", NODE_2, "pool-1", count=3, devices=[part("there", "4Gi")])
    busy = allocated(claim("busy", request("req-0", "class-a")), result("req-0", "driver-a", "pool-1", "there"))
    objs = [CLASS_A, sl0, here, there, claim("claim-0", request("req-0", "class-a"))]
    assert picks(run(objs)) == [("claim-0", "req-0", "pool-1/here")]
    assert run([*objs, busy]).status is Status.UNSATISFIABLE


def test_partitionable_backtracking_count_seven() -> None:
    # scheduler_perf PartitionableBacktracking: device-1 needs 20Gi of 70Gi, the others 10Gi,
    # each also consumes its own cpuN counter; only devices 2-8 fit together.
    sl0 = resource_slice("slice-0", None, "pool-1", count=2, sharedCounters=[
        {"name": "set", "counters": {"mem": {"value": "70Gi"}, **{f"cpu{i}": {"value": "1"} for i in range(1, 9)}}}])
    devices = [device(f"device-{i}", consumesCounters=[{"counterSet": "set", "counters": {
        "mem": {"value": "20Gi" if i == 1 else "10Gi"}, f"cpu{i}": {"value": "1"}}}]) for i in range(1, 9)]
    objs = [CLASS_A, sl0, resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=devices),
            claim("claim-0", request("req-0", "class-a", 7))]
    outcome = run(objs)
    assert [p[2] for p in picks(outcome)] == [f"pool-1/device-{i}" for i in range(2, 9)]


LEAK_DEVICES = [part("a", "2Gi", x=1), part("b", "6Gi", x=2), part("c", "6Gi", x=1)]


@pytest.mark.parametrize(("quirks", "expected"), [
    pytest.param(Quirks(), None, id="leak-quirk-on-makes-it-unsatisfiable"),
    pytest.param(Quirks(counter_leak=False), ["pool-1/a", "pool-1/c"], id="leak-fixed-finds-a-and-c"),
])
def test_counter_reservation_leaks_after_constraint_rejection(quirks: Quirks, expected: list[str] | None) -> None:
    objs = [CLASS_A, counter_slice(mem="10Gi"), resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=LEAK_DEVICES),
            claim("claim-0", request("req-0", "class-a", 2), constraints=[{"matchAttribute": "driver-a/x"}])]
    outcome = run(objs, quirks=quirks)
    if expected is None:
        assert outcome.status is Status.UNSATISFIABLE
    else:
        assert [p[2] for p in picks(outcome)] == expected


def test_counter_reservation_leaks_after_taint_rejection() -> None:
    devices = [part("a", "6Gi", ), device("b", consumesCounters=consumes("gpu-0-counters", mem="6Gi"),
                                           taints=[{"key": "k", "effect": "NoSchedule"}]), part("c", "4Gi")]
    objs = [CLASS_A, counter_slice(mem="10Gi"), resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=devices),
            claim("claim-0", request("req-0", "class-a", 2))]
    # a (6) then b is reserved (12 > 10 fails at once, no leak), then c (10) fits: {a, c}.
    assert [p[2] for p in picks(run(objs))] == ["pool-1/a", "pool-1/c"]
    devices[0] = part("a", "2Gi")
    # a (2), b reserved (8) then rejected by its taint and leaked, c needs 4 -> 12 > 10.
    assert run([*objs[:2], resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=devices), objs[3]]).status is Status.UNSATISFIABLE
    outcome = run([*objs[:2], resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=devices), objs[3]],
                  quirks=Quirks(counter_leak=False))
    assert [p[2] for p in picks(outcome)] == ["pool-1/a", "pool-1/c"]


@pytest.mark.parametrize(("quirks", "status"), [
    pytest.param(Quirks(), Status.UNSATISFIABLE, id="pool-name-only-key-shares-counters"),
    pytest.param(Quirks(counters_by_pool_name=False), Status.SUCCESS, id="driver-and-pool-key"),
])
def test_counters_keyed_by_pool_name_only(quirks: Quirks, status: Status) -> None:
    objs = [CLASS_A, CLASS_B,
            counter_slice(pool=NODE_1, mem="10Gi"), counter_slice(pool=NODE_1, driver=DRIVER_B, mem="10Gi"),
            resource_slice("slice-a", NODE_1, NODE_1, count=2, devices=[part("a", "6Gi")]),
            resource_slice("slice-b", NODE_1, NODE_1, driver=DRIVER_B, count=2, devices=[part("b", "6Gi")]),
            claim("claim-0", request("req-0", "class-a"), request("req-1", "class-b"))]
    # Equal slice names for both drivers' counter slices are distinct objects; rename the second.
    objs[3]["metadata"]["name"] = "slice-0b"
    assert run(objs, quirks=quirks).status is status


def test_partitionable_gate_off_skips_counter_slices_and_consumers() -> None:
    objs = [CLASS_A, counter_slice(mem="8Gi"), resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=[part("half-1", "4Gi")]),
            resource_slice("slice-2", NODE_1, "pool-2", devices=[device("plain")]),
            claim("claim-0", request("req-0", "class-a"))]
    assert picks(run(objs)) == [("claim-0", "req-0", "pool-1/half-1")]
    outcome = run(objs, gates="DRAPartitionableDevices=false", explain=True)
    assert picks(outcome) == [("claim-0", "req-0", "pool-2/plain")]
    assert verdicts(outcome, "req-0")["half-1"] == "counters_exhausted"


INVALID_POOLS = [
    pytest.param([resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=[device("dev-1")]),
                  resource_slice("slice-2", NODE_1, "pool-1", count=2, devices=[device("dev-1")])],
                 "duplicate device name dev-1", id="duplicate-device-name"),
    pytest.param([resource_slice("slice-0", None, "pool-1", count=3, sharedCounters=[counters("set", mem="1")]),
                  resource_slice("slice-0b", None, "pool-1", count=3, sharedCounters=[counters("set", mem="1")]),
                  resource_slice("slice-1", NODE_1, "pool-1", count=3, devices=[device("dev-1")])],
                 "duplicate counter set name set", id="duplicate-counter-set"),
    pytest.param([resource_slice("slice-1", NODE_1, "pool-1", devices=[device("dev-1", consumesCounters=consumes("missing", mem="1"))])],
                 "counter set missing not found", id="unknown-counter-set"),
    pytest.param([resource_slice("slice-0", None, "pool-1", count=2, sharedCounters=[counters("set", mem="1")]),
                  resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=[device("dev-1", consumesCounters=consumes("set", cpu="1"))])],
                 "counter cpu not found in counter set set", id="unknown-counter"),
]


@pytest.mark.parametrize(("slices", "reason"), INVALID_POOLS)
def test_invalid_pool_error_only_when_nothing_else_fits(slices: list, reason: str) -> None:
    outcome = run([CLASS_A, *slices, claim("claim-0", request("req-0", "class-a"))], explain=True)
    assert (outcome.status, outcome.error_code) == (Status.ERROR, "invalid_pools")
    assert outcome.message == f"invalid resource pools were encountered: pool pool-1 is invalid: {reason}"
    assert {v.reason for v in outcome.evidence[0].verdicts} == {"pool_invalid"}
    good = resource_slice("slice-9", NODE_1, "pool-9", devices=[device("dev-9")])
    assert picks(run([CLASS_A, *slices, good, claim("claim-0", request("req-0", "class-a"))])) == [("claim-0", "req-0", "pool-9/dev-9")]


def test_incomplete_pool_devices_get_pool_incomplete_verdict() -> None:
    objs = [CLASS_A, resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=[device("dev-1")]),
            claim("claim-0", request("req-0", "class-a"))]
    outcome = run(objs, explain=True)
    assert outcome.status is Status.UNSATISFIABLE
    assert verdicts(outcome, "req-0") == {"dev-1": "pool_incomplete"}


@pytest.mark.parametrize(("quirks", "expected"), [
    pytest.param(Quirks(), None, id="multi-allocatable-backtrack-keeps-its-counters-1.36"),
    pytest.param(Quirks(counter_leak=False), ["pool-1/e", "pool-1/f"], id="multi-allocatable-backtrack-fixed"),
])
def test_counter_leak_when_backtracking_over_a_multi_allocatable_device(quirks: Quirks, expected: list[str] | None) -> None:
    devices = [
        device("m", {"x": 1}, allowMultipleAllocations=True, consumesCounters=consumes("gpu-0-counters", mem="6Gi")),
        part("e", "6Gi", x=2),
        device("f", {"x": 2}),
    ]
    objs = [CLASS_A, counter_slice(mem="10Gi"), resource_slice("slice-1", NODE_1, "pool-1", count=2, devices=devices),
            claim("claim-0", request("req-0", "class-a"), request("req-1", "class-a", selectors=["device.attributes['driver-a'].x == 2"]),
                  constraints=[{"matchAttribute": "driver-a/x"}])]
    # req-0 first takes m, req-1 cannot match x=1; giving m back keeps its 6Gi reserved in 1.36,
    # so e (6Gi) never fits again.
    outcome = run(objs, quirks=quirks)
    if expected is None:
        assert outcome.status is Status.UNSATISFIABLE
    else:
        assert [p[2] for p in picks(outcome)] == expected


def test_incomplete_counter_pool_of_another_node_breaks_all_mode_here() -> None:
    # 1.36 treats every counter slice as relevant on every node, so an incomplete counter-only
    # pool elsewhere makes All requests fail here too.
    elsewhere = resource_slice("slice-9", None, "pool-9", count=2, sharedCounters=[counters("set", mem="1")])
    objs = [CLASS_A, resource_slice("slice-1", NODE_1, "pool-1", devices=[device("dev-1")]), elsewhere,
            claim("claim-0", request("req-0", "class-a", mode="All"))]
    outcome = run(objs)
    assert outcome.message == ("claim default/claim-0, request req-0: asks for all devices, but resource pool "
                               "driver-a/pool-9 is currently being updated")
    assert picks(run(objs[:3] + [claim("claim-0", request("req-0", "class-a"))])) == [("claim-0", "req-0", "pool-1/dev-1")]


def test_slice_with_both_counters_and_devices_is_used() -> None:
    both = resource_slice("slice-1", NODE_1, "pool-1", sharedCounters=[counters("gpu-0-counters", mem="8Gi")],
                          devices=[part("half-1", "4Gi"), part("half-2", "4Gi"), part("half-3", "4Gi")])
    outcome = run([CLASS_A, both, claim("claim-0", request("req-0", "class-a", 3))])
    assert outcome.status is Status.UNSATISFIABLE
    assert [p[2] for p in picks(run([CLASS_A, both, claim("claim-0", request("req-0", "class-a", 2))]))] == [
        "pool-1/half-1", "pool-1/half-2"]
