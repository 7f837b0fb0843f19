"""Checkpoints of the world: written every N events, digested, verified when loaded.

A checkpoint body is ``World.snapshot()`` plus ``content_digest`` (sha256 of the canonical
snapshot), so a body that was truncated, edited or mixed up with another sequence number is
refused on load instead of silently rebuilding a different world. Bodies stay readable as plain
snapshots (the API's world view reads ``objects`` and ``policy`` from them); ``checkpoint_snapshot``
checks one as a load does without rebuilding its world, for readers that need its objects alone.

A body is stored as its canonical JSON text (``checkpoint_text``). ``load_checkpoint_text``
verifies that text by hashing its bytes — the snapshot's canonical bytes are the text with the
``"content_digest"`` member cut out — before parsing it once; re-encoding megabytes of parsed
objects to check them costs more than parsing them. A text that is not in that form (an older
writer's ASCII escapes, or damage) is checked the slow way, on its parsed content, so the verdict
never depends on the encoding. The worlds rebuilt from the last two checkpoints loaded are kept
by content digest for loads whose bytes hash to that digest; every load still hashes its text,
and gets a world of its own, a copy of the kept one (see ``_KeptWorlds``).

``CheckpointWriter`` decides when a checkpoint is due — after the event whose ``seq + 1`` is a
multiple of ``every`` — so the positions do not depend on how producers batch their events, and
one replay folds at most ``every`` events after its checkpoint. Producers hook it in without
changing their code: ``follow(world)`` gives an ``on_events`` callback for a producer that folds
its own world (the simulator), ``fold(events)`` folds a private world for one that only sees
the event stream (a store writer). The sink does the I/O. ``extend_checkpoints`` brings a stored
log's checkpoints up to a seq, going on from the newest one it holds: what ``claimtrail replay
--write-checkpoints`` and the API server's own checkpoint keeper both run, so the two write the
same checkpoints of the same log.
"""

from __future__ import annotations

import gc
import hashlib
import re
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from audit.canonical import canonical_digest, canonical_json
from audit.events import WorldEvent, loads_json
from audit.world import World

DEFAULT_INTERVAL = 10_000
DIGEST_KEY = "content_digest"

CheckpointSink = Callable[[str, int, dict[str, Any]], None]
# body -> objects -> kind: below that each object is encoded whole (see canonical_digest)
_STREAM_DEPTH = 3
# In canonical JSON a '"' inside a string is always escaped, so a ',' right before a quote marks
# a structural member; in a text checkpoint_text wrote the first such "content_digest" member with
# a digest for its value is the top-level one (only "chain", "charges" and "cluster" sort before
# it, and none holds a string-valued member of that name). If it were not, the hash or the parsed
# body's own content_digest would disagree and the parsed content would be checked instead.
_DIGEST_MEMBER = re.compile(rb',"content_digest":"([0-9a-f]{64})"')


# tracked objects built during a pause from which on they skip the young generations: below
# that a young collection costs under a few milliseconds
_AGE_AT_LEAST = 20_000


class CheckpointCorrupt(ValueError):
    """A checkpoint body fails its own digest or cannot be turned back into a world."""

    def __init__(self, cluster: str, seq: int, message: str) -> None:
        super().__init__(f"checkpoint {cluster}@{seq}: {message}")
        self.cluster = cluster
        self.seq = seq


def checkpoint_body(world: World) -> dict[str, Any]:
    snap = world.snapshot()
    return {**snap, DIGEST_KEY: canonical_digest(snap, _STREAM_DEPTH)}


class _KeptWorlds:
    """The worlds rebuilt from the last few checkpoints loaded, by content digest.

    Parsing a 1,000-node checkpoint and rebuilding its world costs about as much as folding
    thousands of events, and replays cluster around the same checkpoints (a batch, an auditor
    stepping through a window). The world is a pure function of the snapshot, so the one rebuilt
    from it is kept, never handed out: every load of the same content gets a ``World.fork()`` of
    it, whose indexes and counters are containers of its own, equal to those a rebuild makes. Only
    content that is immutable and named by its digest is kept: a world is looked up under a digest
    its text was just hashed to on this load, so a damaged or different text never reaches an
    entry. Its objects and devices are shared read-only by the forks, as event payloads already
    are between worlds.
    """

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._entries: OrderedDict[str, World] = OrderedDict()

    def get(self, content_digest: str) -> World | None:
        world = self._entries.get(content_digest)
        if world is not None:
            self._entries.move_to_end(content_digest)
        return world

    def put(self, content_digest: str, world: World) -> None:
        self._entries[content_digest] = world
        self._entries.move_to_end(content_digest)
        while len(self._entries) > self.keep:
            self._entries.popitem(last=False)

    def clear(self) -> None:
        self._entries.clear()


# two: the checkpoint a replay starts from and the one before it (a window that crosses one)
_KEPT = _KeptWorlds(keep=2)


