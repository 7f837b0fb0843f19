"""Small deterministic factory of decision records and world events for store tests and benches."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

from audit.events import WorldEvent
from audit.records import DecisionRecord, Exemplar
from tests.builders import decision, device, tier

BASE_TIME = datetime(2026, 11, 1, 0, 0, tzinfo=UTC)
TENANTS = ("acme", "globex", "initech", "umbrella")
MODELS = ("H100", "A100", "L4")


def iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def make_record(i: int, *, cluster: str = "c1", tenant: str | None = None, pod: str | None = None,
                attempt: int = 0, seconds_apart: float = 1.0, namespace: str | None = None) -> DecisionRecord:
    """Record number ``i``: tenants rotate, every third decision falls back from H100 to A100,
    every seventh is unschedulable; fields vary with ``i`` so rows are distinct."""
    tenant = tenant if tenant is not None else TENANTS[i % len(TENANTS)]
    namespace = namespace if namespace is not None else f"{tenant}-ml"
    pod = pod if pod is not None else f"train-{i}"
    claim_uid = f"uid-{cluster}-{i}"
    unschedulable = i % 7 == 6
    fallback = not unschedulable and i % 3 == 1
    tier_index = 1 if fallback else 0
    model = "" if unschedulable else MODELS[tier_index]
    node = "" if unschedulable else f"node-{i % 50}"
    tiers = [
        tier(0, "H100", {"in_use": 6, "unhealthy": 2} if (fallback or unschedulable) else
             {"selected": 1, "in_use": 5, "not_reached": 2}, "gpu/h100", considered=8,
             exemplars=[Exemplar(device=f"gpu.nvidia.com/{node or 'node-0'}/gpu-{i % 8}", node=node or "node-0",
                                 reason="unhealthy" if fallback else "in_use", detail={"taint": "gpu/unhealthy"})],
             nodes_evaluated=3),
    ]
    if fallback or unschedulable:
        tiers.append(tier(1, "A100", {"selected": 1, "in_use": 3} if fallback else {"in_use": 4}, "gpu/a100",
                          considered=4, nodes_evaluated=2))
    return decision(
        cluster, claim_uid, attempt, seq=10 + i, time=iso(BASE_TIME + timedelta(seconds=i * seconds_apart)),
        tenant=tenant, namespace=namespace, pod=pod, pod_uid=f"pod-uid-{cluster}-{i}", claims=["gpu"],
        preference=["H100", "A100"], outcome="unschedulable" if unschedulable else "allocated", node=node,
        devices=[] if unschedulable else [device(node, model, f"gpu/{model.lower()}", i % 8)],
        tier_index=-1 if unschedulable else tier_index, preferred_model="H100", allocated_model=model,
        fallback=fallback, tiers=tiers, retry_class="unschedulable" if unschedulable else "",
        backoff_ms=1000 if unschedulable else 0, wait_ms=(i * 37) % 5000, steps=3 + i % 5, duration_us=100 + i % 900,
        template_version="t1" if i % 2 else "t2", engine_version="0.1.0",
        input_digest=hashlib.sha256(f"inputs {cluster} {i}".encode()).hexdigest())


def make_records(n: int, start: int = 0, **kw: object) -> list[DecisionRecord]:
    return [make_record(i, **kw) for i in range(start, start + n)]  # type: ignore[arg-type]


def make_event(seq: int, cluster: str = "c1") -> WorldEvent:
    return WorldEvent(cluster=cluster, seq=seq, time=iso(BASE_TIME + timedelta(seconds=seq)), type="upsert",
                      object_kind="ResourceSlice", namespace="", name=f"node-{seq % 5}-gpus",
                      payload={"spec": {"driver": "gpu.nvidia.com", "pool": {"name": f"node-{seq % 5}",
                                                                             "generation": seq}}},
                      resource_version=str(1000 + seq))
