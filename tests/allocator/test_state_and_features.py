"""Allocated state built like the scheduler's, and feature gate parsing."""

from __future__ import annotations

import pytest

from audit.allocator import AllocatedState, Features, GateError, Quirks
from audit.dra.quantity import Quantity

RESULTS = [
    {"request": "r", "driver": "d", "pool": "p", "device": "exclusive"},
    {"request": "r", "driver": "d", "pool": "p", "device": "watched", "adminAccess": True},
    {"request": "r", "driver": "d", "pool": "p", "device": "nic", "shareID": "s-1", "consumedCapacity": {"bw": "4G"}},
    {"request": "r", "driver": "d", "pool": "p", "device": "nic", "shareID": "s-2", "consumedCapacity": {"bw": "2G"}},
]


def test_state_from_results_like_the_scheduler() -> None:
    state = AllocatedState.from_results(RESULTS)
    assert state.allocated_devices == {"d/p/exclusive"}
    assert state.shared_ids == {"d/p/nic/s-1", "d/p/nic/s-2"}
    assert state.aggregated_capacity == {"d/p/nic": {"bw": Quantity.parse("6G")}}
    assert state.is_shared_in_use("d/p/nic") and not state.is_shared_in_use("d/p/exclusive")
    assert state.in_use_ids() == {"d/p/exclusive", "d/p/nic"}


def test_state_extension_and_release() -> None:
    base = AllocatedState.from_results(RESULTS[:1])
    extended = base.with_results(RESULTS[2:3])
    assert base.shared_ids == set() and extended.shared_ids == {"d/p/nic/s-1"}
    extended.remove_results(RESULTS[2:3])
    extended.remove_results(RESULTS[:1])
    assert (extended.allocated_devices, extended.shared_ids, extended.aggregated_capacity) == (set(), set(), {})
    assert not extended.is_shared_in_use("d/p/nic")


def test_default_features_are_the_1_36_defaults() -> None:
    features = Features()
    assert features.to_gates() == {
        "DRAPrioritizedList": True, "DRAAdminAccess": True, "DRADeviceTaints": True, "DRAPartitionableDevices": True,
        "DRAConsumableCapacity": True, "DRADeviceBindingConditions": True, "DRAResourceClaimDeviceStatus": True,
        "DRAListTypeAttributes": False, "DRADeviceTaintRules": True,
    }
    assert features.device_binding


@pytest.mark.parametrize(("spec", "binding"), [
    pytest.param("DRADeviceBindingConditions=false", False, id="binding-conditions-off"),
    pytest.param("DRAResourceClaimDeviceStatus=false", False, id="device-status-off"),
    pytest.param(" DRAListTypeAttributes = TRUE , ", True, id="whitespace-and-case"),
])
def test_gate_parsing(spec: str, binding: bool) -> None:
    assert Features.from_gates(spec).device_binding is binding


@pytest.mark.parametrize("spec", ["DRAFoo=true", "DRAAdminAccess", "DRAAdminAccess=yes"])
def test_bad_gates_are_rejected(spec: str) -> None:
    with pytest.raises(GateError):
        Features.from_gates(spec)


def test_quirks_none_turns_every_quirk_off() -> None:
    assert not any(vars(Quirks.none()).values())
    assert all(vars(Quirks()).values())


def test_gates_without_allocator_effect_are_reported() -> None:
    features, ignored = Features.parse_gates("DRAExtendedResource=true,DRAAdminAccess=false")
    assert ignored == ["DRAExtendedResource"]
    assert not features.admin_access
