"""What one per-node allocation returns: the upstream-shaped result plus per-device evidence.

This is the contract between the allocator and everything above it (the decision engine,
replay, explain, the ``allocate`` command). Results are API-shaped dicts (camelCase, exactly
``status.allocation`` of resource.k8s.io/v1) so they can be compared byte for byte with what a
real cluster wrote; evidence uses the closed reason vocabulary of ``audit.records.Reason``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from audit.frozen import fast_init


class Status(StrEnum):
    SUCCESS = "success"
    UNSATISFIABLE = "unsatisfiable"  # upstream: nil, nil -> "cannot allocate all claims"
    ERROR = "error"  # upstream: a returned error (fatal for the scheduling attempt or the node)


@fast_init
@dataclass(frozen=True)
class DeviceVerdict:
    """Why one device was taken or not, with structured parameters (never parsed back from text)."""

    device: str  # "<driver>/<pool>/<device>"
    reason: str  # an audit.records.Reason value
    detail: tuple[tuple[str, str], ...] = ()

    def detail_dict(self) -> dict[str, str]:
        return dict(self.detail)


@dataclass
class TierEvidence:
    """Verdicts for one request or firstAvailable subrequest of one claim, in search order.

    Every device of the node's candidate set appears exactly once; devices the search never
    reached carry ``not_reached``.
    """

    claim: str  # "<namespace>/<name>"
    request: str  # "<request>" or "<request>/<subrequest>"
    subrequest_index: int  # 0 for a plain request
    verdicts: list[DeviceVerdict] = field(default_factory=list)


@dataclass
class ClaimAllocation:
    claim: str  # claim name (as in `claimtrail allocate -o json`)
    results: list[dict[str, Any]]  # status.allocation.devices.results items
    node_selector: dict[str, Any] | None
    config: list[dict[str, Any]]

    def to_api(self) -> dict[str, Any]:
        return {"claim": self.claim, "results": self.results, "nodeSelector": self.node_selector, "config": self.config}


@dataclass
class AllocationOutcome:
    status: Status
    allocations: list[ClaimAllocation] = field(default_factory=list)
    error_code: str = ""  # stable code for ERROR, e.g. "cel_runtime", "invalid_pools", "constraint"
    message: str = ""  # upstream text where upstream has one
    evidence: list[TierEvidence] = field(default_factory=list)
    steps: int = 0  # upstream NumAllocateOneInvocations
    chosen_subrequests: dict[str, int] = field(default_factory=dict)  # "<ns>/<claim>/<request>" -> index
