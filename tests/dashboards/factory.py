"""A small, fully deterministic world and set of decisions the dashboard tests seed the API with.

Ten decisions of two tenants over three hours (08:00–10:59 UTC on 2026-03-01), two policy
versions and both tracks, chosen so every figure a page shows can be worked out by hand:
7 allocated (4 first choice, 3 fallbacks: H100→A100 twice, H100→L40S once), 2 pending, 1 error.
The world events are the kubectl dump in ``fixtures/cluster.yaml``, one upsert per object before
the first decision, so decision 1 (team-alpha/train-01, H100 → A100) can be explained per device.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from audit.canonical import digest
from audit.events import WorldEvent
from audit.records import DecisionRecord, Exemplar, TierSummary
from tests.builders import decision, device, tier

CLUSTER = "lab"
WORLD_SEQ = 16  # the last world event (17 objects in fixtures/cluster.yaml at seq 0..16): every decision sees them all
DAY = "2026-03-01"
MODELS_BY_PREFERENCE = {"H100": ["H100", "A100", "L40S"], "A100": ["A100", "L40S"]}


@dataclass(frozen=True)
class Spec:
    tenant: str
    minute: str  # "HH:MM" on DAY
    preferred: str
    allocated: str  # "" when nothing was allocated
    outcome: str = "allocated"
    wait_ms: int = 0
    retry_class: str = ""
    policy: str = "v1"
    track: str = "dra"
    template: str = "t1"


SPECS = [
    Spec("alpha", "08:05", "H100", "H100", wait_ms=1000),
    Spec("alpha", "08:20", "H100", "A100", wait_ms=2000),
    Spec("alpha", "09:10", "H100", "A100", wait_ms=3000, track="device-plugin", template=""),
    Spec("alpha", "09:40", "H100", "", "unschedulable", wait_ms=9000, retry_class="unschedulable", policy="v2"),
    Spec("alpha", "10:15", "A100", "A100", wait_ms=500, policy="v2", template="t2"),
    Spec("beta", "08:10", "H100", "H100", wait_ms=4000),
    Spec("beta", "09:05", "H100", "L40S", wait_ms=6000, policy="v2", template="t2"),
    Spec("beta", "09:30", "H100", "", "unschedulable", wait_ms=7000, retry_class="binding_conflict", policy="v2"),
    Spec("beta", "10:00", "H100", "H100", wait_ms=1500, policy="v2", track="device-plugin", template=""),
    Spec("beta", "10:45", "H100", "", "error", wait_ms=8000, retry_class="terminal", policy="v2"),
]

# Per-tier evidence, matching fixtures/cluster.yaml: a skipped tier is 4 in use + 2 unhealthy of 6.
SKIPPED = {"in_use": 4, "unhealthy": 2}
CHOSEN = {"selected": 1, "in_use": 1, "not_reached": 4}
UNREACHED = {"not_reached": 6}


def pod_name(index: int) -> str:
    return f"train-{index:02d}"


def _tier(index: int, model: str, reasons: dict[str, int], pod: int) -> TierSummary:
    exemplars = [
        Exemplar(device=f"gpu.nvidia.com/{model.lower()}-node-{k}/gpu-{k}", node=f"{model.lower()}-node-{k}", reason=code)
        for k, code in enumerate(sorted(reasons))
    ]
    return tier(index, model, reasons, f"gpu-{model.lower()}", exemplars=exemplars, nodes_evaluated=2 + pod % 2)


def build(i: int, spec: Spec) -> DecisionRecord:
    preference = MODELS_BY_PREFERENCE[spec.preferred]
    chosen_tier = preference.index(spec.allocated) if spec.allocated else -1
    tiers = []
    for t, model in enumerate(preference):
        if chosen_tier == -1 or t < chosen_tier:
            reasons = SKIPPED
        elif t == chosen_tier:
            reasons = CHOSEN
        else:
            reasons = UNREACHED
        tiers.append(_tier(t, model, reasons, i))
    claim_uid = f"uid-claim-{i:02d}"
    node = f"{spec.allocated.lower()}-node-0" if spec.allocated else ""
    devices = [device(node, spec.allocated, f"gpu-{spec.allocated.lower()}")] if spec.allocated else []
    return decision(
        CLUSTER,
        claim_uid,
        1,
        seq=WORLD_SEQ,
        time=f"{DAY}T{spec.minute}:00Z",
        tenant=spec.tenant,
        namespace=f"team-{spec.tenant}",
        pod=pod_name(i),
        pod_uid=f"uid-pod-{i:02d}",
        claims=[f"{pod_name(i)}-gpu"],
        preference=preference,
        policy_version=spec.policy,
        policy_digest=digest({"policy": spec.policy}),
        outcome=spec.outcome,
        node=node,
        devices=devices,
        tier_index=chosen_tier,
        preferred_model=spec.preferred,
        allocated_model=spec.allocated,
        fallback=bool(spec.allocated) and spec.allocated != spec.preferred,
        tiers=tiers,
        retry_class=spec.retry_class,
        wait_ms=spec.wait_ms,
        steps=10 + i,
        track=spec.track,
        template_version=spec.template,
        engine_version="test",
        input_digest=digest({"claim": claim_uid, "seq": WORLD_SEQ}),
    )


def records() -> list[DecisionRecord]:
    return [build(i, spec) for i, spec in enumerate(SPECS)]


CLUSTER_DUMP = Path(__file__).resolve().parent / "fixtures" / "cluster.yaml"


def world_events() -> list[WorldEvent]:
    """One upsert per object of the dump, in file order, at seq 0..N-1 (all before the decisions)."""
    items = yaml.safe_load(CLUSTER_DUMP.read_text())["items"]
    return [
        WorldEvent(cluster=CLUSTER, seq=i, time=f"{DAY}T08:00:00Z", type="upsert", object_kind=obj["kind"],
                   namespace=obj["metadata"].get("namespace", ""), name=obj["metadata"]["name"], payload=obj)
        for i, obj in enumerate(items)
    ]
