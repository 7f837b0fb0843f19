"""Consumable capacity (upstream incubating consumable_capacity.go in
k8s.io/dynamic-resource-allocation/structured/internal/incubating).

Every capacity of a device is consumed by every allocation: the requested amount rounded by the
capacity's request policy, or the policy default, or — when nothing is requested and there is no
default — the whole capacity. A device fits when no policy is violated and consumption plus what
is already allocated (aggregated over shares) plus what this allocation call is allocating stays
within the capacity value. Rounding uses integer ``Value()`` exactly as upstream does.
"""

from __future__ import annotations

from collections.abc import Mapping

from audit.allocator.inventory import ParsedCapacity
from audit.dra.quantity import Format, Quantity


def consumed_amount(requested: Quantity | None, cap: ParsedCapacity) -> Quantity:
    """``calculateConsumedCapacity``."""
    if requested is None:
        return cap.default if cap.default is not None else cap.value
    if not cap.has_policy:
        return requested
    if cap.has_range and cap.range_min is not None:
        return _round_up_range(requested, cap)
    if cap.valid_values:
        for valid in cap.valid_values:
            if requested.cmp(valid) <= 0:
                return valid
        return requested
    return requested


def _round_up_range(requested: Quantity, cap: ParsedCapacity) -> Quantity:
    assert cap.range_min is not None
    if requested.cmp(cap.range_min) < 0:
        return cap.range_min
    if cap.range_step is None:
        return requested
    value, step, low = requested.value(), cap.range_step.value(), cap.range_min.value()
    added = value - low
    n, mod = _go_divmod(added, step)
    if mod != 0:
        n += 1
    return Quantity.from_int(low + step * n, Format.BINARY_SI)


def _go_divmod(a: int, b: int) -> tuple[int, int]:
    """Go's truncating integer division and remainder."""
    q = abs(a) // abs(b)
    if (a < 0) != (b < 0):
        q = -q
    return q, a - q * b


def violates_policy(amount: Quantity, cap: ParsedCapacity) -> bool:
    if not cap.has_policy:
        return False
    if cap.default is not None and amount.cmp(cap.default) == 0:
        return False
    if cap.has_range:
        if cap.range_max is not None and amount.cmp(cap.range_max) > 0:
            return True
        if cap.range_step is not None and cap.range_min is not None:
            _, mod = _go_divmod(amount.value() - cap.range_min.value(), cap.range_step.value())
            if mod != 0:
                return True
        return False
    if cap.valid_values:
        return not any(amount.cmp(v) == 0 for v in cap.valid_values)
    return False


def check_fits(
    requests: Mapping[str, Quantity] | None,
    capacity: Mapping[str, ParsedCapacity],
    allocated: Mapping[str, Quantity] | None,
    allocating: Mapping[str, Quantity] | None,
) -> tuple[bool, str, str]:
    """``CmpRequestOverCapacity``: (fits, capacity name at fault, why) — why is "" on success."""
    if requests:
        for name in requests:
            if name not in capacity:
                return False, name, "not defined"
    for name, cap in capacity.items():
        requested = requests.get(name) if requests else None
        amount = consumed_amount(requested, cap)
        if violates_policy(amount, cap):
            return False, name, "violates request policy"
        total = amount
        if allocated and name in allocated:
            total = allocated[name].add(total)
        if allocating and name in allocating:
            total = total.add(allocating[name])
        if total.cmp(cap.value) > 0:
            return False, name, "exceeds capacity"
    return True, "", ""


def consumed_capacity(requests: Mapping[str, Quantity] | None, capacity: Mapping[str, ParsedCapacity]) -> dict[str, Quantity]:
    """What one allocation of a multi-allocatable device records as ``consumedCapacity``."""
    return {name: consumed_amount(requests.get(name) if requests else None, cap) for name, cap in capacity.items()}
