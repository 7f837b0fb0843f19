"""The primary-reason order and how each reason and blocker reads in a sentence.

A device gets the first failing check in ``PRIMARY_ORDER`` (the kube-scheduler order: node
filters, then pool usability, then the allocator's per-device checks in the order of upstream
``allocateDevice``), or ``available``. Text is rendered from codes and structured details,
never parsed back.
"""

from __future__ import annotations

from audit.records import Blocker, Reason

AVAILABLE = "available"

PRIMARY_ORDER: tuple[str, ...] = (
    Reason.NODE_FILTERED.value,
    Reason.POOL_INCOMPLETE.value,
    Reason.POOL_INVALID.value,
    Reason.IN_USE.value,
    Reason.CLASS_SELECTOR_MISMATCH.value,
    Reason.REQUEST_SELECTOR_MISMATCH.value,
    Reason.CEL_ERROR.value,
    Reason.NODE_MISMATCH.value,
    Reason.CAPACITY_INSUFFICIENT.value,
    Reason.COUNTERS_EXHAUSTED.value,
    Reason.UNHEALTHY.value,
    Reason.TAINT_NOT_TOLERATED.value,
    Reason.CONSTRAINT_UNSATISFIED.value,
    AVAILABLE,
)

# A device reachable from several nodes keeps the reason that got furthest down this order.
RANK = {code: i for i, code in enumerate(PRIMARY_ORDER)}

# Codes a stored record may carry besides the primary ones (what the decision itself saw).
RECORD_ONLY_ORDER: tuple[str, ...] = (
    Reason.SELECTED.value, Reason.NOT_REACHED.value, Reason.QUOTA_EXHAUSTED.value,
    Reason.FAIR_SHARE_DEFERRED.value, Reason.BINDING_CONFLICT.value, Reason.STALE_SLICE.value,
)

REASON_TEXT: dict[str, str] = {
    Reason.IN_USE.value: "in use",
    Reason.CLASS_SELECTOR_MISMATCH.value: "not selected by the device class",
    Reason.REQUEST_SELECTOR_MISMATCH.value: "not matching the request's selectors",
    Reason.CEL_ERROR.value: "with a selector error",
    Reason.NODE_MISMATCH.value: "not reachable from the node",
    Reason.CAPACITY_INSUFFICIENT.value: "without enough free capacity",
    Reason.COUNTERS_EXHAUSTED.value: "with shared counters used up",
    Reason.UNHEALTHY.value: "unhealthy",
    Reason.TAINT_NOT_TOLERATED.value: "with an untolerated taint",
    Reason.CONSTRAINT_UNSATISFIED.value: "violating a claim constraint",
    Reason.POOL_INCOMPLETE.value: "in pools being updated",
    Reason.POOL_INVALID.value: "in invalid pools",
    Reason.NODE_FILTERED.value: "on nodes the pod cannot use",
    AVAILABLE: "available",
    Reason.SELECTED.value: "allocated to this pod",
    Reason.NOT_REACHED.value: "not reached by the search",
    Reason.QUOTA_EXHAUSTED.value: "over the tenant's quota",
    Reason.FAIR_SHARE_DEFERRED.value: "deferred for fair share",
    Reason.BINDING_CONFLICT.value: "lost to a binding conflict",
    Reason.STALE_SLICE.value: "on stale slices",
}

BLOCKER_CODES = tuple(b.value for b in Blocker)


def ordered_codes(codes: set[str]) -> list[str]:
    """The pod's own devices (``selected``) first, then known codes in primary then record order;
    anything else after, by name."""
    known = [c for c in dict.fromkeys((Reason.SELECTED.value, *PRIMARY_ORDER, *RECORD_ONLY_ORDER)) if c in codes]
    return known + sorted(codes - set(known))
