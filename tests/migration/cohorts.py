"""A seeded generator of migration cohorts: decision records per pod for one track and
template version, with chosen success, fallback and latency behaviour."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from audit.records import DecisionRecord, Outcome
from tests.builders import decision, device

START = datetime(2026, 11, 1, tzinfo=UTC)


def _iso(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def cohort_records(
    rng: random.Random,
    *,
    track: str,
    template_version: str,
    pods: int,
    success: float,
    fallback: float = 0.0,
    latency_ms: float = 4000.0,
    run_s: float = 3600.0,
    namespace: str = "team-a",
) -> tuple[list[DecisionRecord], dict[tuple[str, str, str], str]]:
    """Records for ``pods`` pods; failed pods get two unschedulable attempts. Returns the records
    and the release time of every bound pod."""
    records: list[DecisionRecord] = []
    releases: dict[tuple[str, str, str], str] = {}
    for i in range(pods):
        uid = f"{track}-{template_version}-{i:05d}"
        created = START + timedelta(seconds=rng.uniform(0, 86400))
        wait = rng.expovariate(1.0 / latency_ms)
        ok = rng.random() < success
        fell_back = ok and rng.random() < fallback
        attempts = [(Outcome.UNSCHEDULABLE.value, wait / 2)]
        attempts.append((Outcome.ALLOCATED.value if ok else Outcome.UNSCHEDULABLE.value, wait))
        for n, (outcome, w) in enumerate(attempts):
            at = created + timedelta(milliseconds=w)
            allocated = outcome == Outcome.ALLOCATED.value
            model = "A100" if fell_back else "H100"
            records.append(
                decision(
                    "canary",
                    f"claim-{uid}",
                    n,
                    sealed=False,
                    seq=n,
                    time=_iso(at),
                    tenant=namespace,
                    namespace=namespace,
                    pod=f"job-{i}",
                    pod_uid=uid,
                    claims=[f"job-{i}-gpu"],
                    preference=["H100", "A100"],
                    policy_version="observed",
                    policy_digest="",
                    outcome=outcome,
                    node="node-1" if allocated else "",
                    devices=[device("node-1", model, "gpu")] if allocated else [],
                    tier_index=(1 if fell_back else 0) if allocated else -1,
                    preferred_model="H100",
                    allocated_model=model if allocated else "",
                    fallback=fell_back,
                    wait_ms=int(w),
                    track=track,
                    template_version=template_version,
                )
            )
            if allocated:
                releases[("canary", namespace, uid)] = _iso(at + timedelta(seconds=rng.uniform(0.5, 1.5) * run_s))
    return records, releases
