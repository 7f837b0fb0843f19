"""The counterfactual run's answer as a table a person reads: one row per pod attempt.

``POST /v1/replay`` with ``counterfactual_policy`` pairs each recorded decision with the one the
other policy makes (``recorded`` and ``counterfactual``: outcome, model, node, devices); this
turns each side into a short phrase ("A100 on node-7 (4 devices)", "pending") instead of the
nested JSON.
"""

from __future__ import annotations

from typing import Any


def side_text(side: dict[str, Any] | None) -> str:
    """One decision's result in words; ``None`` means the other policy made no decision for it."""
    if not side:
        return "no decision"
    model, node = side.get("allocated_model") or "", side.get("node") or ""
    if not model:
        return str(side.get("outcome") or "–")
    devices = side.get("devices") or []
    where = f" on {node}" if node else ""
    count = f" ({len(devices)} device{'s' if len(devices) != 1 else ''})" if devices else ""
    return f"{model}{where}{count}"


def counterfactual_rows(runs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """Changed decisions first, then by pod and attempt."""
    rows = [{"pod": str(r.get("pod", "")), "attempt": str(r.get("attempt", "")),
             "recorded": side_text(r.get("recorded")), "under the other policy": side_text(r.get("counterfactual")),
             "changed": "yes" if r.get("match") is False else "no"} for r in runs]
    return sorted(rows, key=lambda row: (row["changed"] != "yes", row["pod"], row["attempt"].zfill(6)))
