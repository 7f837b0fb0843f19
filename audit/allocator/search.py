"""The per-node allocation search of kube-scheduler 1.36 (incubating), device for device.

``Allocator.allocate(node, claims)`` runs the up-front checks of upstream ``Allocate`` (in
``allocator_incubating.go`` of k8s.io/dynamic-resource-allocation/structured/internal/incubating),
then the literal depth-first ``allocateOne`` recursion over the node's candidate devices in
upstream order, with the per-device checks in upstream order: in use → selectable (class
selectors, request selectors, per-device node selection) → consumable capacity → counters →
taints → constraints (``allocateDevice``). The first complete assignment wins.
Upstream 1.36 quirks are reproduced when ``Quirks`` says so. With ``explain=True`` every
verdict the search reaches is recorded without influencing the search or its step count.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from audit.allocator.capacity import check_fits, consumed_capacity
from audit.allocator.constraints import ClaimConstraint, DistinctAttribute, MatchAttribute
from audit.allocator.counters import CounterBook, available_counters, pool_key
from audit.allocator.evidence import EvidenceLog
from audit.allocator.features import Features, Quirks
from audit.allocator.inventory import DeviceEntry, Inventory, InventoryError, NodeView, Pool
from audit.allocator.nodematch import node_matches
from audit.allocator.outcome import AllocationOutcome, ClaimAllocation, Status
from audit.allocator.results import ResultError, build_config, build_node_selector, result_item
from audit.allocator.selectors import SelectorEvaluator, SelectorFailure
from audit.allocator.state import AllocatedState
from audit.allocator.taints import first_untolerated, is_health_taint
from audit.dra.model import (
    DeviceClass,
    DeviceRequest,
    DeviceSelector,
    DeviceTaint,
    ExactRequest,
    Node,
    ResourceClaim,
)
from audit.dra.quantity import Quantity
from audit.records import Reason

# resourceapi.AllocationResultsMaxSize: at most 32 devices per claim.
MAX_RESULTS_PER_CLAIM = 32

ShareIdGenerator = Callable[[ResourceClaim, str, str, int], str]
HealthPredicate = Callable[[DeviceTaint], bool]

_SHARE_NAMESPACE = uuid.UUID("6f1d2c3e-8b4a-5c6d-9e0f-1a2b3c4d5e6f")


def deterministic_share_id(claim: ResourceClaim, request: str, device_id: str, index: int) -> str:
    """A UID-shaped shareID derived from the claim, request, device and result index.

    Upstream draws a random UUID; the core has no randomness, so the id is a name-based UUID
    and comparisons with real allocations must treat shareID as opaque.
    """
    return str(uuid.uuid5(_SHARE_NAMESPACE, f"{claim.uid or claim.key}|{request}|{device_id}|{index}"))


class AllocationError(Exception):
    """A fatal upstream error: ``code`` is stable, ``message`` is upstream's text."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class _SizeExceeded(Exception):
    """upstream errAllocationResultMaxSizeExceeded: prunes, never reaches the caller."""


class _StepBudgetSpent(Exception):
    """The search reached the caller's ``max_steps``: the whole call gives up."""


def _where(claim: ResourceClaim, request: DeviceRequest, sub: str) -> str:
    """What an error about a request names (only built when one is raised). Upstream's name() of a
    subrequest is the subrequest's own name, not "<request>/<sub>"."""
    return f"claim {claim.key}, request {sub or request.name}"


@dataclass(eq=False)
class _RequestData:
    key: tuple[int, int, int]
    name: str  # "<request>" or "<request>/<subrequest>"
    base: str
    sub: str
    spec: ExactRequest
    device_class: DeviceClass
    has_parent: bool
    admin: bool
    num_devices: int = 0
    all_mode: bool = False
    all_devices: list[tuple[int, DeviceEntry, Pool]] = field(default_factory=list)
    capacity_requests: dict[str, Quantity] | None = None


