"""Allocator inventories shared by explanations that read the very same parsed objects.

An ``Inventory`` keeps what it derives from its slices (device entries, each node's pools in
upstream order, CEL selector results per device), and none of it depends on which devices are
allocated. Parsed objects are remembered by content (``audit.explain.parsed``), so two
explanations over an unchanged cluster hand the allocator the same objects, and can share the
inventory built over them with everything it has already worked out. The key is the objects'
identities; the entry holds the objects, so no identity is reused while it is remembered.
"""

from __future__ import annotations

from collections.abc import Sequence

from audit.allocator import Inventory
from audit.dra.model import DeviceClass, DeviceTaintRule, ResourceSlice

_Objects = tuple[tuple[ResourceSlice, ...], tuple[DeviceClass, ...], tuple[DeviceTaintRule, ...]]


class InventoryMemo:
    """A few recent inventories by the identities of the objects they were built from."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._built: dict[tuple[int, ...], tuple[_Objects, Inventory]] = {}

    def inventory(self, slices: Sequence[ResourceSlice], classes: Sequence[DeviceClass],
                  rules: Sequence[DeviceTaintRule]) -> Inventory:
        objects: _Objects = (tuple(slices), tuple(classes), tuple(rules))
        key = (len(slices), len(classes), *map(id, objects[0]), *map(id, objects[1]), *map(id, objects[2]))
        found = self._built.get(key)
        if found is not None:
            return found[1]
        inventory = Inventory(slices=list(slices), classes=list(classes), taint_rules=list(rules))
        if len(self._built) >= self._capacity:
            self._built.clear()  # simpler than recency order, and safe with concurrent readers
        self._built[key] = (objects, inventory)
        return inventory


# A handful: explanations of one cluster differ only in which nodes a pod may use.
INVENTORIES = InventoryMemo(capacity=16)