def forget_parsed_checkpoints() -> None:
    """Drop the checkpoints' worlds kept between loads (for measuring a first load, or to free memory)."""
    _KEPT.clear()


def checkpoint_text(body: dict[str, Any]) -> str:
    """The stored form of a checkpoint body: exactly ``audit.records.canonical_json(body)``, as text."""
    return canonical_json(body).decode()


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold off cyclic garbage collection while a world is rebuilt from a checkpoint or folded.

    The hundreds of thousands of JSON-shaped containers a load builds all survive it and form no
    cycles, and neither do a fold's: collections triggered while they pile up only walk the same
    live world again and again. Collection resumes afterwards, and is never turned on here if
    something else had turned it off.

    Resuming as such would make the next allocation collect the young generation, which by then
    holds everything built during the pause: walking a rebuilt 1,000-node world that way took
    50-100 ms, only to find it alive. So after a pause that ended normally and built many
    objects, the survivors join the oldest generation directly (``_age_young_objects``), where
    only full collections — rare, and triggered by the usual thresholds — walk them, and free
    them once unreachable.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    except BaseException:
        if was_enabled:
            gc.enable()
        raise
    if was_enabled:
        _age_young_objects()
        gc.enable()


def _age_young_objects() -> None:
    """Move every tracked object into the oldest generation without walking it.

    ``gc.freeze()`` moves all generations into the permanent one in constant time and
    ``gc.unfreeze()`` moves that into the oldest generation, so the pair only ages objects:
    nothing stays frozen, and cyclic garbage among them is still found by the next full
    collection. If something else froze objects (a process that loaded a history to keep until
    exit), unfreezing would hand them back to the collector, and freezing alone could keep
    cyclic garbage for ever; then nothing is moved and the young collection runs as usual.
    """
    # (the count of frozen objects walks them all: asked only after a pause that built many objects)
    if gc.get_count()[0] >= _AGE_AT_LEAST and gc.get_freeze_count() == 0:
        gc.freeze()
        gc.unfreeze()


def load_checkpoint_text(cluster: str, seq: int, text: str | bytes) -> World:
    """The world a stored checkpoint text holds, after checking its digest and sequence number.

    The digest is taken over the text's bytes (see the module docstring); the parsed body must
    then carry that same ``content_digest`` at its top level, which ties the bytes that were
    hashed to the object that is rebuilt.
    """
    raw = text.encode() if isinstance(text, str) else text
    digest = _hashed_digest(raw)
    with collector_paused():
        if digest is not None:
            kept = _KEPT.get(digest)
            if kept is not None:
                _check_position(cluster, seq, kept.cluster, kept.seq)
                return kept.fork()
        body = _parsed(cluster, seq, raw)
        if digest is None or not isinstance(body, dict) or body.get(DIGEST_KEY) != digest:
            return load_checkpoint(cluster, seq, body)  # the parsed content decides
        world = _rebuild(cluster, seq, {k: v for k, v in body.items() if k != DIGEST_KEY})
        _KEPT.put(digest, world.fork())
        return world


def checkpoint_snapshot(cluster: str, seq: int | None, text: str | bytes) -> dict[str, Any]:
    """The snapshot (``World.snapshot()``) a stored checkpoint text holds, checked as
    ``load_checkpoint_text`` checks it, without rebuilding its world: for readers that need its
    objects alone. ``seq`` None takes the body's own seq (a text handed on without its row)."""
    raw = text.encode() if isinstance(text, str) else text
    digest = _hashed_digest(raw)
    with collector_paused():
        body = _parsed(cluster, -1 if seq is None else seq, raw)
        own = body.get("seq") if isinstance(body, dict) else None
        where = seq if seq is not None else own if isinstance(own, int) else -1
        if digest is None or not isinstance(body, dict) or body.get(DIGEST_KEY) != digest:
            snap = _checked_snapshot(cluster, where, body)  # the parsed content decides
        else:
            snap = {k: v for k, v in body.items() if k != DIGEST_KEY}
    _check_position(cluster, where, snap.get("cluster"), snap.get("seq"))
    return snap


def _hashed_digest(raw: bytes) -> str | None:
    """The text's top-level ``content_digest`` if its bytes hash to it (see the module docstring)."""
    member = _DIGEST_MEMBER.search(raw)
    if member is None:
        return None
    h = hashlib.sha256()
    view = memoryview(raw)
    h.update(view[:member.start()])
    h.update(view[member.end():])
    digest = member.group(1).decode()
    return digest if h.hexdigest() == digest else None


def _parsed(cluster: str, seq: int, raw: bytes) -> Any:
    try:
        return loads_json(raw)  # json's value and errors, through orjson where they agree
    except ValueError as exc:
        raise CheckpointCorrupt(cluster, seq, f"body is not JSON: {exc}") from None


