"""What replaying one decision concluded: whether it matched and, when not, why.

Kept apart from ``audit.replay.verify`` so that both ways of checking a decision — re-deciding it
(``verify``) and checking an observed allocation against the allocator (``observed``) — return
the same result type without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from audit.records import DecisionRecord


class Cause(StrEnum):
    INPUT_MISMATCH = "input_mismatch"
    OUTPUT_MISMATCH = "output_mismatch"
    ENGINE_CHANGED = "engine_changed"  # the output differs and the record names another engine version
    MISSING_EVENTS = "missing_events"
    CHECKPOINT_CORRUPT = "checkpoint_corrupt"


@dataclass
class ReplayResult:
    decision_id: str
    engine_version: str  # of the engine that replayed
    policy_digest: str  # the record's
    match: bool
    cause: str = ""
    diff: list[str] = field(default_factory=list)
    observed: bool = False  # an observed decision: match means our allocator agrees
    replayed: DecisionRecord | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"decision_id": self.decision_id, "engine_version": self.engine_version,
                "policy_digest": self.policy_digest, "match": self.match, "cause": self.cause,
                "diff": list(self.diff), "observed": self.observed}
