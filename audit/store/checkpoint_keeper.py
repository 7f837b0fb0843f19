"""Keeping each cluster's world checkpoints current as its events are stored, in the background.

A resumed watcher and a single decision's replay start from the newest checkpoint of the
cluster's event log and fold the events after it, so a store whose log is never checkpointed is
read whole on every resume. The API server keeps them itself (``claimtrail serve
--checkpoint-every N``): every writer of the store tells the keeper which clusters' events it
has just delivered (``poke``), and one thread per store, one cluster at a time, writes the
checkpoints due once a cluster's log reaches a position ``claimtrail replay --write-checkpoints
N`` would checkpoint (after seq N-1, 2N-1, …), by the same code
(``audit.replay.checkpoints.extend_checkpoints``), so the checkpoints are the same, byte for byte.

Nothing of this runs on a request's thread: a poke only records the cluster. The thread reads
two rows per poked cluster (its last event seq, its newest checkpoint seq at or before it) and
works only when a position is due. The work itself — parsing each event, folding it, encoding a
checkpoint of the whole world — is about as much interpreter time per event as ingesting it, so
it runs in a child process (started with ``spawn`` at a lower priority, as the record parser of
``audit.store.ingest_worker``): in the server's process it held the interpreter lock against the
ingest requests, whose throughput fell by a third to a half while a 230,000-event log was
checkpointed. The thread only reads the event texts a position needs from the store, hands them
over, and stores the checkpoint texts that come back. The child keeps each cluster's world where
its last round ended, so the next round folds only the new events instead of loading the newest
checkpoint again.

A round that fails (an event missing, a stored checkpoint that fails its digest, the store away,
the child gone) is logged with the cluster and counted (``errors``, ``last_error``; the API's
``/metrics`` shows the counters), and the cluster is tried again at its next poke: nothing is
retried in a loop against a store that is down.
"""

from __future__ import annotations

import logging
import os
import threading
import traceback
from collections.abc import Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from multiprocessing import get_context
from typing import Any

from clickhouse_connect.driver.exceptions import ClickHouseError

from audit.events import WorldEvent, loads_json
from audit.replay.checkpoints import CheckpointCorrupt, CheckpointGap, checkpoint_text, extend_checkpoints
from audit.store.connection import StoreError
from audit.store.ingest_worker import follow_parent
from audit.world import World

log = logging.getLogger("claimtrail.store.checkpoints")


def last_due(every: int, top: int) -> int:
    """The last checkpoint position (``CheckpointWriter.due``) of a log ending at seq ``top``; -1: none yet."""
    return (top + 1) // every * every - 1


