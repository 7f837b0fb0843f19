"""Feature gates and reproduced upstream quirks that select allocator behaviour.

``Features()`` is the Kubernetes 1.36 default gate set, which makes the scheduler run the
``incubating`` allocator (k8s.io/dynamic-resource-allocation/structured, ``allocator.go``). ``Features.from_gates("DRAConsumableCapacity=false")``
parses the ``--feature-gates`` syntax of kube-scheduler. ``Quirks`` names each known 1.36
behaviour that was later changed upstream; all are on by default because 1.36 has them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

# gate name -> Features field; DRADeviceBindingConditions and DRAResourceClaimDeviceStatus
# together form the allocator's DeviceBindingAndStatus feature (plugin AllocatorFeatures).
_GATES = {
    "DRAPrioritizedList": "prioritized_list",
    "DRAAdminAccess": "admin_access",
    "DRADeviceTaints": "device_taints",
    "DRAPartitionableDevices": "partitionable_devices",
    "DRAConsumableCapacity": "consumable_capacity",
    "DRADeviceBindingConditions": "binding_conditions",
    "DRAResourceClaimDeviceStatus": "resource_claim_device_status",
    "DRAListTypeAttributes": "list_type_attributes",
    "DRADeviceTaintRules": "device_taint_rules",
}

# Real kube-scheduler gates that do not change what the per-node allocator decides.
NO_EFFECT_GATES = frozenset({
    "DynamicResourceAllocation", "DRAExtendedResource", "DRASchedulerFilterTimeout", "DRANodeAllocatableResources",
    "DRAWorkloadResourceClaims", "DRAResourceClaimGranularStatusAuthorization", "DRADeviceBindingConditionsTimeout",
})


class GateError(ValueError):
    """A --feature-gates value that is not NAME=true|false for a known gate."""


@dataclass(frozen=True)
class Features:
    """Allocator features; defaults are the 1.36 defaults (kubernetes ``pkg/features/kube_features.go``)."""

    prioritized_list: bool = True
    admin_access: bool = True
    device_taints: bool = True
    partitionable_devices: bool = True
    consumable_capacity: bool = True
    binding_conditions: bool = True
    resource_claim_device_status: bool = True
    list_type_attributes: bool = False
    # Beta and off by default in 1.36, where the API is then not served at all; DeviceTaintRules
    # given as input imply it is on, so they apply unless this is turned off explicitly.
    device_taint_rules: bool = True

    @property
    def device_binding(self) -> bool:
        """Upstream ``DeviceBindingAndStatus``: both gates must be on."""
        return self.binding_conditions and self.resource_claim_device_status

    @property
    def variant(self) -> str:
        """The allocator kube-scheduler 1.36 picks: the first whose features cover the enabled ones.

        ``stable`` supports AdminAccess, PrioritizedList, PartitionableDevices and DeviceTaints;
        ``incubating`` adds binding conditions/device status and consumable capacity;
        ``experimental`` adds list-type attributes (as upstream ``allocator.go`` selects it).
        """
        if self.list_type_attributes:
            return "experimental"
        if self.consumable_capacity or self.device_binding:
            return "incubating"
        return "stable"

    @classmethod
    def from_gates(cls, spec: str, base: Features | None = None) -> Features:
        """Parse ``NAME=true|false,...``; unknown gates or values raise GateError."""
        return cls.parse_gates(spec, base)[0]

    @classmethod
    def parse_gates(cls, spec: str, base: Features | None = None) -> tuple[Features, list[str]]:
        """Like ``from_gates``, also returning known gates that have no effect on allocation."""
        changes: dict[str, bool] = {}
        no_effect: list[str] = []
        for part in (p.strip() for p in spec.split(",")):
            if not part:
                continue
            name, sep, value = part.partition("=")
            name, value = name.strip(), value.strip().lower()
            if not sep or value not in ("true", "false"):
                raise GateError(f"feature gate {part!r}: expected NAME=true or NAME=false")
            if name in NO_EFFECT_GATES:
                no_effect.append(name)
                continue
            if name not in _GATES:
                raise GateError(f"feature gate {name!r}: unknown gate (known: {', '.join(_GATES)})")
            changes[_GATES[name]] = value == "true"
        return replace(base or cls(), **changes), no_effect

    def to_gates(self) -> dict[str, bool]:
        return {gate: getattr(self, attr) for gate, attr in _GATES.items()}


@dataclass(frozen=True)
class Quirks:
    """Upstream 1.36 behaviours reproduced for exactness; turn one off to get the fixed behaviour."""

    # Counter reservations are not undone when a device is then rejected by a taint or a
    # constraint, nor when backtracking over a multi-allocatable device (fixed upstream by
    # kubernetes/kubernetes pull request 140431).
    counter_leak: bool = True
    # Counter bookkeeping is keyed by pool name only, so two drivers publishing the same pool
    # name (often the node name) share it.
    counters_by_pool_name: bool = True
    # distinctAttribute stores one value per base request name: a second device of the same
    # request overwrites the first one's entry (incubating constraint.go).
    distinct_by_base_request: bool = True
    # A claim config naming several requests is copied once per named request (fixed in master
    # by c5a40b2).
    config_duplicates: bool = True
    # allocationMode All with consumable capacity filters on remaining capacity, so All may
    # succeed on a subset (fixed after 1.36 by kubernetes/kubernetes#140769).
    all_mode_remaining_capacity: bool = True
    # When the consumable-capacity re-check of a multi-allocatable device fails after the
    # device was added to the claim's constraints, allocateDevice returns without removing it:
    # the value stays behind and constrains every later device of the claim (incubating
    # allocator_incubating.go, allocateDevice).
    capacity_recheck_keeps_constraint: bool = True

    @classmethod
    def none(cls) -> Quirks:
        """Every quirk off: the behaviour upstream converged on after 1.36."""
        return cls(**{f.name: False for f in fields(cls)})
