"""Checkpoints are stored as their canonical text and read back unparsed for byte-wise verification."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from audit.replay import CheckpointCorrupt, StoreHistory, WorldCursor, checkpoint_body
from audit.replay.checkpoints import checkpoint_text, load_checkpoint_text
from audit.store.queries import AuditStore
from audit.world import World
from tests.replay.runs import busy

SEQ = 299


def _world() -> World:
    world = World("busy")
    for ev in busy(2.0).events[: SEQ + 1]:
        world.apply(ev)
    return world


def _labelled_body(world: World) -> dict:
    """A body with non-ASCII text in one object, so an ASCII-escaping writer would differ."""
    # a copy: the snapshot shares object payloads with the world, and through it with the cached run's events
    body = copy.deepcopy(checkpoint_body(world))
    name = sorted(body["objects"]["Node"])[0]
    body["objects"]["Node"][name]["metadata"]["labels"] = {"site": "Zürich"}
    snap = {k: v for k, v in body.items() if k != "content_digest"}
    body["content_digest"] = hashlib.sha256(checkpoint_text(snap).encode()).hexdigest()
    return body


def test_a_written_checkpoint_reads_back_as_its_canonical_text_and_rebuilds_the_same_world(store: AuditStore):
    world = _world()
    body = _labelled_body(world)
    store.write_checkpoint("busy", SEQ, body)
    seq, text = store.nearest_checkpoint_text("busy", SEQ + 50)
    assert (seq, text) == (SEQ, checkpoint_text(body))
    assert '"site":"Zürich"' in text  # not escaped: the bytes hashed are the canonical ones
    assert store.nearest_checkpoint("busy", SEQ + 50) == (SEQ, json.loads(text))
    loaded = load_checkpoint_text("busy", SEQ, text)
    assert loaded.snapshot() == {k: v for k, v in body.items() if k != "content_digest"}
    assert loaded.chain_digest == world.chain_digest
    assert store.nearest_checkpoint_text("busy", SEQ - 1) is None


def test_the_replay_cursor_reads_store_checkpoints_as_text_and_refuses_a_damaged_one(store: AuditStore):
    world = _world()
    body = checkpoint_body(world)
    store.write_checkpoint("busy", SEQ, body)
    cursor = WorldCursor(StoreHistory(store), "busy")
    assert cursor.at(SEQ).snapshot() == world.snapshot()
    assert cursor.loads == 1 and cursor.folds == 0
    damaged = {**body, "usage": {t: [u[0] + 1, u[1], u[2]] for t, u in body["usage"].items()}}
    store.write_checkpoint("busy", SEQ, damaged)  # a rewrite reads as the last write
    with pytest.raises(CheckpointCorrupt) as exc:
        WorldCursor(StoreHistory(store), "busy").at(SEQ)
    assert str(exc.value).startswith(f"checkpoint busy@{SEQ}: content_digest: recorded {body['content_digest']}, "
                                     "content hashes to ")
