"""The depth-first search: backtracking, combinations, firstAvailable and the 32-result guard."""

from __future__ import annotations

import pytest

from audit.allocator import Status
from tests.allocator.helpers import (
    NODE_1,
    claim,
    device,
    device_class,
    first_available,
    picks,
    request,
    resource_slice,
    run,
    sub,
)

CLASS_A = device_class("class-a")
LARGE = "device.attributes['driver-a'].size == 'large'"
SMALL = "device.attributes['driver-a'].size == 'small'"


def sized_slice(*sizes: tuple[str, str]) -> dict:
    return resource_slice("slice-1", NODE_1, "pool-1", devices=[device(n, {"size": s}) for n, s in sizes])


def test_small_and_large_backtrack_requests() -> None:
    # req-0 takes the first device (large) which req-1 needs; the search moves req-0 to small.
    objs = [CLASS_A, sized_slice(("large-1", "large"), ("small-1", "small")),
            claim("claim-0", request("req-0", "class-a"), request("req-1", "class-a", selectors=[LARGE]))]
    outcome = run(objs)
    assert picks(outcome) == [("claim-0", "req-0", "pool-1/small-1"), ("claim-0", "req-1", "pool-1/large-1")]
    # 1 req-0 takes large-1; 2 req-0 is complete; 3 req-1 finds nothing (large-1 in use);
    # back in 1: req-0 takes small-1; 4 req-0 complete; 5 req-1 takes large-1; 6 req-1 complete;
    # 7 claim complete; 8 all claims done.
    assert outcome.steps == 8


def test_small_and_large_backtrack_claims() -> None:
    objs = [CLASS_A, sized_slice(("large-1", "large"), ("small-1", "small")),
            claim("claim-0", request("req-0", "class-a")), claim("claim-1", request("req-0", "class-a", selectors=[LARGE]))]
    outcome = run(objs)
    assert picks(outcome) == [("claim-0", "req-0", "pool-1/small-1"), ("claim-1", "req-0", "pool-1/large-1")]


def test_combinations_not_permutations_step_count() -> None:
    # matchAttribute over count 3: device-1 (x=1) cannot pair with others; the search then tries
    # only ascending combinations starting after the previous slot's device.
    devices = [device("device-1", {"x": 1}), device("device-2", {"x": 2}), device("device-3", {"x": 2}), device("device-4", {"x": 2})]
    objs = [CLASS_A, resource_slice("slice-1", NODE_1, "pool-1", devices=devices),
            claim("claim-0", request("req-0", "class-a", 3), constraints=[{"matchAttribute": "driver-a/x"}])]
    outcome = run(objs)
    assert [p[2] for p in picks(outcome)] == ["pool-1/device-2", "pool-1/device-3", "pool-1/device-4"]
    # 1: slot0 picks device-1; 2: slot1 finds nothing; slot0 picks device-2; 3: slot1 device-3;
    # 4: slot2 device-4; 5: request done; 6: claim done; 7: all claims done.
    assert outcome.steps == 7


def test_no_solution_steps_are_counted() -> None:
    devices = [device(f"device-{i}", {"x": i}) for i in range(1, 5)]
    objs = [CLASS_A, resource_slice("slice-1", NODE_1, "pool-1", devices=devices),
            claim("claim-0", request("req-0", "class-a", 2), constraints=[{"matchAttribute": "driver-a/x"}])]
    outcome = run(objs)
    assert outcome.status is Status.UNSATISFIABLE
    # Slot 0 visits each of the 4 devices (1 step) and each time slot 1 is one more step.
    assert outcome.steps == 1 + 4


@pytest.mark.parametrize(("sizes", "expected_sub", "expected_device"), [
    pytest.param([("small-1", "small"), ("large-1", "large")], "req-0/sub-0", "large-1", id="first-subrequest-wins-even-with-later-device"),
    pytest.param([("small-1", "small"), ("small-2", "small")], "req-0/sub-1", "small-1", id="fallback-to-second-subrequest"),
])
def test_prioritized_list_subrequest_index_dominates(sizes: list, expected_sub: str, expected_device: str) -> None:
    objs = [CLASS_A, sized_slice(*sizes),
            claim("claim-0", first_available("req-0", sub("sub-0", "class-a", selectors=[LARGE]), sub("sub-1", "class-a")))]
    outcome = run(objs)
    assert picks(outcome) == [("claim-0", expected_sub, f"pool-1/{expected_device}")]
    assert outcome.chosen_subrequests == {"default/claim-0/req-0": int(expected_sub[-1])}


def test_prioritized_list_with_backtracking() -> None:
    # req-0/sub-0 takes the only large device, req-1 then fails; req-0 moves on to sub-1.
    objs = [CLASS_A, sized_slice(("large-1", "large"), ("small-1", "small")),
            claim("claim-0", first_available("req-0", sub("sub-0", "class-a", selectors=[LARGE]), sub("sub-1", "class-a", selectors=[SMALL])),
                  request("req-1", "class-a", selectors=[LARGE]))]
    outcome = run(objs)
    assert picks(outcome) == [("claim-0", "req-0/sub-1", "pool-1/small-1"), ("claim-0", "req-1", "pool-1/large-1")]


