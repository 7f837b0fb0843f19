"""Decision records for pods placed in chosen strata (model × tenant × hour), one bound or
unschedulable attempt each, so a stratified comparison can be worked out by hand."""

from __future__ import annotations

from dataclasses import dataclass

from audit.records import DecisionRecord, Outcome
from tests.builders import decision, device

CLUSTER = "canary"
DAY = "2026-11-02"


@dataclass(frozen=True)
class Pod:
    track: str  # "dra" or "device-plugin"
    model: str  # the GPU model of the stratum
    tenant: str
    hour: int  # hour of DAY (UTC) the pod was created in
    wait_ms: int
    bound: bool = True


def records(pods: list[Pod], template_version: str = "v2") -> list[DecisionRecord]:
    """One record per pod. A DRA pod prefers its model; a device-plugin pod names none (it asks
    for `nvidia.com/gpu`) and gets the model, as the device plugin's node pool decides."""
    out = []
    for i, p in enumerate(pods):
        dra = p.track == "dra"
        uid = f"pod-uid-{i:04d}"
        claim_uid = f"00000000-0000-4000-9000-{i:012d}"
        node = f"{p.model.lower()}-node-{i % 4}"
        out.append(decision(
            CLUSTER, claim_uid, 1, seq=i + 1, time=f"{DAY}T{p.hour:02d}:{(i * 7) % 60:02d}:00.000000Z", tenant=p.tenant,
            namespace=p.tenant, pod=f"job-{i}", pod_uid=uid, claims=[f"job-{i}-gpu"] if dra else [],
            claim_uids=[claim_uid] if dra else [], preference=[p.model] if dra else [], policy_version="observed",
            policy_digest="", outcome=Outcome.ALLOCATED.value if p.bound else Outcome.UNSCHEDULABLE.value,
            node=node if p.bound else "",
            devices=[device(node, p.model, "gpu")] if p.bound else [],
            tier_index=0 if p.bound else -1, preferred_model=p.model if dra else "",
            allocated_model=p.model if p.bound else "", wait_ms=p.wait_ms, track=p.track,
            template_version=template_version if dra else "", engine_version="test"))
    return out


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
