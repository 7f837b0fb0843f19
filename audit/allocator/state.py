"""Devices already in use when an allocation starts (upstream ``schedulerapi.AllocatedState``).

Built like the scheduler does from every allocated claim (``allocateddevices.go``): results with
``adminAccess: true`` do not occupy anything; results with a ``shareID`` occupy a share of a
multi-allocatable device and add their ``consumedCapacity`` to the device's aggregate; every
other result makes its device exclusively allocated. The decision engine extends a state cheaply
with ``with_results`` (copy) or ``add_results``/``remove_results`` (in place).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from audit.dra.model import ResourceClaim
from audit.dra.quantity import Quantity


class AllocatedState:
    """Exclusively allocated device ids, shared ids and aggregated consumed capacity."""

    __slots__ = ("allocated_devices", "shared_ids", "aggregated_capacity", "_share_counts", "_capacity_shares")

    def __init__(self) -> None:
        self.allocated_devices: set[str] = set()  # "driver/pool/device"
        self.shared_ids: set[str] = set()  # "driver/pool/device/shareID"
        self.aggregated_capacity: dict[str, dict[str, Quantity]] = {}  # device id -> name -> sum
        self._share_counts: dict[str, int] = {}  # device id -> number of live shares
        # device id -> number of live shares whose result carries consumedCapacity (even empty)
        self._capacity_shares: dict[str, int] = {}

    @classmethod
    def from_claims(cls, claims: Iterable[ResourceClaim]) -> AllocatedState:
        state = cls()
        for claim in claims:
            if claim.allocation is not None:
                state.add_results(claim.allocation.results)
        return state

    @classmethod
    def from_results(cls, results: Iterable[Mapping[str, Any]]) -> AllocatedState:
        state = cls()
        state.add_results(results)
        return state

    def copy(self) -> AllocatedState:
        other = AllocatedState()
        other.allocated_devices = set(self.allocated_devices)
        other.shared_ids = set(self.shared_ids)
        other.aggregated_capacity = {k: dict(v) for k, v in self.aggregated_capacity.items()}
        other._share_counts = dict(self._share_counts)
        other._capacity_shares = dict(self._capacity_shares)
        return other

    def with_results(self, results: Iterable[Mapping[str, Any]]) -> AllocatedState:
        other = self.copy()
        other.add_results(results)
        return other

    def add_results(self, results: Iterable[Mapping[str, Any]]) -> None:
        """Occupy the devices of ``status.allocation.devices.results`` items."""
        for result in results:
            self._apply(result, +1)

    def remove_results(self, results: Iterable[Mapping[str, Any]]) -> None:
        """Release what ``add_results`` occupied for the same items (a deallocation)."""
        for result in results:
            self._apply(result, -1)

    def _apply(self, result: Mapping[str, Any], sign: int) -> None:
        if result.get("adminAccess") is True:
            return
        device_id = f"{result['driver']}/{result['pool']}/{result['device']}"
        share = result.get("shareID")
        if not share:
            if sign > 0:
                self.allocated_devices.add(device_id)
            else:
                self.allocated_devices.discard(device_id)
            return
        shared = f"{device_id}/{share}"
        if sign > 0:
            self.shared_ids.add(shared)
        else:
            self.shared_ids.discard(shared)
        self._share_counts[device_id] = self._share_counts.get(device_id, 0) + sign
        if self._share_counts[device_id] <= 0:
            del self._share_counts[device_id]
        if result.get("consumedCapacity") is not None:
            self._capacity_shares[device_id] = self._capacity_shares.get(device_id, 0) + sign
            if self._capacity_shares[device_id] <= 0:
                del self._capacity_shares[device_id]
        consumed = result.get("consumedCapacity") or {}
        aggregate = self.aggregated_capacity.setdefault(device_id, {})
        for name, value in consumed.items():
            q = Quantity.parse(value)
            current = aggregate.get(name)
            if sign > 0:
                aggregate[name] = q if current is None else current.add(q)
            elif current is not None:
                remaining = current.sub(q)
                if remaining.is_zero():
                    del aggregate[name]
                else:
                    aggregate[name] = remaining
        if not aggregate:
            del self.aggregated_capacity[device_id]

    def is_shared_in_use(self, device_id: str) -> bool:
        """Whether some share of this multi-allocatable device is already allocated."""
        return device_id in self._share_counts or device_id in self.aggregated_capacity

    def has_consumed_capacity(self, device_id: str) -> bool:
        """Whether a share of this device carries ``consumedCapacity``, even an empty one: upstream's
        ``AggregatedCapacity`` then has an entry for it (``allocateddevices.go`` inserts one per
        non-nil ``ConsumedCapacity``), and only such a device counts as shared when its counters
        are checked again."""
        return device_id in self._capacity_shares

    def in_use_ids(self) -> set[str]:
        """Every device that is occupied exclusively or by at least one share."""
        return self.allocated_devices | set(self._share_counts)
