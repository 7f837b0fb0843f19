"""Per-node DRA device allocation, exact to kube-scheduler 1.36 (incubating), with evidence.

Usage::

    from audit.allocator import Allocator, AllocatedState, Features, Quirks, Inventory
    inventory = Inventory(slices=[...], classes=[...], taint_rules=[...], features=Features())
    state = AllocatedState.from_claims(allocated_claims)
    outcome = Allocator(inventory, state, quirks=Quirks()).allocate(node, claims, explain=True)

``Inventory`` is built once and reused while slices, classes and rules are unchanged; an
``Allocator`` holds one allocated-state snapshot (like one scheduling cycle upstream) and may
allocate on any number of nodes. The outcome is ``audit.allocator.outcome.AllocationOutcome``.

Where this deliberately differs from upstream: ``shareID`` is a name-based UUID from an
injectable generator instead of a random one; the ``stable`` variant (and every release up to
1.35) visits pools in Go map order, which cannot be replayed, so the sorted 1.36 order is used
for every variant; the filter timeout and the CEL cost limit are not enforced (a caller may
bound the search by steps instead, ``Allocator.allocate``'s ``max_steps``); the
invalid-pools error appends which pools are invalid and why; DeviceTaintRules given as input
apply unless ``DRADeviceTaintRules=false``.
"""

from audit.allocator.features import Features, GateError, Quirks
from audit.allocator.inventory import Inventory, InventoryError
from audit.allocator.outcome import AllocationOutcome, ClaimAllocation, DeviceVerdict, Status, TierEvidence
from audit.allocator.search import AllocationError, Allocator, deterministic_share_id
from audit.allocator.state import AllocatedState
from audit.allocator.taints import is_health_taint, tolerates

__all__ = [
    "AllocatedState",
    "AllocationError",
    "AllocationOutcome",
    "Allocator",
    "ClaimAllocation",
    "DeviceVerdict",
    "Features",
    "GateError",
    "Inventory",
    "InventoryError",
    "Quirks",
    "Status",
    "TierEvidence",
    "deterministic_share_id",
    "is_health_taint",
    "tolerates",
]
