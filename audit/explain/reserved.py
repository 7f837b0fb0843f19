"""Devices a reservation holds for another pod, judged in a cluster view as the engine holds them.

The decision engine keeps every pod but the reserved one off the devices a ``Reservation`` object
sets aside (``audit.scheduler.reservations``): on the reservation's node, the free healthy devices
of its models in slice order, up to its count, while the reserved pod is pending and the policy
has ``spec.queueing.reserveAfter``. ``explain`` reads those devices as ``in_use``, with ``by``
naming the pod they are reserved for, so a "why" agrees with the record that was kept off them.
Health is taken from the devices' own verdicts where the explanation judged them (a device it did
not judge counts as healthy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from audit.explain.probe import Verdict
from audit.explain.view import ClusterView, Device
from audit.policy import Policy
from audit.records import Reason
from audit.scheduler.claimspec import result_device_id


def _pending(pod: Mapping[str, Any] | None) -> bool:
    if pod is None:
        return False
    return not (pod.get("spec") or {}).get("nodeName") and (pod.get("status") or {}).get("phase") not in (
        "Succeeded", "Failed")


def reserved_for_others(view: ClusterView, policy: Policy | None, asker: tuple[str, str],
                        devices: Sequence[Device], judged: Mapping[str, tuple[str, Verdict]]) -> dict[str, str]:
    """Device id → "<namespace>/<pod>" it is reserved for, for devices ``asker`` may not use."""
    if policy is None or policy.reserve_after_ms is None or not view.reservations:
        return {}
    taken: set[str] = set()
    for claim in view.allocated_claims():
        for res in (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or []:
            if isinstance(res, Mapping) and not res.get("adminAccess"):
                taken.add(result_device_id(res))
    out: dict[str, str] = {}
    for key, reservation in sorted(view.reservations.items()):
        if key == asker or not _pending(view.pods.get(key)):
            continue
        spec = reservation.get("spec") or {}
        node, models, count = str(spec.get("node", "")), set(spec.get("models") or ()), int(spec.get("count", 0))
        held = 0
        for d in devices:
            if held >= count:
                break
            if d.node != node or d.model not in models or d.id in taken:
                continue
            verdict = judged.get(d.id)
            if verdict is not None and verdict[1][0] == Reason.UNHEALTHY.value:
                continue
            out[d.id] = f"{key[0]}/{key[1]}"
            held += 1
    return out


def mark_reserved(judged: dict[str, tuple[str, Verdict]], reserved: Mapping[str, str], available: str) -> None:
    """Devices the explanation found ``available`` that a reservation holds become ``in_use``."""
    for dev_id, pod in reserved.items():
        found = judged.get(dev_id)
        if found is not None and found[1][0] == available:
            judged[dev_id] = (found[0], (Reason.IN_USE.value, {"by": f"reserved for pod {pod}"}))
