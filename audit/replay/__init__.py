"""Deterministic replay: rebuild a decision's inputs at its seq, re-execute, compare digests.

``verify`` replays recorded decisions (input fidelity first, then determinism) and explains any
mismatch with a structural diff; ``checkpoints`` writes and verifies world checkpoints so one
replay folds at most one interval of events; ``source`` reads history (the store or lists);
``observed`` checks decisions seen on a real cluster for device agreement; ``counterfactual``
re-runs a window under another policy. Pure: the history comes in through a ``ReplaySource``.
"""

from __future__ import annotations

from typing import Any

from audit.replay.batch import replay_in_steps
from audit.replay.checkpoints import CheckpointCorrupt, CheckpointWriter, checkpoint_body, load_checkpoint
from audit.replay.source import MemorySource, MissingEvents, ReplaySource, StoreHistory, WorldCursor
from audit.replay.verify import Cause, ReplayResult, Verifier, replay_records

FEW = 32  # up to this many decisions, one query each for their events costs less than a pass over the history


def replay_decisions(store: Any, decision_ids: list[str]) -> list[dict[str, Any]]:
    """Replay stored decisions by id (the API's entry point); ``store`` is an ``AuditStore``.

    The records are read in batches; an id given twice is replayed once. A few decisions are
    replayed against the store directly (its checkpoints and the digests of its stored event
    texts, one events query per decision); more with one read of each stretch of their history
    (``audit.replay.batch``)."""
    wanted = list(dict.fromkeys(decision_ids))
    found = store.get_decisions(wanted, None)
    missing = [{"decision_id": d, "match": False, "cause": Cause.MISSING_EVENTS.value,
                "diff": [f"decision {d}: not found"]} for d in wanted if d not in found]
    records = [found[d] for d in wanted if d in found]
    if len(records) <= FEW:
        results = list(Verifier(StoreHistory(store)).run(records))
    else:
        results = [r for step in replay_in_steps(StoreHistory(store), records, len(records)) for r in step]
    return [r.to_dict() for r in results] + missing


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
