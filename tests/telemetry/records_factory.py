"""Decision records for telemetry and OTLP tests, built the way the engine fills them."""

from __future__ import annotations

from typing import Any

from audit.records import DecisionRecord, DeviceRef, Exemplar, Outcome, TierBlocker, TierSummary
from tests.builders import decision

POD = "trainer-7f9c4"
NAMESPACE = "team-vision"
TENANT = "vision"


def make_record(attempt: int = 0, **overrides: Any) -> DecisionRecord:
    """A fallback decision: H100 tier blocked (in use / unhealthy), A100 tier allocated."""
    cluster = overrides.pop("cluster", "gpu-east")
    claim_uid = overrides.pop("claim_uid", "5c1d2e3f-0000-4000-8000-00000000c1a1")
    fields: dict[str, Any] = dict(
        seq=1042 + attempt,
        time="2026-03-14T09:26:53.589793+00:00",
        tenant=TENANT,
        namespace=NAMESPACE,
        pod=POD,
        pod_uid="0a1b2c3d-0000-4000-8000-0000000000aa",
        claims=[f"{NAMESPACE}/{POD}-gpu"],
        preference=["h100", "a100"],
        policy_version="2026-03-01",
        policy_digest="a" * 64,
        outcome=Outcome.ALLOCATED.value,
        node="node-a7",
        devices=[DeviceRef("gpu.nvidia.com/node-a7/gpu-3", "node-a7", "A100", "gpu/a100")],
        tier_index=1,
        preferred_model="H100",
        allocated_model="A100",
        fallback=True,
        tiers=[
            TierSummary(
                index=0,
                request="gpu/h100",
                model="H100",
                considered=8,
                reasons={"in_use": 6, "unhealthy": 2},
                exemplars=[
                    Exemplar("gpu.nvidia.com/node-h1/gpu-0", "node-h1", "in_use", {"claim": f"{NAMESPACE}/{POD}-old"}),
                    Exemplar("gpu.nvidia.com/node-h1/gpu-1", "node-h1", "unhealthy", {"taint": "gpu.nvidia.com/unhealthy"}),
                ],
                nodes_evaluated=2,
            ),
            TierSummary(
                index=1,
                request="gpu/a100",
                model="A100",
                considered=4,
                reasons={"selected": 1, "not_reached": 3},
                exemplars=[Exemplar("gpu.nvidia.com/node-a7/gpu-3", "node-a7", "selected")],
                nodes_evaluated=1,
            ),
        ],
        blockers=[TierBlocker("insufficient_on_node", 0, {"free": 0})],
        wait_ms=1500,
        steps=17,
        duration_us=420,
        template_version="v3",
        message=f"pod {NAMESPACE}/{POD} allocated A100 after H100 was unavailable",
        engine_version="0.1.0",
        input_digest="b" * 64,
    )
    fields.update(overrides)
    return decision(cluster, claim_uid, attempt, **fields)
