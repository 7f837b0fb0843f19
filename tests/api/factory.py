"""Decision records for the API tests, built by hand so every number is known.

Two tenants share one cluster: team-a has a pod that fell back from H100 to A100 (quota on
H100), a pod that got its H100 and a pending pod; team-b has one H100 decision and one
fair-share deferral. Times are one hour apart from a fixed start.
"""

from __future__ import annotations

from audit.records import DecisionRecord, DeviceRef, Exemplar, TierBlocker, TierSummary
from tests.builders import decision

CLUSTER = "lab"
START_HOUR = 8


def _time(hour: int) -> str:
    return f"2026-05-01T{hour:02d}:00:00.000000Z"


def _record(n: int, tenant: str, namespace: str, pod: str, outcome: str, *, allocated: str = "", node: str = "",
            device: str = "", tier_index: int = -1, tiers: list[TierSummary] | None = None,
            blockers: list[TierBlocker] | None = None, retry_class: str = "") -> DecisionRecord:
    claim_uid = f"00000000-0000-4000-8000-{n:012d}"
    devices = [DeviceRef(device=device, node=node, model=allocated, request="gpu")] if device else []
    return decision(
        CLUSTER, claim_uid, 1, seq=100 + n, time=_time(START_HOUR + n), tenant=tenant, namespace=namespace, pod=pod,
        pod_uid=f"pod-uid-{n}", claims=[f"{pod}-gpu"], preference=["H100", "A100"], policy_version="v7",
        outcome=outcome, node=node, devices=devices, tier_index=tier_index, preferred_model="H100",
        allocated_model=allocated, fallback=bool(allocated) and allocated != "H100", tiers=tiers or [],
        blockers=blockers or [], retry_class=retry_class, engine_version="test")


def h100_tier(reasons: dict[str, int]) -> TierSummary:
    return TierSummary(index=0, request="gpu/h100", model="H100", considered=sum(reasons.values()), reasons=reasons,
                       exemplars=[Exemplar(device="gpu.nvidia.com/h100-01/gpu-1", node="h100-01", reason="unhealthy",
                                           detail={"key": "gpu.nvidia.com/unhealthy", "effect": "NoSchedule"})])


def a100_tier(reasons: dict[str, int]) -> TierSummary:
    return TierSummary(index=1, request="gpu/a100", model="A100", considered=sum(reasons.values()), reasons=reasons)


FALLBACK = _record(
    1, "team-a", "team-a", "train-1", "allocated", allocated="A100", node="a100-07",
    device="gpu.nvidia.com/a100-07/gpu-3", tier_index=1,
    tiers=[h100_tier({"in_use": 40, "unhealthy": 8, "node_filtered": 16}),
           a100_tier({"in_use": 3, "selected": 1, "not_reached": 4})],
    blockers=[TierBlocker(code="quota_exhausted", tier=0, detail={"model": "H100", "used": 8, "requested": 1,
                                                              "nominal": 8, "limit": 8})])
GOT_H100 = _record(
    2, "team-a", "team-a", "train-2", "allocated", allocated="H100", node="h100-02",
    device="gpu.nvidia.com/h100-02/gpu-0", tier_index=0,
    tiers=[h100_tier({"in_use": 10, "selected": 1, "not_reached": 53}), a100_tier({"not_reached": 8})])
PENDING = _record(
    3, "team-a", "team-a", "train-3", "unschedulable", retry_class="unschedulable",
    tiers=[h100_tier({"in_use": 60, "unhealthy": 4}), a100_tier({"in_use": 8})])
OTHER_TENANT = _record(
    4, "team-b", "team-b", "infer-9", "allocated", allocated="H100", node="h100-01",
    device="gpu.nvidia.com/h100-01/gpu-0", tier_index=0, tiers=[h100_tier({"selected": 1, "not_reached": 63})])
DEFERRED = _record(
    5, "team-b", "team-b", "infer-10", "deferred", retry_class="fair_share",
    tiers=[h100_tier({"in_use": 63, "not_reached": 1})],
    blockers=[TierBlocker(code="fair_share_deferred", tier=0,
                          detail={"tenant_share": 0.62, "other_share": 0.18, "other_tenant": "team-a"})])

RECORDS = [FALLBACK, GOT_H100, PENDING, OTHER_TENANT, DEFERRED]
