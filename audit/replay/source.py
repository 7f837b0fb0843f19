"""Where replay reads history from, and the cursor that rebuilds the world at a sequence number.

``ReplaySource`` is the reads replay needs — the nearest checkpoint at or before a seq (parsed,
or as its stored text, which the cursor verifies byte-wise before parsing), and the events in a
seq range — which ``audit.store.AuditStore`` provides and ``MemorySource`` provides over lists
(offline JSONL files, tests, benchmarks); ``MemorySource`` keeps checkpoints as the same
canonical text the store keeps, so reading one costs what it costs from the store.

``WorldCursor`` keeps one world and moves it forward: to reach ``seq`` it folds from where it is,
or restarts from the nearest checkpoint when that is closer (or when it would have to go back),
so one rebuild costs at most one checkpoint interval of folds. A gap in the sequence numbers is
``MissingEvents``; a checkpoint that fails its digest is ``CheckpointCorrupt`` (from
``audit.replay.checkpoints``).

Each folded event extends the world's chain digest by its event digest, the sha256 of its
canonical JSON. The store keeps every event as exactly that text, so ``digested_events`` hands
the cursor each event with the sha256 of its stored bytes and the fold encodes nothing again
(``MemorySource`` has no text: its events are digested from their content). A stored text that
was edited hashes differently, so the decision's input digest no longer matches; a text whose
content is intact but whose bytes are not canonical would too, so on an input mismatch the
verifier folds again from content (``digest_content``) before giving its verdict — the verdict
never depends on how a text was encoded.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Iterator
from typing import Any, Protocol

from audit.events import WorldEvent, stored_event
from audit.replay.checkpoints import (
    DEFAULT_INTERVAL,
    checkpoint_body,
    checkpoint_text,
    collector_paused,
    load_checkpoint_text,
)
from audit.world import World


class ReplaySource(Protocol):
    def nearest_checkpoint(self, cluster: str, seq: int) -> tuple[int, dict[str, Any]] | None: ...

    def nearest_checkpoint_text(self, cluster: str, seq: int) -> tuple[int, str] | None: ...

    def events(self, cluster: str, after_seq: int, upto_seq: int) -> Iterator[WorldEvent]: ...

    def digested_events(self, cluster: str, after_seq: int,
                        upto_seq: int) -> Iterator[tuple[WorldEvent, str | None]]: ...


class MissingEvents(LookupError):
    def __init__(self, cluster: str, expected: int, found: int | None, target: int) -> None:
        what = f"next event found is seq {found}" if found is not None else "no further events"
        super().__init__(f"world {cluster}: event seq {expected} missing on the way to seq {target} ({what})")
        self.expected = expected


class MemorySource:
    """Events and checkpoints held in lists, per cluster, sorted by seq (duplicates refused)."""

    def __init__(self, events: Iterable[WorldEvent] = (),
                 checkpoints: Iterable[tuple[str, int, dict[str, Any] | str]] = ()) -> None:
        self._events: dict[str, list[WorldEvent]] = {}
        self._seqs: dict[str, list[int]] = {}
        self._checkpoints: dict[str, dict[int, str]] = {}  # cluster -> seq -> canonical body text
        for ev in events:
            self._events.setdefault(ev.cluster, []).append(ev)
        for cluster, evs in self._events.items():
            evs.sort(key=lambda e: e.seq)
            seqs = [e.seq for e in evs]
            for a, b in zip(seqs, seqs[1:], strict=False):
                if a == b:
                    raise ValueError(f"WorldEvent: seq: {a} appears twice for cluster {cluster}")
            self._seqs[cluster] = seqs
        for cluster, seq, body in checkpoints:
            self.write_checkpoint(cluster, seq, body)

    def write_checkpoint(self, cluster: str, seq: int, body: dict[str, Any] | str) -> None:
        """Keep ``body`` as the store would: its canonical text (a text is kept as given)."""
        self._checkpoints.setdefault(cluster, {})[seq] = body if isinstance(body, str) else checkpoint_text(body)

    def checkpoint_seqs(self, cluster: str) -> list[int]:
        return sorted(self._checkpoints.get(cluster, {}))

    def nearest_checkpoint_text(self, cluster: str, seq: int) -> tuple[int, str] | None:
        seqs = self.checkpoint_seqs(cluster)
        i = bisect.bisect_right(seqs, seq)
        if i == 0:
            return None
        return seqs[i - 1], self._checkpoints[cluster][seqs[i - 1]]

    def nearest_checkpoint(self, cluster: str, seq: int) -> tuple[int, dict[str, Any]] | None:
        found = self.nearest_checkpoint_text(cluster, seq)
        return None if found is None else (found[0], json.loads(found[1]))

    def events(self, cluster: str, after_seq: int, upto_seq: int) -> Iterator[WorldEvent]:
        seqs = self._seqs.get(cluster, [])
        evs = self._events.get(cluster, [])
        lo = bisect.bisect_right(seqs, after_seq)
        hi = bisect.bisect_right(seqs, upto_seq)
        return iter(evs[lo:hi])

    def digested_events(self, cluster: str, after_seq: int,
                        upto_seq: int) -> Iterator[tuple[WorldEvent, str | None]]:
        """The events with no stored text to hash: the fold digests each one's content."""
        return ((ev, None) for ev in self.events(cluster, after_seq, upto_seq))

    def clusters(self) -> list[str]:
        return sorted(self._events)

    def max_seq(self, cluster: str) -> int | None:
        seqs = self._seqs.get(cluster)
        return seqs[-1] if seqs else None

    def add_checkpoints(self, every: int) -> int:
        """Checkpoint every ``every`` events by folding the log (what an ingest side would have done),
        starting from the checkpoint just before the first event held, if the log starts later."""
        from audit.replay.checkpoints import CheckpointWriter

        writer = CheckpointWriter(self.write_checkpoint, every)
        for cluster in self.clusters():
            evs = self._events[cluster]
            cp = self.nearest_checkpoint_text(cluster, evs[0].seq - 1) if evs[0].seq > 0 else None
            world = load_checkpoint_text(cluster, cp[0], cp[1]) if cp is not None else World(cluster)
            for ev in evs:
                if ev.seq > world.seq:
                    world.apply(ev)
                    writer.observe(world)
        return len(writer.written)


