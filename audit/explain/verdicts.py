"""What a device's reason is when the decision itself says more than the device's own checks.

Two readings of a device are the decision's, not the device's, and both views of ``why`` give
them alike (the answer from the record's evidence, ``audit.explain.record``, and the per-device
answer over the rebuilt world, ``audit.explain.core``):

- a device the pod got is ``selected``: its checks passed, and "available" would not say that the
  pod holds it;
- a tier the policy closed before any device was looked at (the tenant's quota, a fair-share
  deferral) gives every device of it the closing code, as the decision engine records it
  (``audit.scheduler.evidence``): the quota, not the devices, is why none was taken. The
  per-device answer keeps what the device's own checks found in its detail as ``verdict`` (in
  use, available …), evidence beside the reason rather than a second reason.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from audit.explain.probe import Verdict
from audit.explain.record import model_tier
from audit.records import Blocker, DecisionRecord, Reason

# Codes the engine gives every device of a tier its policy closed (audit.scheduler.engine).
CLOSING_CODES = frozenset({Reason.QUOTA_EXHAUSTED.value, Reason.FAIR_SHARE_DEFERRED.value})


def mark_selected(judged: MutableMapping[str, tuple[str, Verdict]], outcome: Mapping[str, Any]) -> None:
    """The devices of an allocated outcome read ``selected`` (only those ``judged`` holds)."""
    if outcome.get("result") != "allocated":
        return
    for dev in outcome.get("devices") or []:
        if dev in judged:
            judged[dev] = (judged[dev][0], (Reason.SELECTED.value, {}))


def closing_code(record: DecisionRecord | None, model: str, blockers: Sequence[Mapping[str, Any]],
                 tier: int | None) -> str | None:
    """The code that closed the tier asking for ``model``, or None when it was open.

    With a record, the record says it: its tier for the model counts every device under one
    closing code. Without one (a cluster dump), a skipped tier (``tier``) is closed when the
    tenant's quota, judged now, cannot take it: the engine would close it so."""
    if record is not None:
        found = model_tier(record, model)
        codes = {code for code, n in (found.reasons if found else {}).items() if n}
        return next(iter(codes)) if len(codes) == 1 and codes <= CLOSING_CODES else None
    if tier is not None and any(b.get("code") == Blocker.QUOTA_EXHAUSTED.value and b.get("tier") == tier
                                for b in blockers):
        return Reason.QUOTA_EXHAUSTED.value
    return None


def close_tier(judged: MutableMapping[str, tuple[str, Verdict]], closing: str) -> dict[str, int]:
    """Give every judged device the closing code, its own verdict kept as ``verdict`` in its
    detail; the reason counts after that."""
    for dev, (node, (reason, detail)) in judged.items():
        judged[dev] = (node, (closing, {"verdict": reason, **detail}))
    return {closing: len(judged)} if judged else {}

