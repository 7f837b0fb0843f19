"""The one builder of decision records for tests.

``decision`` makes a record from the fields a test cares about: the decision id is derived from
(cluster, claim uid, attempt) as the engine derives it, the claim uids default to that one claim,
every other field the record requires has a plain default, and the record is sealed (its output
digest set) unless the test needs it raw. ``device`` and ``tier`` build the parts most records
carry. The scenario modules (``tests/store/factory.py``, ``tests/api/factory.py``, the dashboards'
and the migration tests' own) choose the values; only this module knows how a record is put together.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from audit.records import DecisionRecord, DeviceRef, Exemplar, TierSummary, decision_id

DEFAULTS: dict[str, Any] = {
    "seq": 0, "time": "2026-05-01T08:00:00Z", "tenant": "team-a", "pod": "train-0", "claims": [],
    "preference": ["H100"], "policy_version": "v1", "policy_digest": "d" * 64, "outcome": "unschedulable",
}


def decision(cluster: str = "lab", claim_uid: str = "claim-0", attempt: int = 0, *, sealed: bool = True,
             **fields: Any) -> DecisionRecord:
    """A record of ``cluster`` for the claim ``claim_uid`` at ``attempt``; ``fields`` set the rest
    (``namespace`` defaults to the tenant, ``pod_uid`` to ``uid-<pod>``)."""
    values = {**DEFAULTS, **fields}
    values.setdefault("decision_id", decision_id(cluster, claim_uid, attempt))
    values.setdefault("claim_uids", [claim_uid])
    values.setdefault("namespace", values["tenant"])
    values.setdefault("pod_uid", f"uid-{values['pod']}")
    record = DecisionRecord(cluster=cluster, attempt=attempt, **values)
    return record.seal() if sealed else record


def device(node: str, model: str, request: str, gpu: int | str = 0, driver: str = "gpu.nvidia.com") -> DeviceRef:
    """Device ``gpu-<gpu>`` of ``node``'s pool, as the allocator names it (``driver/pool/device``)."""
    return DeviceRef(device=f"{driver}/{node}/gpu-{gpu}", node=node, model=model, request=request)


def tier(index: int, model: str, reasons: dict[str, int], request: str, *, considered: int | None = None,
         exemplars: Sequence[Exemplar] = (), nodes_evaluated: int = 0) -> TierSummary:
    """A preference tier's evidence; ``considered`` defaults to the devices the reasons count."""
    return TierSummary(index=index, request=request, model=model,
                       considered=sum(reasons.values()) if considered is None else considered,
                       reasons=dict(reasons), exemplars=list(exemplars), nodes_evaluated=nodes_evaluated)