def next_due(every: int, seq: int) -> int:
    """The first checkpoint position after ``seq``."""
    return ((seq + 1) // every + 1) * every - 1


# ---- in the child ------------------------------------------------------------------------------

# each cluster's world where its last round ended
_WORLDS: dict[str, World] = {}


class _Handed:
    """The part of a cluster's log the server handed over (``CheckpointedLog``): the checkpoint to
    start from, if any, and the stored texts of the events after it."""

    def __init__(self, checkpoint: tuple[int, str] | None, texts: list[tuple[int, bytes]]) -> None:
        self._checkpoint = checkpoint
        self._texts = texts

    def nearest_checkpoint_text(self, cluster: str, seq: int) -> tuple[int, str] | None:
        return self._checkpoint

    def events(self, cluster: str, after_seq: int, upto_seq: int) -> Iterator[WorldEvent]:
        for seq, raw in self._texts:
            if after_seq < seq <= upto_seq:
                yield WorldEvent.from_dict(loads_json(raw))


@dataclass(frozen=True)
class Round:
    """What one round of the child gives back: the checkpoints to store, as (seq, text), and why
    it stopped short, if it did (``failure``: ``gap`` at the event seq ``missing``, ``corrupt``
    or ``defect``, with its ``message``)."""

    written: list[tuple[int, str]] = field(default_factory=list)
    failure: str = ""
    message: str = ""
    missing: int = -1


def fold_round(cluster: str, every: int, upto: int, at: int | None, checkpoint: tuple[int, str] | None,
               texts: list[tuple[int, bytes]]) -> Round:
    """Runs in the child: checkpoint ``cluster`` up to ``upto`` from the world kept at seq ``at``
    (None: from ``checkpoint``, or the first event without one) and the event ``texts`` after it.
    Failures come back as values: the exceptions' own arguments do not survive pickling."""
    written: list[tuple[int, str]] = []

    def keep(_cluster: str, seq: int, body: dict[str, Any]) -> None:
        written.append((seq, checkpoint_text(body)))

    world = _WORLDS.pop(cluster, None) if at is not None else None
    if at is not None and (world is None or world.seq != at):
        return Round(failure="defect", message=f"the folding process holds no world of {cluster} at seq {at}")
    try:
        _, world = extend_checkpoints(_Handed(checkpoint, texts), keep, cluster, every, upto, world)
    except CheckpointGap as exc:
        return Round(written, "gap", str(exc), exc.missing)
    except CheckpointCorrupt as exc:
        return Round(written, "corrupt", str(exc))
    except Exception:  # noqa: BLE001 - a defect: its traceback goes to the server's log
        return Round(written, "defect", traceback.format_exc())
    _WORLDS[cluster] = world
    return Round(written)


def _ready() -> bool:
    return True


# ---- in the server -----------------------------------------------------------------------------


class _RoundFailed(Exception):
    """A round the child stopped short, with the reason to log."""


class CheckpointKeeper:
    """A thread that writes a cluster's due checkpoints whenever events of it were stored.

    ``store`` is what the keeper reads and writes through: ``max_seq``, ``latest_checkpoint_seq``,
    ``nearest_checkpoint_text``, ``event_texts`` and ``write_checkpoint`` (``audit.store.AuditStore``).
    """

    def __init__(self, store: Any, every: int) -> None:
        if every < 1:
            raise ValueError(f"CheckpointKeeper: every: {every} must be >= 1")
        self._store = store
        self.every = every
        self.written = 0  # checkpoints written by this keeper
        self.errors = 0  # rounds of a cluster that failed
        self.last_error = ""
        self._at: dict[str, int] = {}  # cluster -> seq of the world the child keeps of it
        self._pool: ProcessPoolExecutor | None = None  # started by the first round with work
        self._due: set[str] = set()
        self._busy = False
        self._closed = False
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name="claimtrail-checkpoints", daemon=True)
        self._thread.start()

    def poke(self, clusters: Iterable[str]) -> None:
        """Events of these clusters were stored: look whether a checkpoint is due (in the background)."""
        with self._cond:
            if self._closed:
                return
            self._due.update(clusters)
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every cluster poked so far is checkpointed up to its due position (or its
        round failed, which is logged); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._due and not self._busy, timeout)

    def close(self) -> None:
        """Write what is due, then stop the thread and the child."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._due or self._closed)
                if not self._due:
                    return  # closed, and everything poked is done
                due, self._due = sorted(self._due), set()
                self._busy = True
            try:
                for cluster in due:
                    self._keep(cluster)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _keep(self, cluster: str) -> None:
        """Write ``cluster``'s due checkpoints; a failure is logged and counted, and waits for the next poke."""
        try:
            self._extend(cluster)
        except _RoundFailed as exc:
            self._failed(cluster, str(exc))
        except (StoreError, ClickHouseError) as exc:  # the store away: tried again at the next poke
            self._failed(cluster, _first_line(exc))
        except BrokenProcessPool:
            self._pool, self._at = None, {}  # the next round starts a new child, from the stored checkpoints
            self._failed(cluster, "the process folding the event log stopped")
        except Exception as exc:  # noqa: BLE001 - a defect: its traceback is logged, and the server goes on
            self._failed(cluster, _first_line(exc), exc_info=True)

    def _extend(self, cluster: str) -> None:
        store = self._store
        top = store.max_seq(cluster)
        upto = -1 if top is None else last_due(self.every, top)
        newest = store.latest_checkpoint_seq(cluster, upto) if upto >= 0 else None
        if upto < 0 or (newest is not None and newest >= upto):
            return
        at = self._at.pop(cluster, None)
        checkpoint = None
        if at is None or (newest is not None and at < newest):  # the child holds no world from there on
            at = None
            checkpoint = store.nearest_checkpoint_text(cluster, upto)
        seq = at if at is not None else checkpoint[0] if checkpoint is not None else -1
        written: list[int] = []
        while seq < upto:
            # one position's events at a time: what crosses to the child stays a few megabytes
            end = min(next_due(self.every, seq), upto)
            texts = list(store.event_texts(cluster, seq, end))
            done = self._child().submit(fold_round, cluster, self.every, end, at, checkpoint, texts).result()
            for position, text in done.written:
                store.write_checkpoint(cluster, position, text)
                self.written += 1
                written.append(position)
            if done.failure == "gap":  # named with what this round wrote before it, as the command does
                gap = CheckpointGap(cluster, done.missing, written)
                raise _RoundFailed(f"{gap}; checkpoints go on once it is stored")
            if done.failure == "corrupt":
                raise _RoundFailed(f"{done.message}; remove it before new checkpoints can be written after it")
            if done.failure:
                raise _RoundFailed(done.message)
            at = seq = end
            checkpoint = None
        self._at[cluster] = seq
        log.info("checkpoints written", extra={"cluster": cluster, "seqs": written, "every": self.every})

    def _child(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"),
                                             initializer=follow_parent, initargs=(os.getpid(),))
            self._pool.submit(_ready).result()
        return self._pool

    def _failed(self, cluster: str, message: str, exc_info: bool = False) -> None:
        self.errors += 1
        lines = message.strip().splitlines()  # a child's traceback ends with what was raised
        self.last_error = f"cluster {cluster}: {lines[-1] if lines else ''}"
        log.error("checkpoints of cluster %s not written: %s (tried again when its next events are stored)",
                  cluster, message, extra={"cluster": cluster}, exc_info=exc_info)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__