class WorldCursor:
    """One world for one cluster, moved to the sequence numbers asked for (see module docstring)."""

    def __init__(self, source: ReplaySource, cluster: str, fold_limit: int = DEFAULT_INTERVAL,
                 stored_digests: bool = True) -> None:
        self.source = source
        self.fold_limit = fold_limit  # folding further than this looks for a closer checkpoint first
        self.cluster = cluster
        # chain the digests of the events' stored texts where the source has them (see module docstring)
        self.stored_digests = stored_digests
        self.texts_hashed = False  # the current world chains at least one stored text's digest
        self.world: World | None = None
        self.folds = 0  # events folded (for benchmarks and the "at most N folds" test)
        self.loads = 0  # checkpoints loaded

    def at(self, seq: int) -> World:
        world = self.world
        if world is not None and world.seq == seq:
            return world
        with collector_paused():
            if world is None or world.seq > seq or seq - world.seq > self.fold_limit:
                checkpoint = self.source.nearest_checkpoint_text(self.cluster, seq)
                if world is None or world.seq > seq or (checkpoint is not None and checkpoint[0] > world.seq):
                    world = self._start(checkpoint)
            self.world = world
            self._fold(world, seq)
        return world

    def _start(self, checkpoint: tuple[int, str] | None) -> World:
        self.world = None
        self.texts_hashed = False
        if checkpoint is None:
            return World(self.cluster)
        self.loads += 1
        return load_checkpoint_text(self.cluster, checkpoint[0], checkpoint[1])

    def _fold(self, world: World, seq: int) -> None:
        if world.seq == seq:
            return
        if self.stored_digests:
            digested = self.source.digested_events(self.cluster, world.seq, seq)
        else:
            digested = ((ev, None) for ev in self.source.events(self.cluster, world.seq, seq))
        for ev, digest in digested:
            if ev.seq != world.seq + 1:
                self.world = None  # half-folded: never reuse
                raise MissingEvents(self.cluster, world.seq + 1, ev.seq, seq)
            world.apply(ev, digest)
            self.folds += 1
            if digest is not None:
                self.texts_hashed = True
        if world.seq != seq:
            self.world = None
            raise MissingEvents(self.cluster, world.seq + 1, None, seq)

    def digest_content(self) -> bool:
        """From now on chain the digests of the events' parsed content, not of their stored texts;
        True if that changes the current world (which is then rebuilt on the next move)."""
        if not self.stored_digests:
            return False
        if not self.texts_hashed:  # a source without texts: content digests already
            self.stored_digests = False
            return False
        self.stored_digests = False
        self.world = None
        return True

    def snapshot_body(self) -> dict[str, Any]:
        if self.world is None:
            raise ValueError("WorldCursor: no world yet")
        return checkpoint_body(self.world)