def test_prioritized_list_subrequest_explores_later_claims_before_next_subrequest() -> None:
    objs = [CLASS_A, sized_slice(("large-1", "large"), ("large-2", "large"), ("small-1", "small")),
            claim("claim-0", first_available("req-0", sub("sub-0", "class-a", selectors=[LARGE]), sub("sub-1", "class-a"))),
            claim("claim-1", request("req-0", "class-a", 2, selectors=[LARGE]))]
    outcome = run(objs)
    # sub-0 cannot leave two large devices for claim-1, so claim-0 falls back to sub-1 (small-1).
    assert picks(outcome) == [("claim-0", "req-0/sub-1", "pool-1/small-1"),
                              ("claim-1", "req-0", "pool-1/large-1"), ("claim-1", "req-0", "pool-1/large-2")]


def test_result_size_guard_moves_to_a_smaller_subrequest() -> None:
    devices = [device(f"device-{i:02d}") for i in range(40)]
    objs = [CLASS_A, resource_slice("slice-1", NODE_1, "pool-1", devices=devices),
            claim("claim-0", first_available("req-0", sub("sub-0", "class-a", 2), sub("sub-1", "class-a", 1)),
                  request("req-1", "class-a", 31))]
    outcome = run(objs)
    assert outcome.status is Status.SUCCESS
    results = picks(outcome)
    assert len(results) == 32
    assert results[0] == ("claim-0", "req-0/sub-1", "pool-1/device-00")


def test_multiple_requests_and_counts_fill_in_order() -> None:
    devices = [device(f"device-{i}") for i in range(1, 6)]
    objs = [CLASS_A, resource_slice("slice-1", NODE_1, "pool-1", devices=devices),
            claim("claim-0", request("req-0", "class-a", 2), request("req-1", "class-a", 2))]
    outcome = run(objs)
    assert [p[1:] for p in picks(outcome)] == [("req-0", "pool-1/device-1"), ("req-0", "pool-1/device-2"),
                                               ("req-1", "pool-1/device-3"), ("req-1", "pool-1/device-4")]


def test_not_enough_devices_is_unsatisfiable() -> None:
    objs = [CLASS_A, sized_slice(("d-1", "x")), claim("claim-0", request("req-0", "class-a", 2))]
    outcome = run(objs)
    assert (outcome.status, outcome.message, outcome.allocations) == (Status.UNSATISFIABLE, "cannot allocate all claims", [])


def test_no_claims_is_an_empty_success() -> None:
    outcome = run([CLASS_A, sized_slice(("d-1", "x"))])
    assert (outcome.status, outcome.allocations, outcome.steps) == (Status.SUCCESS, [], 1)


def test_allocated_devices_are_skipped() -> None:
    from tests.allocator.helpers import allocated, result
    objs = [CLASS_A, sized_slice(("d-1", "x"), ("d-2", "x")),
            allocated(claim("other", request("req-0", "class-a")), result("req-0", "driver-a", "pool-1", "d-1")),
            claim("claim-0", request("req-0", "class-a"))]
    assert picks(run(objs)) == [("claim-0", "req-0", "pool-1/d-2")]


def test_two_claims_in_one_call_never_share_a_device() -> None:
    objs = [CLASS_A, sized_slice(("d-1", "x"), ("d-2", "x")),
            claim("claim-0", request("req-0", "class-a")), claim("claim-1", request("req-0", "class-a"))]
    assert [p[2] for p in picks(run(objs))] == ["pool-1/d-1", "pool-1/d-2"]


@pytest.mark.parametrize(("gates", "variant", "steps"), [
    pytest.param("", "incubating", 7, id="incubating-tries-combinations"),
    pytest.param("DRAConsumableCapacity=false,DRADeviceBindingConditions=false", "stable", 9, id="stable-tries-permutations"),
])
def test_stable_variant_enumerates_permutations(gates: str, variant: str, steps: int) -> None:
    from audit.allocator import Features
    assert Features.from_gates(gates).variant == variant
    devices = [device(f"device-{i}", {"x": x}) for i, x in enumerate([1, 1, 2, 2], start=1)]
    objs = [CLASS_A, resource_slice("slice-1", NODE_1, "pool-1", devices=devices),
            claim("claim-0", request("req-0", "class-a", 3), constraints=[{"matchAttribute": "driver-a/x"}])]
    outcome = run(objs, gates=gates)
    assert (outcome.status, outcome.steps) == (Status.UNSATISFIABLE, steps)


def test_many_large_claims_fit_the_search_depth() -> None:
    devices = [device(f"d-{i:03d}") for i in range(400)]
    claims = [claim(f"claim-{i:02d}", request("req-0", "class-a", 32)) for i in range(12)]
    outcome = run([CLASS_A, resource_slice("slice-1", NODE_1, "pool-1", devices=devices), *claims])
    assert outcome.status is Status.SUCCESS
    assert len(picks(outcome)) == 384
    # 32 slots + slot done + claim done per claim, plus the final call.
    assert outcome.steps == 12 * 34 + 1


def test_admin_access_never_takes_one_device_twice_in_a_claim() -> None:
    objs = [CLASS_A, sized_slice(("d-1", "x")), claim("claim-0", request("req-0", "class-a", admin=True), request("req-1", "class-a", admin=True))]
    assert run(objs).status is Status.UNSATISFIABLE
    objs = [CLASS_A, sized_slice(("d-1", "x")), claim("claim-0", request("req-0", "class-a", admin=True)),
            claim("claim-1", request("req-0", "class-a", admin=True))]
    assert [p[2] for p in picks(run(objs))] == ["pool-1/d-1", "pool-1/d-1"]


def test_admin_allocation_blocks_later_normal_claims_in_the_same_call() -> None:
    objs = [CLASS_A, sized_slice(("d-1", "x")), claim("claim-0", request("req-0", "class-a", admin=True)),
            claim("claim-1", request("req-0", "class-a"))]
    assert run(objs).status is Status.UNSATISFIABLE
