"""Replay from a real embedded chDB store chains the digests of the events' stored texts.

The history is written as the writer writes it (canonical JSON bodies) with checkpoints from a
``CheckpointWriter``; the world the store path folds must carry the same chain digest as the
in-memory path, which digests each event's content. An edited stored body must still be an
input mismatch, and a body whose content is intact but whose bytes are not canonical must not be.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest

from audit.events import WorldEvent
from audit.records import DecisionRecord
from audit.replay import Cause, CheckpointWriter, MemorySource, StoreHistory, Verifier, WorldCursor
from audit.replay.verify import bind_seq
from audit.store import rows
from audit.store.queries import AuditStore
from audit.world import World
from tests.replay.runs import busy

HOURS = 2.0
EVERY = 1000


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[AuditStore]:
    events = busy(HOURS).events
    s = AuditStore.open(f"chdb://{tmp_path_factory.mktemp('store')}/db")
    writer = s.writer(background=False)
    writer.write_events(events)
    assert writer.flush()
    writer.close()
    CheckpointWriter(s.write_checkpoint, EVERY).fold(events)
    try:
        yield s
    finally:
        s.close()


def _fresh_fold(events: list[WorldEvent], seq: int) -> World:
    world = World(events[0].cluster)
    for ev in events[: seq + 1]:
        world.apply(ev)
    return world


@pytest.mark.parametrize("seq", [0, EVERY - 1, EVERY, 2 * EVERY + 517, None],
                         ids=["first-event", "at-a-checkpoint", "just-after-one", "mid-interval", "last-event"])
def test_the_store_and_memory_paths_chain_the_same_digest(store, seq):
    events = busy(HOURS).events
    seq = events[-1].seq if seq is None else seq
    cluster = events[0].cluster
    expected = _fresh_fold(events, seq).chain_digest
    memory = WorldCursor(MemorySource(events), cluster)
    from_store, via_history = WorldCursor(store, cluster), WorldCursor(StoreHistory(store), cluster)
    assert memory.at(seq).chain_digest == expected
    assert from_store.at(seq).chain_digest == expected
    assert via_history.at(seq).chain_digest == expected
    assert from_store.stored_digests and via_history.stored_digests  # no fallback to content digests
    assert from_store.world is not None and from_store.world.snapshot() == memory.at(seq).snapshot()


def test_decisions_replay_from_the_store_on_the_stored_texts_digests(store):
    records = busy(HOURS).records[::7][:150]
    verifier = Verifier(store)
    results = list(verifier.run(records))
    assert [r.match for r in results] == [True] * len(records)
    assert verifier.cursor(records[0].cluster).stored_digests


def _edit_body(store: AuditStore, ev: WorldEvent, body: str) -> None:
    store.client.command(
        "ALTER TABLE events UPDATE body = {b:String} WHERE cluster = {c:String} AND seq = {s:UInt64}",
        parameters={"b": body, "c": ev.cluster, "s": ev.seq}, settings={"mutations_sync": 2})


def _labelled(ev: WorldEvent) -> str:
    """The event with one label added, encoded canonically (as the writer would have)."""
    meta = {**ev.payload.get("metadata", {}), "labels": {**ev.payload.get("metadata", {}).get("labels", {}),
                                                         "edited": "yes"}}
    return rows.event_json(WorldEvent(**{**ev.to_dict(), "payload": {**ev.payload, "metadata": meta}}))


def _reencoded(ev: WorldEvent) -> str:
    """The same content, in bytes that are not canonical: indented, ASCII-escaped, keys unsorted."""
    return json.dumps(dict(reversed(list(ev.to_dict().items()))), indent=1, ensure_ascii=True)


@pytest.mark.parametrize("edit, cause, content_digests", [
    (_labelled, Cause.INPUT_MISMATCH.value, True),
    (_reencoded, "", True),
    (rows.event_json, "", False),
], ids=["content-edited-is-an-input-mismatch", "same-content-other-bytes-still-matches",
        "untouched-keeps-the-stored-digests"])
def test_an_edited_stored_event_body_is_detected_and_only_a_content_change_counts(
        store, edit: Callable[[WorldEvent], str], cause: str, content_digests: bool):
    result = busy(HOURS)
    target = next(r for r in result.records if r.seq > 2 * EVERY + 300 and r.outcome == "allocated")
    edited = result.events[target.seq - 200]  # folded after the checkpoint at 2 * EVERY - 1
    _edit_body(store, edited, edit(edited))
    try:
        [(_, stored)] = list(store.event_texts(edited.cluster, edited.seq - 1, edited.seq))
        assert stored == edit(edited).encode()
        before = _records_between(result.records, 2 * EVERY, edited.seq)
        verifier = Verifier(store)
        results = {r.decision_id: r for r in verifier.run([*before, target])}
    finally:
        _edit_body(store, edited, rows.event_json(edited))
    assert before and all(results[r.decision_id].match for r in before)
    got = results[target.decision_id]
    assert (got.match, got.cause) == (not cause, cause)
    if cause:
        assert got.diff[0].startswith(f"input_digest: recorded {target.input_digest}, replayed ")
    assert verifier.cursor(target.cluster).stored_digests is not content_digests


def _records_between(records: list[DecisionRecord], lo: int, hi: int) -> list[DecisionRecord]:
    """Decisions at seq >= lo that saw nothing from seq hi on (bind re-checks included)."""
    return [r for r in records if lo <= r.seq and max(r.seq, bind_seq(r) or 0) < hi][:20]


def test_a_source_without_texts_is_not_folded_again_on_an_input_mismatch():
    result = busy(HOURS)
    target = next(r for r in result.records if r.seq > 2 * EVERY + 300 and r.outcome == "allocated")
    events = list(result.events)
    edited = events[target.seq - 200]
    events[target.seq - 200] = WorldEvent(**{**edited.to_dict(), "resource_version": "edited"})
    source = MemorySource(events)
    source.add_checkpoints(EVERY)
    verifier = Verifier(source)
    [got] = list(verifier.run([target]))
    assert got.cause == Cause.INPUT_MISMATCH.value
    cursor = verifier.cursor(target.cluster)
    assert (cursor.loads, cursor.folds) == (1, target.seq - (2 * EVERY - 1))
    assert not cursor.stored_digests
