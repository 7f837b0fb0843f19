"""Deterministic replay: rebuild a decision's inputs at its seq, re-execute, compare digests.

``verify`` replays recorded decisions (input fidelity first, then determinism) and explains any
mismatch with a structural diff; ``checkpoints`` writes and verifies world checkpoints so one
replay folds at most one interval of events; ``source`` reads history (the store or lists);
``observed`` checks decisions seen on a real cluster for device agreement; ``counterfactual``
re-runs a window under another policy. Pure: the history comes in through a ``ReplaySource``.
"""

from __future__ import annotations

from typing import Any

from audit.replay.checkpoints import CheckpointCorrupt, CheckpointWriter, checkpoint_body, load_checkpoint
from audit.replay.source import MemorySource, MissingEvents, ReplaySource, StoreHistory, WorldCursor
from audit.replay.verify import Cause, ReplayResult, Verifier, replay_records


def replay_decisions(store: Any, decision_ids: list[str]) -> list[dict[str, Any]]:
    """Replay stored decisions by id (the API's entry point); ``store`` is an ``AuditStore``."""
    source = StoreHistory(store)
    records = []
    missing: list[dict[str, Any]] = []
    for decision in decision_ids:
        rec = store.get_decision(decision, None)
        if rec is None:
            missing.append({"decision_id": decision, "match": False, "cause": Cause.MISSING_EVENTS.value,
                            "diff": [f"decision {decision}: not found"]})
        else:
            records.append(rec)
    return [r.to_dict() for r in Verifier(source).run(records)] + missing


__all__ = [
    "Cause",
    "CheckpointCorrupt",
    "CheckpointWriter",
    "MemorySource",
    "MissingEvents",
    "ReplayResult",
    "ReplaySource",
    "StoreHistory",
    "Verifier",
    "WorldCursor",
    "checkpoint_body",
    "load_checkpoint",
    "replay_decisions",
    "replay_records",
]
