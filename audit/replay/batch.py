"""Replaying many stored decisions at once: read each stretch of history once, verify in steps.

Verifying decisions one by one against a store asks it for the events between each decision
and the previous one: one round trip per decision. Here the decisions are put in history order
and cut into segments of contiguous history (one cluster, at most ``SEGMENT_EVENTS`` sequence
numbers). For each segment the history it needs (the nearest stored checkpoint before it and the
events up to its last decision or bind re-check) is read once into a ``MemorySource``, with an
in-memory checkpoint every ``DEFAULT_INTERVAL`` events (up to the first missing one) so a bind re-check that moves the world
ahead can step back cheaply; one ``Verifier`` then walks the segment forward, as an offline
replay of the same history files does. Results come out in steps of a given size so a caller
can record progress, or stop, between them. The history object does the I/O; nothing here does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from audit.events import WorldEvent
from audit.records import DecisionRecord
from audit.replay.checkpoints import DEFAULT_INTERVAL, CheckpointWriter, load_checkpoint_text
from audit.replay.source import MemorySource
from audit.replay.verify import ReplayResult, Verifier, bind_seq
from audit.world import World

SEGMENT_EVENTS = 50_000  # sequence numbers of history held in memory at once


def history_order(records: Sequence[DecisionRecord]) -> list[DecisionRecord]:
    return sorted(records, key=lambda r: (r.cluster, r.seq, r.decision_id))


def _last_seq(r: DecisionRecord) -> int:
    return max(r.seq, bind_seq(r) or 0)


def segments(records: Sequence[DecisionRecord], span: int = SEGMENT_EVENTS) -> list[list[DecisionRecord]]:
    """Runs of records in history order, each of one cluster and at most ``span`` seqs long."""
    out: list[list[DecisionRecord]] = []
    for r in history_order(records):
        current = out[-1] if out else None
        if current is None or current[0].cluster != r.cluster or _last_seq(r) - current[0].seq > span:
            out.append([r])
        else:
            current.append(r)
    return out


def _checkpoint_in_memory(source: MemorySource, cluster: str, events: list[WorldEvent],
                          start: tuple[int, str] | None, every: int) -> None:
    """Checkpoint the held events every ``every`` events, stopping at the first gap: a checkpoint
    past a missing event would hide the gap from the decisions after it."""
    writer = CheckpointWriter(source.write_checkpoint, every, cluster)
    world = load_checkpoint_text(cluster, start[0], start[1]) if start is not None else World(cluster)
    for ev in events:
        if ev.seq <= world.seq:
            continue
        if ev.seq != world.seq + 1:
            return
        world.apply(ev)
        writer.observe(world)


def materialize(history: Any, records: Sequence[DecisionRecord], every: int = DEFAULT_INTERVAL) -> MemorySource:
    """The part of a stored history these records need, in memory: per cluster, the nearest stored
    checkpoint before the first record and the events from it to the last record's seq (or bind
    re-check). Stored checkpoints stay their text (parsing and re-encoding one is costly)."""
    events: list[WorldEvent] = []
    starts: dict[str, tuple[int, str] | None] = {}
    checkpoints: list[tuple[str, int, str]] = []
    held: dict[str, list[WorldEvent]] = {}
    for cluster in sorted({r.cluster for r in records}):
        mine = [r for r in records if r.cluster == cluster]
        lo = min(r.seq for r in mine)
        hi = max(_last_seq(r) for r in mine)
        cp = history.nearest_checkpoint_text(cluster, lo)
        starts[cluster] = cp
        if cp is not None:
            checkpoints.append((cluster, cp[0], cp[1]))
        held[cluster] = list(history.events(cluster, cp[0] if cp is not None else -1, hi))
        events.extend(held[cluster])
    source = MemorySource(events, checkpoints)
    for cluster, evs in held.items():
        _checkpoint_in_memory(source, cluster, evs, starts[cluster], every)
    return source


def replay_in_steps(history: Any, records: Sequence[DecisionRecord], step: int, span: int = SEGMENT_EVENTS,
                    every: int = DEFAULT_INTERVAL) -> Iterator[list[ReplayResult]]:
    """Results in history order, ``step`` records at a time (the last step of a segment may be
    shorter); each segment's history is read from ``history`` once."""
    if step < 1:
        raise ValueError(f"step: {step} must be >= 1")
    for segment in segments(records, span):
        verifier = Verifier(materialize(history, segment, every))
        for i in range(0, len(segment), step):
            results = list(verifier.run(segment[i:i + step]))
            for r in results:
                r.replayed = None  # the caller records the verdict; the regenerated record is large
            yield results