READ_AHEAD_MAX = 4096  # events read past a sequential fold's end at most (a few MB of texts)


class StoreHistory:
    """``audit.store.AuditStore`` as a ``ReplaySource`` (the store object does the I/O).

    The store binds ``after_seq`` as an unsigned integer, so "from the first event" cannot be
    asked as ``after_seq=-1``; the event at seq 0 is read on its own and the rest with
    ``after_seq=0``.

    Replaying many decisions folds the cursor forward a few events at a time, and one store query
    per decision cost far more than the folds (a query is milliseconds, an event microseconds).
    So when a read starts where the previous one ended, the read goes past its end, further each
    time up to ``READ_AHEAD_MAX`` events, and the next reads are served from those texts while
    they cover them with no gap. Only seqs that were stored are kept: a read past them (or past a
    gap) asks the store again, so a late event is seen and a gap is reported exactly as an
    unbuffered read reports it. A single lookup reads exactly its range.
    """

    def __init__(self, store: Any) -> None:
        self.store = store
        self._cluster = ""
        self._first = 0  # seq of _texts[0]; _texts holds consecutive seqs from there
        self._texts: list[tuple[int, bytes]] = []
        self._last_upto: int | None = None
        self._ahead = 0

    def nearest_checkpoint(self, cluster: str, seq: int) -> tuple[int, dict[str, Any]] | None:
        found = self.store.nearest_checkpoint(cluster, seq)
        return None if found is None else (int(found[0]), found[1])

    def nearest_checkpoint_text(self, cluster: str, seq: int) -> tuple[int, str] | None:
        found = self.store.nearest_checkpoint_text(cluster, seq)
        return None if found is None else (int(found[0]), found[1])

    def events(self, cluster: str, after_seq: int, upto_seq: int) -> Iterator[WorldEvent]:
        # the store binds seq as Int64, so after_seq = -1 reads from the very first event
        yield from self.store.events(cluster, after_seq, upto_seq)

    def digested_events(self, cluster: str, after_seq: int,
                        upto_seq: int) -> Iterator[tuple[WorldEvent, str | None]]:
        if upto_seq - after_seq > READ_AHEAD_MAX:  # a long fold streams page by page, as it always did
            self._last_upto = None
            yield from self.store.digested_events(cluster, after_seq, upto_seq)
            return
        for _, raw in self._event_texts(cluster, after_seq, upto_seq):
            yield stored_event(raw)

    def _event_texts(self, cluster: str, after_seq: int, upto_seq: int) -> list[tuple[int, bytes]]:
        """The store's ``event_texts`` for a short range, from the texts read ahead when they cover it."""
        sequential = cluster == self._cluster and after_seq == self._last_upto
        self._ahead = min(max(2 * self._ahead, 64), READ_AHEAD_MAX) if sequential else 0
        self._last_upto = upto_seq
        end = self._first + len(self._texts)  # first seq not held
        if cluster == self._cluster and self._first <= after_seq + 1 and upto_seq < end:
            return self._texts[after_seq + 1 - self._first:upto_seq + 1 - self._first]
        rows = list(self.store.event_texts(cluster, after_seq, upto_seq + self._ahead))
        held = 0
        while held < len(rows) and rows[held][0] == after_seq + 1 + held:
            held += 1
        self._cluster, self._first, self._texts = cluster, after_seq + 1, rows[:held]
        return [row for row in rows if row[0] <= upto_seq]

    def get_decision(self, decision_id: str, tenant: str | None) -> Any:
        return self.store.get_decision(decision_id, tenant)

    def get_decisions(self, decision_ids: Any, tenant: str | None) -> Any:
        return self.store.get_decisions(decision_ids, tenant)

    def max_seq(self, cluster: str) -> int | None:
        top: int | None = self.store.max_seq(cluster)
        return top
