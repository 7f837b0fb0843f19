"""Deterministic replay: rebuild a decision's inputs at its seq, re-execute, compare digests.

``verify`` replays recorded decisions (input fidelity first, then determinism) and explains any
mismatch with a structural diff; ``checkpoints`` writes and verifies world checkpoints so one
replay folds at most one interval of events; ``source`` reads history (the store or lists);
``observed`` checks decisions seen on a real cluster for device agreement; ``counterfactual``
re-runs a window under another policy; ``service`` holds the use cases the CLI and the API call
(verify by id, verify in steps, the counterfactual of a window, a policy by version). Pure: the
history comes in through a ``ReplaySource``.
"""

from __future__ import annotations

from audit.replay.checkpoints import CheckpointCorrupt, CheckpointWriter, checkpoint_body, load_checkpoint
from audit.replay.source import MemorySource, MissingEvents, ReplaySource, StoreHistory, WorldCursor
from audit.replay.verify import Cause, ReplayResult, Verifier, replay_records

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
    "replay_records",
]
