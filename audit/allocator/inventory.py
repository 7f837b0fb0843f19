"""What the allocator may hand out: slices, classes and taint rules, indexed once, viewed per node.

An ``Inventory`` is built once from the cluster's ResourceSlices, DeviceClasses and
DeviceTaintRules and reused for every allocation while they are unchanged. It merges rule taints
into devices (the scheduler passes ``ListWithDeviceTaintRules()``), parses quantities once, keeps
CEL device contexts and selector results per device, and builds the per-node pool view of
upstream ``GatherPools`` (``pools_incubating.go``) lazily, cached per node name and labels, so one
allocation costs time in proportion to the node's devices only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from audit.allocator.features import Features
from audit.allocator.nodematch import node_matches
from audit.dra.model import (
    Device,
    DeviceCapacity,
    DeviceClass,
    DeviceTaint,
    DeviceTaintRule,
    Node,
    ResourceSlice,
)
from audit.dra.quantity import Quantity


class InventoryError(ValueError):
    """An inventory object that cannot be used at all (e.g. an unparsable quantity)."""


@dataclass(frozen=True)
class ParsedCapacity:
    value: Quantity
    has_policy: bool
    default: Quantity | None
    valid_values: tuple[Quantity, ...]
    range_min: Quantity | None
    range_max: Quantity | None
    range_step: Quantity | None
    has_range: bool


@dataclass(eq=False)
class DeviceEntry:
    """One device of one slice, with everything the search needs precomputed."""

    id: str  # "driver/pool/device"
    driver: str
    pool: str
    device: Device
    slice: ResourceSlice
    taints: tuple[DeviceTaint, ...]
    capacity: dict[str, ParsedCapacity]
    counters: tuple[tuple[str, str, Quantity], ...]  # (counter set, counter, amount)
    node_local: bool  # slice nodeName, or device nodeName under perDeviceNodeSelection
    node_selector: Any  # NodeSelector that restricts where the device is reachable, or None
    multi: bool = False  # allowMultipleAllocations, honoured only with DRAConsumableCapacity
    cel_device: Any = None  # audit.dra.cel CelDevice, built on first CEL evaluation
    cel_results: dict[str, bool] = field(default_factory=dict)  # expression -> result
    # (id of class selectors, id of request selectors) -> (those two, the allocator's selectable
    # verdict): see ``audit.allocator.search``
    selectable: dict[tuple[int, int], tuple[Any, Any, Any]] = field(default_factory=dict)

    def __hash__(self) -> int:
        return id(self)


@dataclass(eq=False)
class Pool:
    """A pool as seen from one node (upstream ``Pool``)."""

    driver: str
    name: str
    slices: list[ResourceSlice]  # slices targeting the node, sorted by name
    entries: list[DeviceEntry]  # candidate devices in slice-name then slice order
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    counter_sets: dict[str, dict[str, Quantity]] = field(default_factory=dict)
    all_entries: list[DeviceEntry] = field(default_factory=list)  # incl. slices of other nodes
    has_binding_conditions: bool = False

    @property
    def pool_id(self) -> str:
        return f"{self.driver}/{self.name}"


@dataclass(eq=False)
class NodeView:
    """The node's pools in upstream order and the flat candidate list (pools → slices → devices)."""

    pools: list[Pool]
    candidates: list[tuple[DeviceEntry, Pool]]
    positions: dict[DeviceEntry, int]
    # Every pool upstream's All mode walks, in pool order: the node's pools plus incomplete or
    # invalid pools the node sees only through their counter slices.
    all_pools: list[Pool] = field(default_factory=list)
    baseline_verdicts: list[Any] | None = None  # evidence of a tier nothing was recorded for
    verdict_cache: dict[Any, Any] = field(default_factory=dict)


def _add_slice(by_pool: dict[tuple[str, str], list[int]], generation: dict[tuple[str, str], int],
               pid: tuple[str, str], index: int, slice_generation: int) -> None:
    """upstream ``addSlice``: a newer generation replaces the pool's slices, an older one is dropped."""
    current = generation.get(pid)
    if current is None or slice_generation > current:
        generation[pid] = slice_generation
        by_pool[pid] = [index]
    elif slice_generation == current:
        by_pool[pid].append(index)