def load_checkpoint(cluster: str, seq: int, body: Any) -> World:
    """The world the checkpoint holds, after checking its digest and sequence number."""
    snap = _checked_snapshot(cluster, seq, body)
    with collector_paused():
        return _rebuild(cluster, seq, snap)


def _checked_snapshot(cluster: str, seq: int, body: Any) -> dict[str, Any]:
    """``body`` without its digest, after checking that its content hashes to it."""
    if not isinstance(body, dict):
        raise CheckpointCorrupt(cluster, seq, f"body is {type(body).__name__}, not an object")
    snap = {k: v for k, v in body.items() if k != DIGEST_KEY}
    recorded = body.get(DIGEST_KEY)
    if recorded is None:
        raise CheckpointCorrupt(cluster, seq, f"{DIGEST_KEY} missing")
    actual = canonical_digest(snap, _STREAM_DEPTH)
    if actual != recorded:
        raise CheckpointCorrupt(cluster, seq, f"{DIGEST_KEY}: recorded {recorded}, content hashes to {actual}")
    return snap


def _check_position(cluster: str, seq: int, body_cluster: Any, body_seq: Any) -> None:
    if body_seq != seq or body_cluster != cluster:
        raise CheckpointCorrupt(cluster, seq, f"body is for {body_cluster}@{body_seq}")


def _rebuild(cluster: str, seq: int, snap: dict[str, Any]) -> World:
    _check_position(cluster, seq, snap.get("cluster"), snap.get("seq"))
    try:
        return World.from_snapshot(snap)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise CheckpointCorrupt(cluster, seq, f"cannot rebuild the world: {exc!r}") from None


class CheckpointWriter:
    """Hands a checkpoint body to ``sink(cluster, seq, body)`` every ``every`` events."""

    def __init__(self, sink: CheckpointSink, every: int = DEFAULT_INTERVAL, cluster: str = "default") -> None:
        if every < 1:
            raise ValueError(f"CheckpointWriter: every: {every} must be >= 1")
        self.sink = sink
        self.every = every
        self.written: list[int] = []
        self._world: World | None = None
        self._cluster = cluster

    def due(self, seq: int) -> bool:
        return seq >= 0 and (seq + 1) % self.every == 0

    def observe(self, world: World) -> None:
        """Checkpoint ``world`` if its current seq is a checkpoint position (and not yet written)."""
        if self.due(world.seq) and (not self.written or self.written[-1] != world.seq):
            self.sink(world.cluster, world.seq, checkpoint_body(world))
            self.written.append(world.seq)

    def follow(self, world: World) -> Callable[[list[WorldEvent]], None]:
        """An ``on_events`` callback for a producer that applies each event to ``world`` first."""

        def on_events(_events: list[WorldEvent]) -> None:
            self.observe(world)

        return on_events

    def fold(self, events: Iterable[WorldEvent]) -> None:
        """Fold events into a private world, checkpointing at every due position."""
        for ev in events:
            if self._world is None:
                self._world = World(ev.cluster or self._cluster)
            self._world.apply(ev)
            self.observe(self._world)


class CheckpointedLog(Protocol):
    """What ``extend_checkpoints`` reads of a stored log (``audit.store.AuditStore`` provides it)."""

    def nearest_checkpoint_text(self, cluster: str, seq: int) -> tuple[int, str] | None: ...

    def events(self, cluster: str, after_seq: int, upto_seq: int) -> Iterator[WorldEvent]: ...


class CheckpointGap(LookupError):
    """An event missing from a log being checkpointed: a checkpoint past it would describe a
    world that never existed. ``written``: the checkpoints written before it."""

    def __init__(self, cluster: str, missing: int, written: list[int]) -> None:
        super().__init__(f"world {cluster}: event seq {missing} missing from the store; "
                         f"{len(written):,} checkpoint(s) written before it")
        self.cluster = cluster
        self.missing = missing
        self.written = written


def extend_checkpoints(log: CheckpointedLog, sink: CheckpointSink, cluster: str, every: int, upto: int,
                       world: World | None = None) -> tuple[list[int], World]:
    """Checkpoint ``cluster``'s log every ``every`` events up to seq ``upto`` through ``sink``,
    going on from ``world`` (the log's world at a seq at or after its newest checkpoint, as this
    returned it) or else from the newest checkpoint at or before ``upto`` (from the first event
    without one); the seqs written and the world at ``upto``. ``CheckpointCorrupt`` when that
    checkpoint fails its digest, ``CheckpointGap`` at the first missing event (the checkpoints
    before it are written)."""
    writer = CheckpointWriter(sink, every, cluster)
    if world is None:
        latest = log.nearest_checkpoint_text(cluster, upto)
        world = load_checkpoint_text(cluster, latest[0], latest[1]) if latest is not None else World(cluster)
    for ev in log.events(cluster, world.seq, upto):
        if ev.seq != world.seq + 1:
            raise CheckpointGap(cluster, world.seq + 1, writer.written)
        world.apply(ev)
        writer.observe(world)
    return writer.written, world
