"""Device taints versus request tolerations (upstream ``allocator_incubating.go``, ``allocateDevice``, and
k8s.io/dynamic-resource-allocation/resourceclaim ``ToleratesTaint``).

Only ``NoSchedule`` and ``NoExecute`` taints keep a device from being allocated; ``None`` and
unknown effects are ignored. A toleration matches per ``ToleratesTaint`` of
``resourceclaim/devicetoleration.go``; ``tolerationSeconds`` only matters for eviction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from audit.dra.model import DeviceTaint, Toleration

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def tolerates(toleration: Toleration, taint: DeviceTaint) -> bool:
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator in ("", "Equal"):
        return toleration.value == taint.value
    return toleration.operator == "Exists"


def first_untolerated(taints: Iterable[DeviceTaint], tolerations: Sequence[Toleration]) -> DeviceTaint | None:
    """The first blocking taint no toleration matches, or None when the device may be used."""
    for taint in taints:
        if taint.effect in BLOCKING_EFFECTS and not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def is_health_taint(taint: DeviceTaint) -> bool:
    """Default health predicate: taint keys ending in ``/unhealthy`` mean the device is unhealthy."""
    return taint.key.endswith("/unhealthy") or taint.key == "unhealthy"