def _pool_order(pool: Pool) -> tuple[bool, bytes, bytes]:
    # Pools without binding-condition devices first, each group by (driver, pool) byte-wise.
    return (pool.has_binding_conditions, pool.driver.encode(), pool.name.encode())


_PARSED: dict[str, Quantity] = {}


def _q(text: str, where: str) -> Quantity:
    # Quantities are immutable and the same few strings ("80Gi", "1") repeat across thousands of
    # devices, so each text is parsed once per process.
    found = _PARSED.get(text)
    if found is None:
        try:
            found = Quantity.parse(text)
        except ValueError as exc:
            raise InventoryError(f"{where}: {exc}") from None
        if len(_PARSED) < 65536:
            _PARSED[text] = found
    return found


_PLAIN_CAPACITY: dict[str, ParsedCapacity] = {}


def _parse_capacity(cap: DeviceCapacity, where: str) -> ParsedCapacity:
    pol = cap.request_policy
    if pol is None and type(cap.value) is str:
        # Capacity without a request policy is just its value; every GPU of a model has the same
        # one, and the parsed form is immutable, so it is shared like the quantity itself.
        plain = _PLAIN_CAPACITY.get(cap.value)
        if plain is None:
            plain = ParsedCapacity(value=_q(cap.value, f"{where}.value"), has_policy=False, default=None,
                                   valid_values=(), range_min=None, range_max=None, range_step=None,
                                   has_range=False)
            if len(_PLAIN_CAPACITY) < 65536:
                _PLAIN_CAPACITY[cap.value] = plain
        return plain
    vr = pol.valid_range if pol else None
    return ParsedCapacity(
        value=_q(cap.value, f"{where}.value"),
        has_policy=pol is not None,
        default=_q(pol.default, f"{where}.requestPolicy.default") if pol and pol.default is not None else None,
        valid_values=tuple(_q(v, f"{where}.requestPolicy.validValues[{i}]")
                           for i, v in enumerate(pol.valid_values)) if pol else (),
        range_min=_q(vr.min, f"{where}.requestPolicy.validRange.min") if vr and vr.min is not None else None,
        range_max=_q(vr.max, f"{where}.requestPolicy.validRange.max") if vr and vr.max is not None else None,
        range_step=_q(vr.step, f"{where}.requestPolicy.validRange.step") if vr and vr.step is not None else None,
        has_range=vr is not None,
    )


