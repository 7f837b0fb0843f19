"""Checkpoints of the world: written every N events, digested, verified when loaded.

A checkpoint body is ``World.snapshot()`` plus ``content_digest`` (sha256 of the canonical
snapshot), so a body that was truncated, edited or mixed up with another sequence number is
refused on load instead of silently rebuilding a different world. Bodies stay readable as plain
snapshots (the API's world view reads ``objects`` and ``policy`` from them).

``CheckpointWriter`` decides when a checkpoint is due — after the event whose ``seq + 1`` is a
multiple of ``every`` — so the positions do not depend on how producers batch their events, and
one replay folds at most ``every`` events after its checkpoint. Producers hook it in without
changing their code: ``follow(world)`` gives an ``on_events`` callback for a producer that folds
its own world (the simulator), ``fold(events)`` folds a private world for one that only sees
the event stream (a store writer). The sink does the I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from audit.events import WorldEvent
from audit.world import World, canonical_digest

DEFAULT_INTERVAL = 10_000
DIGEST_KEY = "content_digest"

CheckpointSink = Callable[[str, int, dict[str, Any]], None]
# body -> objects -> kind: below that each object is encoded whole (see canonical_digest)
_STREAM_DEPTH = 3


class CheckpointCorrupt(ValueError):
    """A checkpoint body fails its own digest or cannot be turned back into a world."""

    def __init__(self, cluster: str, seq: int, message: str) -> None:
        super().__init__(f"checkpoint {cluster}@{seq}: {message}")
        self.cluster = cluster
        self.seq = seq


def checkpoint_body(world: World) -> dict[str, Any]:
    snap = world.snapshot()
    return {**snap, DIGEST_KEY: canonical_digest(snap, _STREAM_DEPTH)}


def load_checkpoint(cluster: str, seq: int, body: Any) -> World:
    """The world the checkpoint holds, after checking its digest and sequence number."""
    if not isinstance(body, dict):
        raise CheckpointCorrupt(cluster, seq, f"body is {type(body).__name__}, not an object")
    snap = {k: v for k, v in body.items() if k != DIGEST_KEY}
    recorded = body.get(DIGEST_KEY)
    if recorded is None:
        raise CheckpointCorrupt(cluster, seq, f"{DIGEST_KEY} missing")
    actual = canonical_digest(snap, _STREAM_DEPTH)
    if actual != recorded:
        raise CheckpointCorrupt(cluster, seq, f"{DIGEST_KEY}: recorded {recorded}, content hashes to {actual}")
    if snap.get("seq") != seq or snap.get("cluster") != cluster:
        raise CheckpointCorrupt(cluster, seq, f"body is for {snap.get('cluster')}@{snap.get('seq')}")
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
