"""Exact per-device verdicts for one tier on one node, from the allocator's own evidence.

The tier is probed as a claim asking for one device of that tier alone (constraints that
apply to it kept), so every device the claim could have used gets a verdict. The allocator's
depth-first search stops at the first usable device and leaves later ones ``not_reached``;
the probe then occupies that device and searches again, until every device of the node has a
verdict. An occupied device is rejected by the in-use check, which upstream runs before any
other; if it consumes shared counters its consumption is first taken off its slice, since an
unallocated device consumes nothing and the devices after it must see the counters as they were.
An admin-access request may take occupied devices (upstream), so for it the chosen device is
instead given a taint nothing tolerates (its counters taken off first, so that the 1.36 counter
reservation that outlives a taint rejection cannot touch the devices after it).

When the claim asks for more than the tier (``audit.explain.claimfit``), a device that passes
every per-device check is only ``available`` if the whole claim can be allocated with it on the
node: the same occupy-and-search-again walk runs over the whole claim, and a device no
allocation takes is ``constraint_unsatisfied`` when the claim without its constraints could
take it (naming the constraint that alone rules it out), else ``node_filtered`` (the claim's
other requests cannot be allocated on that node).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from audit.allocator import AllocatedState, AllocationOutcome, Allocator, Inventory, Status
from audit.dra.model import DeviceClass, DeviceTaintRule, Node, ResourceClaim, ResourceSlice
from audit.explain.claimfit import claim_constraints, constraint_detail, whole_claim
from audit.explain.inventories import INVENTORIES
from audit.explain.parsed import PARSED
from audit.explain.reasons import AVAILABLE
from audit.explain.tiers import Tier
from audit.explain.view import ClusterView, ViewError
from audit.policy import Policy
from audit.records import Reason

Verdict = tuple[str, dict[str, str]]

# node_filtered cause of a node where the claim's other requests cannot be allocated.
CLAIM_UNSATISFIABLE = "claim_unsatisfiable"

# Put on a device the probe has already judged, so that an admin-access search moves past it.
RETIRED_TAINT = {"key": "explain.claimtrail.io/judged", "value": "", "effect": "NoSchedule"}


def probe_claim(claim: Mapping[str, Any], tier: Tier) -> dict[str, Any]:
    """The claim reduced to one device of this tier (status dropped: it is to be allocated)."""
    body = {k: v for k, v in tier.spec.items() if k not in ("count", "allocationMode", "name")}
    body["allocationMode"] = "ExactCount"
    body["count"] = 1
    if tier.subrequest:
        request: dict[str, Any] = {"name": tier.request, "firstAvailable": [{"name": tier.subrequest, **body}]}
    else:
        request = {"name": tier.request, "exactly": body}
    devices = (claim.get("spec") or {}).get("devices") or {}
    constraints = []
    for c in devices.get("constraints") or []:
        refs = c.get("requests") or []
        kept = [r for r in refs if r in (tier.request, tier.label)]
        if refs and not kept:
            continue
        constraints.append({**c, "requests": kept})
    out = {k: copy.deepcopy(v) for k, v in claim.items() if k != "status"}
    out["spec"] = {"devices": {"requests": [request], **({"constraints": constraints} if constraints else {})}}
    return out


T = TypeVar("T")


def parse_as(raw: Mapping[str, Any], cls: type[T]) -> T:
    """Parse an API object of a known kind; a malformed one is a ViewError naming object and field."""
    try:
        parsed = PARSED.parse(dict(raw))
    except ValueError as exc:
        raise ViewError(str(exc)) from None
    if not isinstance(parsed, cls):
        raise ViewError(f"{raw.get('kind')} {(raw.get('metadata') or {}).get('name')}: expected a {cls.__name__}")
    return parsed


def _relevant_slices(view: ClusterView, nodes: Iterable[str]) -> list[str]:
    """Slices an allocation on ``nodes`` can look at: theirs, every slice not tied to one node, and
    every other slice of the same pools (pool completeness and counters are pool-wide; counters
    are keyed by pool name only in 1.36, so equal pool names of other drivers come along)."""
    wanted = set(nodes)
    pool_names = set()
    for raw in view.slices.values():
        spec = raw.get("spec") or {}
        if spec.get("nodeName") in wanted or not spec.get("nodeName") or spec.get("sharedCounters"):
            pool_names.add((spec.get("pool") or {}).get("name"))
    return sorted(name for name, raw in view.slices.items()
                  if ((raw.get("spec") or {}).get("pool") or {}).get("name") in pool_names)


class NodeProber:
    """Holds the parsed cluster once and answers per-node probes for one claim tier."""

    def __init__(self, view: ClusterView, exclude_claims: Sequence[tuple[str, str]], nodes: Iterable[str],
                 policy: Policy | None = None) -> None:
        self._view = view
        # Which taints mean "unhealthy" is a policy choice; without one, the allocator's default.
        self._health = (lambda taint: policy.is_unhealthy_taint(taint.key)) if policy is not None else None
        names = _relevant_slices(view, nodes)
        self._parsed_slices = {name: parse_as(view.slices[name], ResourceSlice) for name in names}
        self._slice_of: dict[str, str] = {}  # device id -> slice name
        self._counter_devices: set[str] = set()  # devices that consume shared counters
        for name in names:
            spec = view.slices[name].get("spec") or {}
            for dev in spec.get("devices") or []:
                device_id = f"{spec.get('driver')}/{(spec.get('pool') or {}).get('name')}/{dev.get('name')}"
                self._slice_of[device_id] = name
                if dev.get("consumesCounters"):
                    self._counter_devices.add(device_id)
        self._raw_slices: dict[str, dict[str, Any]] = {}
        self._classes = [parse_as(raw, DeviceClass) for _, raw in sorted(view.classes.items())]
        self._rules = [parse_as(raw, DeviceTaintRule) for _, raw in sorted(view.taint_rules.items())]
        self._base = INVENTORIES.inventory(list(self._parsed_slices.values()), self._classes, self._rules)
        allocated = [parse_as(c, ResourceClaim) for c in view.allocated_claims(exclude_claims)]
        self._state = AllocatedState.from_claims(allocated)

    def _inventory(self, slices: Mapping[str, ResourceSlice]) -> Inventory:
        return Inventory(slices=list(slices.values()), classes=self._classes, taint_rules=self._rules)

    def probe(self, node_name: str, claim: ResourceClaim, wanted: set[str]) -> dict[str, Verdict]:
        node = parse_as(self._view.nodes[node_name], Node)
        admin = any(r.exactly is not None and r.exactly.admin_access for r in claim.spec.requests)
        verdicts: dict[str, Verdict] = {}
        # Trimmed or retired slices belong to this probe only: a device judged on another node is
        # whole and untainted again here.
        self._raw_slices = {}
        slices = self._parsed_slices
        inventory = self._base
        # One state serves every node: what a probe occupies here is given back before returning.
        state = self._state
        occupied: list[dict[str, str]] = []
        try:
            outcome, aborted = self._search(node, claim, wanted, admin, verdicts, slices, inventory, state, occupied)
        finally:
            state.remove_results(occupied)
        for device in sorted(wanted - verdicts.keys()):
            # A selector error aborts the whole node (upstream): devices after it were never tried.
            detail = {"aborted_by": aborted} if aborted else {"message": outcome.message}
            verdicts[device] = (Reason.CEL_ERROR.value if aborted else Reason.NOT_REACHED.value, detail)
        return verdicts

    def _search(self, node: Node, claim: ResourceClaim, wanted: set[str], admin: bool, verdicts: dict[str, Verdict],
                slices: dict[str, ResourceSlice], inventory: Inventory, state: AllocatedState,
                occupied: list[dict[str, str]]) -> tuple[AllocationOutcome, str]:
        """Search until every wanted device has a verdict, occupying each chosen device in turn."""
        aborted = ""
        for _ in range(len(wanted) + 64):
            outcome = Allocator(inventory, state, health=self._health).allocate(node, [claim], explain=True)
            chosen = ""
            aborted = ""
            for evidence in outcome.evidence:
                for v in evidence.verdicts:
                    if v.device in verdicts or v.reason == Reason.NOT_REACHED.value:
                        continue
                    if v.reason == Reason.SELECTED.value:
                        verdicts[v.device] = (AVAILABLE, {})
                        chosen = chosen or v.device
                    else:
                        verdicts[v.device] = (v.reason, v.detail_dict())
                        if v.reason == Reason.CEL_ERROR.value:
                            aborted = v.device
            if not (wanted - verdicts.keys()) or not chosen:
                break
            if admin or chosen in self._counter_devices:
                slices = self._retire(slices, chosen, taint=admin)
                inventory = self._inventory(slices)
            if chosen not in state.allocated_devices:  # an admin request may choose an occupied device
                driver, _, rest = chosen.partition("/")  # pool names may contain "/", drivers and devices not
                pool, _, name = rest.rpartition("/")
                result = {"driver": driver, "pool": pool, "device": name}
                state.add_results([result])
                occupied.append(result)
        return outcome, aborted

    def refine(self, node_name: str, claim: Mapping[str, Any], tier: Tier, verdicts: dict[str, Verdict]) -> None:
        """Judge the tier's ``available`` devices against the whole claim (see the module docstring)."""
        candidates = {d for d, (reason, _) in verdicts.items() if reason == AVAILABLE}
        if not candidates:
            return
        admin = bool(tier.spec.get("adminAccess"))
        lost = candidates - self._usable(node_name, whole_claim(claim, tier), tier, candidates, admin)
        if not lost:
            return
        constraints = claim_constraints(claim)
        loose = self._usable(node_name, whole_claim(claim, tier, keep=[]), tier, lost, admin) if constraints else set()
        named: dict[str, int] = {}
        unnamed = set(loose)
        for i in range(len(constraints)) if len(constraints) > 1 else ():
            if not unnamed:
                break
            alone = self._usable(node_name, whole_claim(claim, tier, keep=[i]), tier, unnamed, admin)
            named.update((d, i) for d in unnamed - alone)
            unnamed &= alone
        for device in sorted(lost):
            driver, raw = self._raw_device(device)
            if device in loose:
                # Ruled out by one constraint alone, or else only by them together: the first is named.
                verdicts[device] = (Reason.CONSTRAINT_UNSATISFIED.value,
                                    constraint_detail(constraints[named.get(device, 0)], raw, driver))
            else:
                others = ", ".join(sorted({str(r.get("name", "")) for r in
                                           ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []}
                                          - {tier.request}))
                verdicts[device] = (Reason.NODE_FILTERED.value, {
                    "cause": CLAIM_UNSATISFIABLE,
                    "detail": f"request {others} of the claim cannot be allocated with this device on node {node_name}"})

    def _raw_device(self, device_id: str) -> tuple[str, Mapping[str, Any]]:
        spec = self._view.slices[self._slice_of[device_id]].get("spec") or {}
        name = device_id.rpartition("/")[2]
        raw: Mapping[str, Any] = next((d for d in spec.get("devices") or [] if d.get("name") == name), {})
        return str(spec.get("driver", "")), raw

    def _usable(self, node_name: str, raw_claim: Mapping[str, Any], tier: Tier, candidates: set[str],
                admin: bool) -> set[str]:
        """The candidates some allocation of ``raw_claim`` on the node gives the tier's request.

        The tier's request comes first and asks for one device, so each search takes the first
        candidate the rest of the claim can go with; that device is then occupied and the search
        runs again, until it fails. Occupied devices are given back before returning.
        """
        claim = parse_as(raw_claim, ResourceClaim)
        node = parse_as(self._view.nodes[node_name], Node)
        self._raw_slices = {}
        slices = self._parsed_slices
        inventory = self._base
        state = self._state
        occupied: list[dict[str, str]] = []
        usable: set[str] = set()
        try:
            for _ in range(len(self._slice_of) + 1):
                outcome = Allocator(inventory, state, health=self._health).allocate(node, [claim])
                if outcome.status is not Status.SUCCESS:
                    break
                chosen = next((f"{r['driver']}/{r['pool']}/{r['device']}" for r in outcome.allocations[0].results
                               if r.get("request") == tier.label), "")
                if not chosen:
                    break
                if chosen in candidates:
                    usable.add(chosen)
                    if usable == candidates:
                        break
                if admin or chosen in self._counter_devices:
                    slices = self._retire(slices, chosen, taint=admin)
                    inventory = self._inventory(slices)
                if chosen not in state.allocated_devices:
                    driver, _, rest = chosen.partition("/")
                    pool, _, name = rest.rpartition("/")
                    result = {"driver": driver, "pool": pool, "device": name}
                    state.add_results([result])
                    occupied.append(result)
                elif not admin:
                    break  # cannot happen: the allocator never takes an occupied device for a plain request
        finally:
            state.remove_results(occupied)
        return usable

    def _retire(self, slices: dict[str, ResourceSlice], device_id: str, taint: bool) -> dict[str, ResourceSlice]:
        """``slices`` with the device's counter consumption taken off (and, for ``taint``, a taint
        no request tolerates put on it)."""
        slice_name = self._slice_of[device_id]
        raw = self._raw_slices.get(slice_name) or self._view.slices[slice_name]
        name = device_id.rpartition("/")[2]
        trimmed = copy.deepcopy(raw)
        devices = []
        for dev in trimmed["spec"].get("devices") or []:
            if dev.get("name") == name:
                dev = {k: v for k, v in dev.items() if k != "consumesCounters"}
                if taint:
                    dev["taints"] = [*(dev.get("taints") or []), RETIRED_TAINT]
            devices.append(dev)
        trimmed["spec"]["devices"] = devices
        self._raw_slices[slice_name] = trimmed
        return {**slices, slice_name: parse_as(trimmed, ResourceSlice)}
