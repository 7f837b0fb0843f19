"""The explanation document the API, the CLI and the dashboards share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class DeviceReason:
    device: str  # "<driver>/<pool>/<device>"
    node: str
    reason: str
    detail: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"device": self.device, "node": self.node, "reason": self.reason, "detail": dict(self.detail)}


@dataclass(frozen=True)
class Explanation:
    pod: str  # "<namespace>/<name>"
    decision_id: str
    model: str
    skipped: bool
    outcome: dict[str, Any]
    reasons: dict[str, int]
    blockers: list[dict[str, Any]]
    summary: str
    policy_version: str
    devices: list[DeviceReason] | None = None
    # What the pod would get if scheduled now (a pod holding no allocation), apart from ``outcome``.
    would_get: dict[str, Any] | None = None

    @property
    def visible(self) -> int:
        """Devices of the model visible to the claim: the reason counts add up to this."""
        return sum(self.reasons.values())

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "pod": self.pod, "decision_id": self.decision_id, "model": self.model, "skipped": self.skipped,
            "outcome": self.outcome, "reasons": dict(self.reasons), "blockers": list(self.blockers),
            "summary": self.summary, "policy_version": self.policy_version,
        }
        if self.devices is not None:
            out["devices"] = [d.to_dict() for d in self.devices]
        if self.would_get is not None:
            out["would_get"] = self.would_get
        return out
