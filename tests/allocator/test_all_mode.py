"""allocationMode All: a fixed candidate list, fatal errors for unusable pools and constraints."""

from __future__ import annotations

import pytest

from audit.allocator import Status
from tests.allocator.helpers import (
    DRIVER_B,
    NODE_1,
    allocated,
    claim,
    device,
    device_class,
    first_available,
    picks,
    request,
    resource_slice,
    result,
    run,
    sub,
)

CLASS_A = device_class("class-a")
CLASS_B = device_class("class-b", driver=DRIVER_B)
SLICE_A = resource_slice("slice-1", NODE_1, "pool-1", devices=[device("device-1", {"x": 1}), device("device-2", {"x": 1})])


def all_claim(*extra: dict, constraints: list | None = None) -> dict:
    return claim("claim-0", request("req-0", "class-a", mode="All"), *extra, constraints=constraints or [])


def test_all_devices_many() -> None:
    outcome = run([CLASS_A, SLICE_A, all_claim()])
    assert picks(outcome) == [("claim-0", "req-0", "pool-1/device-1"), ("claim-0", "req-0", "pool-1/device-2")]


def test_all_devices_plus_another_fails_because_all_are_taken() -> None:
    outcome = run([CLASS_A, SLICE_A, all_claim(request("req-1", "class-a"))])
    assert outcome.status is Status.UNSATISFIABLE


def test_all_devices_plus_another_reversed_also_fails() -> None:
    outcome = run([CLASS_A, SLICE_A, claim("claim-0", request("req-1", "class-a"), request("req-0", "class-a", mode="All"))])
    assert outcome.status is Status.UNSATISFIABLE


def test_all_devices_with_one_in_use_is_unsatisfiable() -> None:
    busy = allocated(claim("busy", request("req-0", "class-a")), result("req-0", "driver-a", "pool-1", "device-2"))
    outcome = run([CLASS_A, SLICE_A, busy, all_claim()])
    assert outcome.status is Status.UNSATISFIABLE


def test_all_devices_with_admin_access_ignores_in_use() -> None:
    busy = allocated(claim("busy", request("req-0", "class-a")), result("req-0", "driver-a", "pool-1", "device-2"))
    objs = [CLASS_A, SLICE_A, busy, claim("claim-0", request("req-0", "class-a", mode="All", admin=True))]
    outcome = run(objs)
    assert [r.get("adminAccess") for a in outcome.allocations for r in a.results] == [True, True]


def test_all_devices_with_no_matching_device_is_unsatisfiable() -> None:
    objs = [CLASS_A, SLICE_A, claim("claim-0", request("req-0", "class-a", mode="All", selectors=["device.attributes['driver-a'].x == 2"]))]
    assert run(objs).status is Status.UNSATISFIABLE


@pytest.mark.parametrize(("extra_slice", "message"), [
    pytest.param(resource_slice("slice-b", NODE_1, "pool-b", driver=DRIVER_B, count=2, devices=[device("device-b")]),
                 "claim default/claim-0, request req-0: asks for all devices, but resource pool driver-b/pool-b is currently being updated",
                 id="all-devices-of-the-incomplete-pool-of-another-driver"),
    pytest.param(resource_slice("slice-b", NODE_1, "pool-b", driver=DRIVER_B, devices=[device("device-b"), device("device-b")]),
                 "claim default/claim-0, request req-0: asks for all devices, but resource pool driver-b/pool-b is currently invalid",
                 id="all-devices-of-an-invalid-pool-of-another-driver"),
])
def test_all_mode_fails_on_any_unusable_pool_of_the_node(extra_slice: dict, message: str) -> None:
    outcome = run([CLASS_A, CLASS_B, SLICE_A, extra_slice, all_claim()])
    assert (outcome.status, outcome.message) == (Status.ERROR, message)


def test_all_mode_constraint_violation_is_fatal() -> None:
    sl = resource_slice("slice-1", NODE_1, "pool-1", devices=[device("device-1", {"x": 1}), device("device-2", {"x": 2})])
    outcome = run([CLASS_A, sl, all_claim(constraints=[{"matchAttribute": "driver-a/x"}])])
    assert (outcome.status, outcome.error_code, outcome.message) == (
        Status.ERROR, "constraint",
        "claim default/claim-0, request req-0: cannot add device driver-a/pool-1/device-2 because a claim constraint would not be satisfied")


def test_all_mode_subrequest_constraint_violation_is_fatal_even_with_alternatives() -> None:
    sl = resource_slice("slice-1", NODE_1, "pool-1", devices=[device("device-1", {"x": 1}), device("device-2", {"x": 2})])
    objs = [CLASS_A, sl, claim("claim-0", first_available("req-0", sub("sub-0", "class-a", mode="All"), sub("sub-1", "class-a")),
                               constraints=[{"matchAttribute": "driver-a/x"}])]
    outcome = run(objs)
    assert outcome.status is Status.ERROR
    assert outcome.message == ("claim default/claim-0, request sub-0: cannot add device driver-a/pool-1/device-2 "
                               "because a claim constraint would not be satisfied")


def test_all_mode_subrequest_falls_back_when_unsatisfiable() -> None:
    busy = allocated(claim("busy", request("req-0", "class-a")), result("req-0", "driver-a", "pool-1", "device-1"))
    objs = [CLASS_A, SLICE_A, busy,
            claim("claim-0", first_available("req-0", sub("sub-0", "class-a", mode="All"), sub("sub-1", "class-a")))]
    assert picks(run(objs)) == [("claim-0", "req-0/sub-1", "pool-1/device-2")]


def test_all_mode_validated_for_every_subrequest_even_unused() -> None:
    # sub-1 is never tried (sub-0 succeeds) but its All-mode pool check still runs up front.
    incomplete = resource_slice("slice-b", NODE_1, "pool-b", driver=DRIVER_B, count=2, devices=[device("device-b")])
    objs = [CLASS_A, CLASS_B, SLICE_A, incomplete,
            claim("claim-0", first_available("req-0", sub("sub-0", "class-a"), sub("sub-1", "class-a", mode="All")))]
    outcome = run(objs)
    assert outcome.status is Status.ERROR
    assert outcome.message.startswith("claim default/claim-0, request sub-1: asks for all devices")


def test_all_mode_results_in_candidate_order_across_pools() -> None:
    objs = [CLASS_A, resource_slice("slice-2", NODE_1, "pool-2", devices=[device("device-3")]), SLICE_A, all_claim()]
    assert [p[2] for p in picks(run(objs))] == ["pool-1/device-1", "pool-1/device-2", "pool-2/device-3"]