@dataclass
class _Result:
    request: _RequestData
    entry: DeviceEntry
    pool: Pool
    position: int
    share_id: str | None
    consumed: dict[str, Quantity] | None


class Allocator:
    """One allocated-state snapshot over one inventory; ``allocate`` may be called per node.

    Like upstream's allocator it is created once per scheduling cycle; the per-pool available
    counters derived from the state are cached here.
    """

    def __init__(
        self,
        inventory: Inventory,
        state: AllocatedState | None = None,
        quirks: Quirks | None = None,
        share_ids: ShareIdGenerator | None = None,
        health: HealthPredicate | None = None,
    ) -> None:
        self.inventory = inventory
        self.features: Features = inventory.features
        self.state = state or AllocatedState()
        self.quirks = quirks or Quirks()
        self.share_ids = share_ids or deterministic_share_id
        self.health = health or is_health_taint
        self._available: dict[Any, dict[tuple[str, str], Quantity]] = {}

    @property
    def selectors(self) -> SelectorEvaluator:
        # Shared by every allocator over the same inventory: compiled expressions and per-device
        # results stay valid as long as the inventory's devices do.
        evaluator = self.inventory.selector_evaluator
        if evaluator is None:
            evaluator = self.inventory.selector_evaluator = SelectorEvaluator(self.features)
        return evaluator

    def allocate(self, node: Node, claims: Sequence[ResourceClaim], explain: bool = False,
                 max_steps: int | None = None) -> AllocationOutcome:
        """Allocate every claim on ``node`` together, as upstream ``Allocate`` would.

        The search is exhaustive and, like upstream's, exponential in the worst case (requests
        with allocation mode All or constraints over many devices). kube-scheduler bounds it by
        time: its DynamicResources plugin cancels ``Allocate`` after ``filterTimeout`` (10 s by
        default, gate DRASchedulerFilterTimeout; ``pkg/scheduler/framework/plugins/
        dynamicresources``), which no replay could reproduce. ``max_steps`` bounds it by work
        instead, deterministically: past that many ``allocateOne`` steps the call gives up with
        error ``step_budget``. None (the default) searches to the end, as upstream's ``Allocate``.
        """
        run = _Run(self, node, list(claims), explain, max_steps)
        return run.execute()

    def available_counters(self, pool: Pool) -> dict[tuple[str, str], Quantity]:
        """Shared counters of the pool minus what already allocated devices consume (may be < 0)."""
        key = pool_key(pool, self.quirks.counters_by_pool_name)
        found = self._available.get(key)
        if found is None:
            # Like upstream, the first pool seen under a key fills the cache for that key.
            found = self._available[key] = available_counters(pool, self.state)
        return found