class Inventory:
    """Slices, classes and taint rules, indexed once; per-node pool views built lazily and cached."""

    def __init__(
        self,
        slices: Iterable[ResourceSlice] = (),
        classes: Iterable[DeviceClass] = (),
        taint_rules: Iterable[DeviceTaintRule] = (),
        features: Features | None = None,
    ) -> None:
        self.features = features or Features()
        self.slices: list[ResourceSlice] = list(slices)
        self.classes: dict[str, DeviceClass] = {}
        for cls in classes:
            # Equal names are distinct API objects only in different clusters; the last one wins
            # like a later apply would, and the lookup stays a plain map as upstream's lister.
            self.classes[cls.name] = cls
        self.taint_rules: list[DeviceTaintRule] = sorted(taint_rules, key=lambda r: r.name)
        for rule in self.taint_rules:
            if rule.device_class_name or rule.selectors:
                raise InventoryError(
                    f"DeviceTaintRule {rule.name}: spec.deviceSelector: deviceClassName and selectors are "
                    "not part of the 1.36 API; select devices by driver, pool and device"
                )
        self._entries: dict[tuple[int, int], DeviceEntry] = {}
        self._per_node: dict[str, list[int]] = {}
        # nodeSelector, allNodes and per-device node selection slices (and older slices that
        # carry both devices and counters)
        self._shared: list[int] = []
        self._counter_slices: dict[tuple[str, str], list[int]] = {}  # always relevant in 1.36
        self._by_pool: dict[tuple[str, str], list[int]] = {}
        for index, sl in enumerate(self.slices):
            pid = (sl.driver, sl.pool_name)
            self._by_pool.setdefault(pid, []).append(index)
            if sl.shared_counters and not sl.devices:
                self._counter_slices.setdefault(pid, []).append(index)
            elif sl.node_name and not sl.shared_counters:
                self._per_node.setdefault(sl.node_name, []).append(index)
            else:
                self._shared.append(index)
        self._counter_only_unusable: list[Pool] | None = None
        self._views: dict[tuple[str, tuple[tuple[str, str], ...]], NodeView] = {}
        self.selector_evaluator: Any = None  # set by the allocator on first CEL evaluation

    # ------------------------------------------------------------------ devices

    def entry(self, slice_index: int, device_index: int) -> DeviceEntry:
        key = (slice_index, device_index)
        found = self._entries.get(key)
        if found is None:
            found = self._build_entry(slice_index, device_index)
            self._entries[key] = found
        return found

    def _build_entry(self, slice_index: int, device_index: int) -> DeviceEntry:
        sl = self.slices[slice_index]
        dev = sl.devices[device_index]
        where = f"ResourceSlice {sl.name}: spec.devices[{device_index}]"
        taints = dev.taints
        if self.features.device_taints and self.features.device_taint_rules and self.taint_rules:
            extra = tuple(r.taint for r in self.taint_rules
                          if (not r.driver or r.driver == sl.driver) and (not r.pool or r.pool == sl.pool_name)
                          and (not r.device or r.device == dev.name))
            taints = taints + extra
        counters = tuple(
            (cc.counter_set, name, _q(amount, f"{where}.consumesCounters[{i}].counters.{name}.value"))
            for i, cc in enumerate(dev.consumes_counters)
            for name, amount in cc.counters.items()
        ) if dev.consumes_counters else ()
        if sl.per_device_node_selection:
            node_local = bool(dev.node_name)
            selector = dev.node_selector
        else:
            node_local = bool(sl.node_name)
            selector = sl.node_selector
        return DeviceEntry(
            id=f"{sl.driver}/{sl.pool_name}/{dev.name}",
            driver=sl.driver,
            pool=sl.pool_name,
            device=dev,
            slice=sl,
            taints=taints,
            capacity={name: _parse_capacity(cap, f"{where}.capacity.{name}") for name, cap in dev.capacity.items()},
            counters=counters,
            node_local=node_local,
            node_selector=selector,
            multi=dev.allow_multiple_allocations and self.features.consumable_capacity,
        )

    # ------------------------------------------------------------------ pools per node

    def view(self, node: Node) -> NodeView:
        """The node's pools in upstream order (cached per node name and labels)."""
        key = (node.name, tuple(sorted(node.labels.items())))
        found = self._views.get(key)
        if found is None:
            found = self._gather(node)
            self._views[key] = found
        return found

    def _relevant(self, sl: ResourceSlice, node: Node) -> bool:
        if sl.shared_counters:
            return True  # 1.36: counter slices are always relevant (changed in master)
        if sl.per_device_node_selection:
            return any(node_matches(node, d.node_name, d.all_nodes, d.node_selector) for d in sl.devices)
        if sl.node_name or sl.all_nodes or sl.node_selector is not None:
            return node_matches(node, sl.node_name, sl.all_nodes, sl.node_selector)
        return False  # unknown future node selection field

    def _gather(self, node: Node) -> NodeView:
        partitionable = self.features.partitionable_devices
        by_pool: dict[tuple[str, str], list[int]] = {}
        generation: dict[tuple[str, str], int] = {}
        for index in self._per_node.get(node.name, []) + self._shared:
            sl = self.slices[index]
            if not partitionable and (sl.per_device_node_selection or sl.shared_counters):
                continue
            if self._relevant(sl, node):
                _add_slice(by_pool, generation, (sl.driver, sl.pool_name), index, sl.pool_generation)
        if partitionable:
            # Counter slices are relevant on every node. Pools that have nothing but counter slices
            # here look the same from every node that has no devices in them, so they are
            # gathered once per inventory (see _counter_only_pools) instead of once per node.
            for pid in list(by_pool):
                for index in self._counter_slices.get(pid, ()):
                    _add_slice(by_pool, generation, pid, index, self.slices[index].pool_generation)
        pools: list[Pool] = []
        for pid, indices in by_pool.items():
            pool = self._build_pool(pid, indices, generation[pid])
            if pool is not None:
                pools.append(pool)
        pools.sort(key=_pool_order)
        all_pools = list(pools)
        if partitionable:
            all_pools += [p for p in self._counter_only_pools() if (p.driver, p.name) not in by_pool]
            all_pools.sort(key=_pool_order)
        candidates: list[tuple[DeviceEntry, Pool]] = []
        for pool in pools:
            for entry in pool.entries:
                candidates.append((entry, pool))
        positions = {entry: i for i, (entry, _) in enumerate(candidates)}
        return NodeView(pools=pools, candidates=candidates, positions=positions, all_pools=all_pools)

    def _counter_only_pools(self) -> list[Pool]:
        """Unusable pools seen from a node that has only their counter slices (node-independent)."""
        if self._counter_only_unusable is None:
            unusable = []
            for pid, indices in self._counter_slices.items():
                by_pool: dict[tuple[str, str], list[int]] = {}
                generation: dict[tuple[str, str], int] = {}
                for index in indices:
                    _add_slice(by_pool, generation, pid, index, self.slices[index].pool_generation)
                pool = self._build_pool(pid, by_pool[pid], generation[pid])
                if pool is not None and (pool.incomplete or pool.invalid):
                    unusable.append(pool)
            self._counter_only_unusable = unusable
        return self._counter_only_unusable

    def _build_pool(self, pid: tuple[str, str], indices: list[int], gen: int) -> Pool | None:
        first = self.slices[indices[0]]
        all_indices = list(indices)
        incomplete = False
        if len(indices) != first.resource_slice_count:
            cluster = self._by_pool.get(pid, [])
            if any(self.slices[i].pool_generation > gen for i in cluster):
                return None  # obsolete: a newer generation exists elsewhere
            same_gen = [i for i in cluster if self.slices[i].pool_generation == gen]
            if len(same_gen) != first.resource_slice_count:
                incomplete = True
            else:
                all_indices = same_gen
        node_slices = sorted(indices, key=lambda i: self.slices[i].name.encode())
        pool = Pool(driver=pid[0], name=pid[1], slices=[self.slices[i] for i in node_slices], entries=[])
        for i in node_slices:
            for d in range(len(self.slices[i].devices)):
                pool.entries.append(self.entry(i, d))
        if incomplete:
            pool.incomplete = True
            return pool
        # Counter sets from every slice of the pool; devices of other nodes still consume them.
        for i in sorted(all_indices, key=lambda i: self.slices[i].name.encode()):
            sl = self.slices[i]
            for cs in sl.shared_counters:
                if cs.name in pool.counter_sets:
                    pool.invalid, pool.invalid_reason = True, f"duplicate counter set name {cs.name}"
                    return pool
                pool.counter_sets[cs.name] = {
                    n: _q(v, f"ResourceSlice {sl.name}: spec.sharedCounters.{cs.name}.counters.{n}.value")
                    for n, v in cs.counters.items()
                }
            for d in range(len(sl.devices)):
                pool.all_entries.append(self.entry(i, d))
        seen: set[str] = set()
        for entry in pool.entries:
            if entry.device.name in seen:
                pool.invalid, pool.invalid_reason = True, f"duplicate device name {entry.device.name}"
                return pool
            seen.add(entry.device.name)
        for entry in pool.all_entries:
            # Walk the device's own consumesCounters entries: one with empty ``counters`` still
            # names a counter set, and that set must exist.
            for consumed in entry.device.consumes_counters:
                counters = pool.counter_sets.get(consumed.counter_set)
                if counters is None:
                    pool.invalid, pool.invalid_reason = True, f"counter set {consumed.counter_set} not found"
                    return pool
                for counter in consumed.counters:
                    if counter not in counters:
                        pool.invalid = True
                        pool.invalid_reason = f"counter {counter} not found in counter set {consumed.counter_set}"
                        return pool
        # Only a usable pool is ordered by its devices' binding conditions: upstream keeps an
        # incomplete or invalid pool as a bare entry, which sorts by (driver, pool) alone.
        pool.has_binding_conditions = any(e.device.binding_conditions for e in pool.entries)
        return pool

    # ------------------------------------------------------------------ lookups

    def device_class(self, name: str) -> DeviceClass | None:
        return self.classes.get(name)
