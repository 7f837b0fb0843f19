"""Decision records for pods placed in chosen strata (model asked for × tenant × hour), one bound or
unschedulable attempt each, so a stratified comparison can be worked out by hand; and the world
events from which the model each device-plugin pod asked for is read (its record names none)."""

from __future__ import annotations

from dataclasses import dataclass

from audit.events import WorldEvent
from audit.records import DecisionRecord, Outcome
from tests.builders import decision, device
from tests.migration import asks

CLUSTER = "canary"
DAY = "2026-11-02"


@dataclass(frozen=True)
class Pod:
    track: str  # "dra" or "device-plugin"
    model: str  # the GPU model the pod asked for: its stratum
    tenant: str
    hour: int  # hour of DAY (UTC) the pod was created in
    wait_ms: int
    bound: bool = True
    got: str = ""  # the model it got, when not the one it asked for
    pinned: bool = True  # a device-plugin pod: pins ``model`` with a nodeSelector (else takes any GPU)


def records(pods: list[Pod], template_version: str = "v2") -> list[DecisionRecord]:
    """One record per pod. A DRA pod prefers its model; a device-plugin pod's record names none (it
    asks for `nvidia.com/gpu`, pinning the model with a nodeSelector, ``world_events``). Each gets
    ``got`` when set, else the model it asked for."""
    out = []
    for i, p in enumerate(pods):
        dra = p.track == "dra"
        uid = f"pod-uid-{i:04d}"
        claim_uid = f"00000000-0000-4000-9000-{i:012d}"
        got = p.got or p.model
        node = f"{got.lower()}-node-{i % 4}"
        out.append(decision(
            CLUSTER, claim_uid, 1, seq=i + 1, time=f"{DAY}T{p.hour:02d}:{(i * 7) % 60:02d}:00.000000Z", tenant=p.tenant,
            namespace=p.tenant, pod=f"job-{i}", pod_uid=uid, claims=[f"job-{i}-gpu"] if dra else [],
            claim_uids=[claim_uid] if dra else [], preference=[p.model] if dra else [], policy_version="observed",
            policy_digest="", outcome=Outcome.ALLOCATED.value if p.bound else Outcome.UNSCHEDULABLE.value,
            node=node if p.bound else "",
            devices=[device(node, got, "gpu")] if p.bound else [],
            tier_index=0 if p.bound else -1, preferred_model=p.model if dra else "",
            allocated_model=got if p.bound else "", wait_ms=p.wait_ms, track=p.track,
            template_version=template_version if dra else "", engine_version="test"))
    return out


DP_NODE_MODELS = ("H100", "L4")  # the device plugin's node pools: an unpinned pod may get either


def world_events(pods: list[Pod]) -> list[WorldEvent]:
    """The device-plugin nodes and pods the lifecycle fold reads what each device-plugin pod asked for from."""
    return asks.world_events(records(pods), _pinned(pods), DP_NODE_MODELS)


def asked(pods: list[Pod]) -> dict[tuple[str, str, str], str]:
    """What the device-plugin pods asked for, folded from ``world_events``."""
    return asks.asked(records(pods), _pinned(pods), DP_NODE_MODELS)


def _pinned(pods: list[Pod]) -> dict[tuple[str, str], str]:
    return {(p.tenant, f"job-{i}"): p.model if p.pinned else ""
            for i, p in enumerate(pods) if p.track == "device-plugin"}


def pods(track: str, model: str, tenant: str, hour: int, waits: list[int], bound: bool = True) -> list[Pod]:
    return [Pod(track, model, tenant, hour, w, bound) for w in waits]


# The demo's confound in small: the device plugin mostly serves the uncontended L4 stratum, DRA
# mostly the contended H100 one, yet inside each stratum both tracks wait exactly alike.
CONFOUNDED = (
    pods("device-plugin", "L4", "team-a", 9, [800, 1200] * 3)
    + pods("dra", "L4", "team-a", 9, [800, 1200])
    + pods("device-plugin", "H100", "team-a", 9, [119_000, 121_000])
    + pods("dra", "H100", "team-a", 9, [119_000, 121_000] * 3)
)
# the same, with strata of one cohort only: their pods are unmatched (1 device-plugin, 3 DRA)
ONE_SIDED_STRATA = (
    CONFOUNDED
    + pods("dra", "A100", "team-b", 10, [3000, 4000, 5000])  # no device-plugin pod wants an A100 for team-b
    + pods("device-plugin", "L4", "team-a", 11, [900])  # nor does a DRA pod run at 11:00
)