class _Run:
    """The state of one ``allocate`` call (upstream's per-call ``allocator`` struct)."""

    def __init__(self, owner: Allocator, node: Node, claims: list[ResourceClaim], explain: bool,
                 max_steps: int | None = None) -> None:
        self.owner = owner
        self.features = owner.features
        self.quirks = owner.quirks
        self.state = owner.state
        self.node = node
        self.claims = claims
        self.view: NodeView = NodeView(pools=[], candidates=[], positions={})  # set by execute
        self.requests: dict[tuple[int, int, int], _RequestData] = {}
        self.sub_counts: dict[tuple[int, int], int] = {}
        self.constraints: list[list[ClaimConstraint]] = []
        self.results: list[list[_Result]] = [[] for _ in claims]
        self.allocating: dict[str, list[int]] = {}  # device id -> claim indices allocating it
        self.allocating_capacity: dict[str, dict[str, Quantity]] = {}
        self.counters = CounterBook(owner.available_counters, self.quirks.counters_by_pool_name)
        self.selectable_cache: dict[tuple[tuple[int, int, int], int], tuple[bool, str, tuple[tuple[str, str], ...]]] = {}
        self.steps = 0
        # the caller's max_steps (an int when given: the give-up message prints it)
        self.step_limit: float = math.inf if max_steps is None else max_steps
        # The stable variant still enumerates permutations: every slot starts at the first device.
        self.combinations = self.features.variant != "stable"
        self.explain = explain
        self.evidence: EvidenceLog | None = None

    # ------------------------------------------------------------------ driver

    def execute(self) -> AllocationOutcome:
        try:
            self.view = self.owner.inventory.view(self.node)
            if self.explain:
                self.evidence = EvidenceLog(self.view)
            self._prepare()
            try:
                done = self._one(0, 0, 0, 0, 0, False)
            except _SizeExceeded:
                done = False
            if not done:
                # allocator_incubating.go (Allocate): a failed search is an error when any pool
                # gathered for the node is invalid, whether or not the search reached its devices.
                if any(pool.invalid for pool in self.view.all_pools):
                    return self._outcome(Status.ERROR, code="invalid_pools", message=self._invalid_pools_message())
                return self._outcome(Status.UNSATISFIABLE, message="cannot allocate all claims")
            try:
                allocations = [self._claim_allocation(ci) for ci in range(len(self.claims))]
            except ResultError as exc:
                raise AllocationError("node_selector", str(exc)) from None
        except AllocationError as exc:
            return self._outcome(Status.ERROR, code=exc.code, message=exc.message)
        except InventoryError as exc:
            # Unusable inventory data met on this node (e.g. an unparsable quantity).
            return self._outcome(Status.ERROR, code="invalid_inventory", message=str(exc))
        except _StepBudgetSpent:
            return self._outcome(Status.ERROR, code="step_budget",
                                 message=f"gave up trying to allocate devices after {self.step_limit} search steps "
                                         "(the step budget)")
        except RecursionError:
            # One frame per device slot and request; only absurdly large pods get here.
            return self._outcome(Status.ERROR, code="too_deep", message="allocation search exceeds the recursion limit")
        return self._outcome(Status.SUCCESS, allocations=allocations)

    def _invalid_pools_message(self) -> str:
        # The first sentence is upstream's text; the pool problems name what to fix.
        # "pool X is invalid: reason" is the per-pool text older releases returned directly.
        problems = [f"pool {p.name} is invalid: {p.invalid_reason}" for p in self.view.all_pools if p.invalid]
        return "invalid resource pools were encountered: " + "; ".join(problems)

    def _outcome(self, status: Status, code: str = "", message: str = "",
                 allocations: list[ClaimAllocation] | None = None) -> AllocationOutcome:
        chosen: dict[str, int] = {}
        if status is Status.SUCCESS:
            for ci, results in enumerate(self.results):
                for res in results:
                    if res.request.has_parent:
                        chosen[f"{self.claims[ci].key}/{res.request.base}"] = res.request.key[2]
        evidence = []
        if self.evidence is not None:
            final = [(r.request.key, r.position) for results in self.results for r in results] if status is Status.SUCCESS else []
            evidence = self.evidence.tiers(self.claims, self.requests, self.sub_counts, final)
        return AllocationOutcome(status=status, allocations=allocations or [], error_code=code, message=message,
                                 evidence=evidence, steps=self.steps, chosen_subrequests=chosen)

    # ------------------------------------------------------------------ up-front checks (Allocate)

    def _prepare(self) -> None:
        for ci, claim in enumerate(self.claims):
            min_devices = 0
            for ri, request in enumerate(claim.spec.requests):
                if request.first_available:
                    if not self.features.prioritized_list:
                        raise AllocationError("feature_disabled", f"claim {claim.key}, request {request.name}: has subrequests, "
                                              "but the DRAPrioritizedList feature is disabled")
                    smallest = None
                    for si, sub in enumerate(request.first_available):
                        data = self._validate(ci, ri, si, claim, request, f"{request.name}/{sub.name}", sub.name, sub.spec)
                        smallest = data.num_devices if smallest is None else min(smallest, data.num_devices)
                    self.sub_counts[(ci, ri)] = len(request.first_available)
                    min_devices += smallest or 0
                else:
                    if request.exactly is None:
                        raise AllocationError("unsupported_request", f"claim {claim.key}, request {request.name}: "
                                              "missing device class name (unsupported request type?)")
                    data = self._validate(ci, ri, 0, claim, request, request.name, "", request.exactly)
                    min_devices += data.num_devices
            if min_devices > MAX_RESULTS_PER_CLAIM:
                raise AllocationError("too_many_devices", f"claim {claim.key}: number of requested devices {min_devices} "
                                      f"exceeds the claim limit of {MAX_RESULTS_PER_CLAIM}")
            constraints: list[ClaimConstraint] = []
            for i, c in enumerate(claim.spec.constraints):
                if c.match_attribute is not None:
                    constraints.append(MatchAttribute(c.requests, c.match_attribute, self.features.list_type_attributes))
                elif c.distinct_attribute is not None and self.features.variant != "stable":
                    # allocator_incubating.go and allocator_experimental.go know distinctAttribute
                    # whatever DRAConsumableCapacity says; only allocator_stable.go, picked when no
                    # gate needs more, treats it as an empty constraint.
                    constraints.append(DistinctAttribute(c.requests, c.distinct_attribute, self.features.list_type_attributes,
                                                         self.quirks.distinct_by_base_request))
                else:
                    raise AllocationError("unsupported_constraint", f"claim {claim.key}, constraint #{i}: "
                                          "empty constraint (unsupported constraint type?)")
            self.constraints.append(constraints)

    def _validate(self, ci: int, ri: int, si: int, claim: ResourceClaim, request: DeviceRequest,
                  name: str, sub: str, spec: ExactRequest) -> _RequestData:
        # allocator_incubating.go and allocator_experimental.go refuse capacity requests with the
        # feature off; allocator_stable.go, picked when no gate needs more, never reads them.
        if spec.capacity_requests is not None and not self.features.consumable_capacity and self.features.variant != "stable":
            raise AllocationError("feature_disabled", f"{_where(claim, request, sub)}: has capacity requests, but the DRAConsumableCapacity feature is disabled")
        for i, selector in enumerate(spec.selectors):
            if selector.cel is None:
                raise AllocationError("unsupported_selector", f"{_where(claim, request, sub)}, selector #{i}: CEL expression empty (unsupported selector type?)")
        if not self.features.admin_access and spec.admin_access is not None:
            raise AllocationError("feature_disabled", f"{_where(claim, request, sub)}: admin access is requested, but the feature is disabled")
        if not spec.device_class_name:
            raise AllocationError("unsupported_request", f"{_where(claim, request, sub)}: missing device class name (unsupported request type?)")
        device_class = self.owner.inventory.device_class(spec.device_class_name)
        if device_class is None:
            raise AllocationError("class_not_found", f"{_where(claim, request, sub)}: could not retrieve device class {spec.device_class_name}: "
                                  f'deviceclass.resource.k8s.io "{spec.device_class_name}" not found')
        capacity_requests = None
        if spec.capacity_requests is not None and self.features.consumable_capacity:
            try:
                capacity_requests = {k: Quantity.parse(v) for k, v in spec.capacity_requests.items()}
            except ValueError as exc:
                raise AllocationError("invalid_quantity", f"{_where(claim, request, sub)}: capacity requests: {exc}") from None
        data = _RequestData(key=(ci, ri, si), name=name, base=request.name, sub=sub, spec=spec, device_class=device_class,
                            has_parent=bool(sub), admin=spec.admin_access is True, capacity_requests=capacity_requests)
        self.requests[data.key] = data
        if spec.allocation_mode == "ExactCount":
            data.num_devices = spec.count
        elif spec.allocation_mode == "All":
            data.all_mode = True
            # Pool by pool, as upstream: an unusable pool stops the walk only when it is reached,
            # so a CEL error in an earlier pool's device wins over a later incomplete pool.
            positions = self.view.positions
            for pool in self.view.all_pools:
                if pool.incomplete:
                    raise AllocationError("pool_incomplete", f"{_where(claim, request, sub)}: asks for all devices, but resource pool "
                                          f"{pool.pool_id} is currently being updated")
                if pool.invalid:
                    raise AllocationError("pool_invalid", f"{_where(claim, request, sub)}: asks for all devices, but resource pool "
                                          f"{pool.pool_id} is currently invalid")
                for entry in pool.entries:
                    position = positions[entry]
                    if not self._selectable(data, entry, position):
                        continue
                    if self.features.consumable_capacity and not self._capacity_fits(data, entry, position, in_all_list=True):
                        continue
                    data.all_devices.append((position, entry, pool))
            data.num_devices = len(data.all_devices)
        else:
            raise AllocationError("unsupported_mode", f"{_where(claim, request, sub)}: unsupported count mode {spec.allocation_mode}")
        return data

    # ------------------------------------------------------------------ the search (allocateOne)

    def _one(self, ci: int, ri: int, si: int, di: int, start: int, in_sub: bool) -> bool:
        self.steps += 1
        if self.steps > self.step_limit:
            raise _StepBudgetSpent()
        if ci >= len(self.claims):
            return True
        claim = self.claims[ci]
        if ri >= len(claim.spec.requests):
            try:
                return self._one(ci + 1, 0, 0, 0, 0, False)
            except _SizeExceeded:
                return False
        if not in_sub and (ci, ri) in self.sub_counts:
            size_only = True
            for sub_index in range(self.sub_counts[(ci, ri)]):
                try:
                    if self._one(ci, ri, sub_index, 0, 0, True):
                        return True
                    size_only = False
                except _SizeExceeded:
                    continue
            if size_only:
                raise _SizeExceeded()
            return False
        data = self.requests[(ci, ri, si)]
        if data.all_mode and not data.all_devices:
            return False
        if di >= data.num_devices:
            return self._one(ci, ri + 1, 0, 0, 0, False)
        if len(self.results[ci]) + data.num_devices - di > MAX_RESULTS_PER_CLAIM:
            raise _SizeExceeded()
        if data.all_mode:
            position, entry, pool = data.all_devices[di]
            undo = self._allocate_device(data, entry, pool, position, must=True)
            if undo is None:
                return False
            try:
                if self._one(ci, ri, si, di + 1, 0, in_sub):
                    return True
            except _SizeExceeded:
                undo()  # a size-limit abort gives this device back on its way up
                raise
            undo()
            return False
        ev = self.evidence
        candidates = self.view.candidates
        for position in range(start, len(candidates)):
            entry, pool = candidates[position]
            if pool.incomplete:
                continue
            if pool.invalid:
                # Never allocate from an invalid pool; it only matters if nothing else fits. As in
                # allocator_incubating.go (allocateOne), the pool is passed over before its devices
                # are looked at, so a selector failing on one of them is never evaluated.
                if ev is not None:
                    ev.record(data.key, position, Reason.POOL_INVALID, (("pool", pool.pool_id), ("problem", pool.invalid_reason)))
                continue
            if data.admin:
                if ci in self.allocating.get(entry.id, ()):
                    if ev is not None:
                        ev.record(data.key, position, Reason.IN_USE, (("by", "same claim"),))
                    continue
            elif entry.id in self.state.allocated_devices or self.allocating.get(entry.id):
                if ev is not None:
                    ev.record(data.key, position, Reason.IN_USE, self._holder(entry.id))
                continue
            if not self._selectable(data, entry, position):
                continue
            if self.features.consumable_capacity and not self._capacity_fits(data, entry, position):
                continue
            undo = self._allocate_device(data, entry, pool, position, must=False)
            if undo is None:
                continue
            try:
                if self._one(ci, ri, si, di + 1, position + 1 if self.combinations else 0, in_sub):
                    return True
            except _SizeExceeded:
                undo()
                raise
            undo()
        return False

    # ------------------------------------------------------------------ per-device checks

    def _holder(self, device_id: str) -> tuple[tuple[str, str], ...]:
        """Who holds a device: an earlier allocation, or a claim of this same call."""
        holders = self.allocating.get(device_id)
        if holders:
            return (("by", self.claims[holders[0]].key),)
        return (("by", "allocated"),)

    def _selectable(self, data: _RequestData, entry: DeviceEntry, position: int) -> bool:
        """``isSelectable``, cached per (device, request/subrequest) for this call."""
        cache_key = (data.key, position)
        cached = self.selectable_cache.get(cache_key)
        if cached is None:
            cached = self._kept_selectable(data, entry, position)
            self.selectable_cache[cache_key] = cached
        ok, reason, detail = cached
        if not ok and self.evidence is not None:
            self.evidence.record(data.key, position, reason, detail)
        return ok

    # verdicts kept per device entry: past this many selector pairs (claim specs come and go) the
    # entry starts over rather than hold old specs' selectors alive
    _KEPT_PAIRS = 64

    def _kept_selectable(self, data: _RequestData, entry: DeviceEntry,
                         position: int) -> tuple[bool, str, tuple[tuple[str, str], ...]]:
        """``_compute_selectable`` remembered on the entry across calls, for the devices whose
        verdict reads nothing but the device and the two selector lists: the entry lives as long
        as its inventory (so do its features and device), the selector tuples belong to parsed
        classes and claim specs that are shared while unchanged, and a CEL error is never kept
        (it raises). Devices under per-device node selection also read the node: not kept."""
        if entry.slice.per_device_node_selection:
            return self._compute_selectable(data, entry, position)
        of_class, of_request = data.device_class.selectors, data.spec.selectors
        key = (id(of_class), id(of_request))
        kept = entry.selectable.get(key)
        if kept is not None and kept[0] is of_class and kept[1] is of_request:
            verdict: tuple[bool, str, tuple[tuple[str, str], ...]] = kept[2]
            return verdict
        verdict = self._compute_selectable(data, entry, position)
        if len(entry.selectable) >= self._KEPT_PAIRS:
            entry.selectable.clear()
        entry.selectable[key] = (of_class, of_request, verdict)
        return verdict

    def _compute_selectable(self, data: _RequestData, entry: DeviceEntry,
                            position: int) -> tuple[bool, str, tuple[tuple[str, str], ...]]:
        device = entry.device
        if device.binding_conditions and not self.features.device_binding:
            return False, Reason.POOL_INVALID, (("problem", "binding conditions need DRADeviceBindingConditions"),)
        failed = self._first_false(data, entry, position, data.device_class.selectors, True)
        if failed is not None:
            return False, Reason.CLASS_SELECTOR_MISMATCH, failed
        failed = self._first_false(data, entry, position, data.spec.selectors, False)
        if failed is not None:
            return False, Reason.REQUEST_SELECTOR_MISMATCH, failed
        if entry.slice.per_device_node_selection and not node_matches(
            self.node, device.node_name, device.all_nodes, device.node_selector
        ):
            return False, Reason.NODE_MISMATCH, (("node", self.node.name),)
        return True, "", ()

    def _first_false(self, data: _RequestData, entry: DeviceEntry, position: int, selectors: Sequence[DeviceSelector],
                     of_class: bool) -> tuple[tuple[str, str], ...] | None:
        """Detail of the first selector evaluating to false, None when all match; errors are fatal."""
        results = entry.cel_results
        for i, selector in enumerate(selectors):
            expression = selector.cel or ""
            matched = results.get(expression)
            if matched is None:
                try:
                    matched = self.owner.selectors.matches(entry, expression)
                except SelectorFailure as exc:
                    if self.evidence is not None:
                        self.evidence.record(data.key, position, Reason.CEL_ERROR,
                                             (("selector", str(i)), ("expression", expression), ("error", exc.message)))
                    owner = f"class {data.device_class.name}" if of_class else f"claim {self.claims[data.key[0]].key}"
                    raise AllocationError(f"cel_{exc.kind}", f"{owner}: selector #{i}: CEL {exc.kind} error: {exc.message}") from None
            if not matched:
                return (("selector", str(i)), ("expression", expression))
        return None

    def _capacity_fits(self, data: _RequestData, entry: DeviceEntry, position: int, in_all_list: bool = False) -> bool:
        allocated = self.state.aggregated_capacity.get(entry.id)
        allocating = self.allocating_capacity.get(entry.id)
        if in_all_list and not self.quirks.all_mode_remaining_capacity:
            allocated, allocating = None, None
        ok, name, why = check_fits(data.capacity_requests, entry.capacity, allocated, allocating)
        if not ok and self.evidence is not None:
            reason = Reason.IN_USE if (entry.multi and why == "exceeds capacity" and (allocated or allocating)) else Reason.CAPACITY_INSUFFICIENT
            self.evidence.record(data.key, position, reason, (("capacity", name), ("problem", why)))
        return ok

    def _allocate_device(self, data: _RequestData, entry: DeviceEntry, pool: Pool, position: int,
                         must: bool) -> Callable[[], None] | None:
        """``allocateDevice``: returns an undo closure when the device was taken, else None."""
        ci = data.key[0]
        ev = self.evidence
        if data.admin:
            if not entry.multi and ci in self.allocating.get(entry.id, ()):
                if ev is not None:
                    ev.record(data.key, position, Reason.IN_USE, (("by", "same claim"),))
                return None
        elif entry.id in self.state.allocated_devices or self.allocating.get(entry.id):
            if ev is not None:
                ev.record(data.key, position, Reason.IN_USE, self._holder(entry.id))
            return None
        counters_undo: Callable[[], None] | None = None
        if entry.counters:
            if not self.features.partitionable_devices:
                if ev is not None:
                    ev.record(data.key, position, Reason.COUNTERS_EXHAUSTED, (("problem", "DRAPartitionableDevices is disabled"),))
                return None
            # A multi-allocatable device consumes its counters once, but in 1.36 an earlier share
            # only counts when it has an AggregatedCapacity entry (allocator_incubating.go): a
            # shareID result without consumedCapacity still uses up the counters of the pool (see
            # available_counters) and the device must then find them again.
            shared_in_use = entry.multi and (self.state.has_consumed_capacity(entry.id) or entry.id in self.allocating_capacity)
            if not shared_in_use:
                counters_undo, exceeded = self.counters.reserve(entry, pool)
                if exceeded is not None:
                    if ev is not None:
                        ev.record(data.key, position, Reason.COUNTERS_EXHAUSTED, (("counterSet", exceeded[0]), ("counter", exceeded[1])))
                    return None
        leak = self.quirks.counter_leak
        if self.features.device_taints:
            taint = first_untolerated(entry.taints, data.spec.tolerations) if entry.taints else None
            if taint is not None:
                if ev is not None:
                    reason = Reason.UNHEALTHY if self.owner.health(taint) else Reason.TAINT_NOT_TOLERATED
                    ev.record(data.key, position, reason, (("key", taint.key), ("value", taint.value), ("effect", taint.effect)))
                if counters_undo is not None and not leak:
                    counters_undo()
                return None
        constraints = self.constraints[ci]
        device, driver = entry.device, entry.driver
        for i, constraint in enumerate(constraints):
            if not constraint.add(data.base, data.sub, device, driver, entry.id):
                if must:
                    raise AllocationError("constraint", f"claim {self.claims[ci].key}, request {data.sub or data.base}: cannot add device "
                                          f"{entry.id} because a claim constraint would not be satisfied")
                for earlier in constraints[:i]:
                    earlier.remove(data.base, data.sub, device, driver, entry.id)
                if ev is not None:
                    attr = getattr(constraint, "attribute", "")
                    kind = "matchAttribute" if isinstance(constraint, MatchAttribute) else "distinctAttribute"
                    ev.record(data.key, position, Reason.CONSTRAINT_UNSATISFIED, (("constraint", kind), ("attribute", attr)))
                if counters_undo is not None and not leak:
                    counters_undo()
                return None
        if self.features.consumable_capacity and entry.multi and not self._capacity_fits(data, entry, position):
            # Re-checked at allocation time: All-mode candidates were listed before earlier
            # requests of this call consumed shares. Upstream 1.36 leaves the constraint values
            # added above in place on this path.
            if not self.quirks.capacity_recheck_keeps_constraint:
                for constraint in constraints:
                    constraint.remove(data.base, data.sub, device, driver, entry.id)
            if counters_undo is not None and not leak:
                counters_undo()
            return None
        if not entry.multi:
            self.allocating.setdefault(entry.id, []).append(ci)
        share_id: str | None = None
        consumed: dict[str, Quantity] | None = None
        if self.features.consumable_capacity and entry.multi:
            consumed = consumed_capacity(data.capacity_requests, entry.capacity)
            bucket = self.allocating_capacity.setdefault(entry.id, {})
            for name, amount in consumed.items():
                bucket[name] = amount if name not in bucket else bucket[name].add(amount)
            share_id = self.owner.share_ids(self.claims[ci], data.name, entry.id, len(self.results[ci]))
        self.results[ci].append(_Result(data, entry, pool, position, share_id, consumed))
        if ev is not None:
            ev.record(data.key, position, Reason.SELECTED, ())

        def undo() -> None:
            for constraint in constraints:
                constraint.remove(data.base, data.sub, device, driver, entry.id)
            if not entry.multi:
                holders = self.allocating[entry.id]
                holders.remove(ci)
                if not holders:
                    del self.allocating[entry.id]
            if consumed is not None:
                bucket = self.allocating_capacity[entry.id]
                for name, amount in consumed.items():
                    bucket[name] = bucket[name].sub(amount)
                if all(q.is_zero() for q in bucket.values()):
                    del self.allocating_capacity[entry.id]
            self.results[ci].pop()
            if counters_undo is not None and not (leak and entry.multi):
                counters_undo()
            if ev is not None:
                ev.record(data.key, position, Reason.NOT_REACHED, (("backtracked", "true"),))

        return undo

    # ------------------------------------------------------------------ results (Allocate, after the search)

    def _claim_allocation(self, ci: int) -> ClaimAllocation:
        claim = self.claims[ci]
        results = [result_item(res.request.name, res.entry, res.request.admin, res.request.spec.tolerations,
                               self.features.device_binding, res.share_id, res.consumed) for res in self.results[ci]]
        chosen: dict[int, _RequestData] = {}
        for res in self.results[ci]:
            chosen.setdefault(res.request.key[1], res.request)
        for ri in range(len(claim.spec.requests)):
            if ri not in chosen and (ci, ri, 0) in self.requests and (ci, ri) not in self.sub_counts:
                chosen[ri] = self.requests[(ci, ri, 0)]
        config = build_config(claim, [(chosen[ri].base, chosen[ri].name, chosen[ri].device_class) for ri in sorted(chosen)],
                              self.quirks.config_duplicates)
        selector = build_node_selector(self.node.name, [(r.entry, self.features.device_binding) for r in self.results[ci]])
        return ClaimAllocation(claim=claim.name, results=results, node_selector=selector, config=config)
