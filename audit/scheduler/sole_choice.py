"""Pods with no other choice: the ones a tenant's line can serve first.

A pending pod has *no other choice* when everything it asks for can only be devices of one model:
a device-plugin pod whose node selection admits device-plugin nodes of a single model (a pod
pinned with a nodeSelector on ``nvidia.com/gpu.product``), or a DRA pod each of whose requests has
a single alternative (a plain request, or a ``firstAvailable`` list of one) that can only match
devices of that one model. Every other pod is *flexible*: it has an alternative to fall back to,
or may use several models anyway.

With ``spec.queueing.soleChoiceFirst`` (off by default) the pods with no other choice go first in
their tenant's line (``audit.scheduler.pending``), then the flexible ones, each group in creation
order, then by pod key; a pod's place is read when it joins its queue. Capacity and quota of a
model that both want then go to the pod that can use nothing else, while the flexible pod takes
the alternative its policy allows instead of the only model the other can run on. The rule reads
the pod, its claims and the inventory only, so it is deterministic and replays with the
decisions.
"""

from __future__ import annotations

from typing import Any

from audit.scheduler.attempt import model_matcher
from audit.scheduler.claimspec import pod_claim_names
from audit.scheduler.filters import node_filter
from audit.scheduler.tiers import request_tiers, resolve_claims
from audit.world import World, device_plugin_gpus

# world.derived memo (dropped with the pod by ``adaptive.forget_pod``): pod key -> (pod object,
# claim objects, versions, (model, devices))
_MEMO = "sole_choice"


def sole_choice(world: World, pod_key: str) -> tuple[str, int]:
    """``(model, devices)``: the one model the pending pod can use and how many devices of it it
    asks for, or ``("", 0)`` when it is flexible (or its claims are not all there yet)."""
    ns, _, name = pod_key.partition("/")
    pod = world.get("Pod", ns, name)
    if pod is None:
        return "", 0
    claims = tuple(world.get("ResourceClaim", ns, c) for _, c in pod_claim_names(pod) if c)
    versions = (world.signature_version, world.inventory_version)
    memo: dict[str, Any] = world.derived.setdefault(_MEMO, {})
    hit = memo.get(pod_key)
    # objects are replaced, never changed, by events: identity says they are the same
    if (hit is None or hit[0] is not pod or hit[2] != versions or len(hit[1]) != len(claims)
            or any(a is not b for a, b in zip(hit[1], claims, strict=True))):
        if len(memo) > 50_000:
            memo.clear()
        hit = memo[pod_key] = (pod, claims, versions, _read(world, pod))
    found: tuple[str, int] = hit[3]
    return found


def has_no_other_choice(world: World, pod_key: str) -> bool:
    return sole_choice(world, pod_key)[1] > 0


def _read(world: World, pod: dict[str, Any]) -> tuple[str, int]:
    gpus = device_plugin_gpus(pod)
    if not (pod.get("spec") or {}).get("resourceClaims"):
        if gpus <= 0:
            return "", 0
        pinned = {world.dp_model.get(n, "unknown") for n in world.dp_capacity if node_filter(world, n, pod) is None}
        return (next(iter(pinned)), gpus) if len(pinned) == 1 else ("", 0)
    pc = resolve_claims(world, pod)
    if pc.missing or not pc.claims:
        return "", 0
    models: set[str] = set()
    devices = 0
    for rt in request_tiers(pc.claims, model_matcher(world)):
        if len(rt.tiers) != 1 or rt.tiers[0].all_devices:
            return "", 0
        models.update(rt.tiers[0].models)
        devices += rt.tiers[0].count
    return (next(iter(models)), devices) if len(models) == 1 and devices > 0 else ("", 0)
