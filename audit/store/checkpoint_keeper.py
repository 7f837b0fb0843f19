"""Keeping each cluster's world checkpoints current as its events are stored, in the background.

A resumed watcher and a single decision's replay start from the newest checkpoint of the
cluster's event log and fold the events after it, so a store whose log is never checkpointed is
read whole on every resume. The API server keeps them itself (``claimtrail serve
--checkpoint-every N``): every writer of the store tells the keeper which clusters' events it
has just delivered (``poke``), and one thread per store, one cluster at a time, writes the
checkpoints due once a cluster's log reaches a position ``claimtrail replay --write-checkpoints
N`` would checkpoint (after seq N-1, 2N-1, …), by the same code
(``audit.replay.checkpoints.extend_checkpoints``), so the checkpoints are the same, byte for byte.

Nothing of this runs on a request's thread: a poke only records the cluster. A round reads two
rows per poked cluster (its last event seq, its newest checkpoint seq at or before it) and folds
only when a position is due. A round that fails (the store away, an event missing, a stored
checkpoint that fails its digest) is logged with the cluster and counted (``errors``,
``last_error``; the API's ``/metrics`` shows both counters), and the cluster is tried again at its
next poke: nothing is retried in a loop against a store that is down.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

from clickhouse_connect.driver.exceptions import ClickHouseError

from audit.replay.checkpoints import CheckpointCorrupt, CheckpointGap, extend_checkpoints
from audit.store.connection import StoreError

log = logging.getLogger("claimtrail.store.checkpoints")


def last_due(every: int, top: int) -> int:
    """The last checkpoint position (``CheckpointWriter.due``) of a log ending at seq ``top``; -1: none yet."""
    return (top + 1) // every * every - 1


class CheckpointKeeper:
    """A thread that writes a cluster's due checkpoints whenever events of it were stored.

    ``store`` is what the keeper reads and writes through: ``max_seq``, ``latest_checkpoint_seq``,
    ``nearest_checkpoint_text``, ``events`` and ``write_checkpoint`` (``audit.store.AuditStore``).
    """

    def __init__(self, store: Any, every: int) -> None:
        if every < 1:
            raise ValueError(f"CheckpointKeeper: every: {every} must be >= 1")
        self._store = store
        self.every = every
        self.written = 0  # checkpoints written by this keeper
        self.errors = 0  # rounds of a cluster that failed
        self.last_error = ""
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
        """Write what is due, then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()

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
            top = self._store.max_seq(cluster)
            upto = -1 if top is None else last_due(self.every, top)
            newest = self._store.latest_checkpoint_seq(cluster, upto) if upto >= 0 else None
            if upto < 0 or (newest is not None and newest >= upto):
                return
            written = extend_checkpoints(self._store, self._store.write_checkpoint, cluster, self.every, upto)
        except CheckpointGap as exc:
            self.written += len(exc.written)
            self._failed(cluster, f"{exc}; checkpoints go on once it is stored")
        except CheckpointCorrupt as exc:
            self._failed(cluster, f"{exc}; remove it before new checkpoints can be written after it")
        except (StoreError, ClickHouseError) as exc:  # the store away: tried again at the next poke
            self._failed(cluster, _first_line(exc))
        except Exception as exc:  # noqa: BLE001 - a defect: its traceback is logged, and the server goes on
            self._failed(cluster, _first_line(exc), exc_info=True)
        else:
            self.written += len(written)
            log.info("checkpoints written", extra={"cluster": cluster, "seqs": written, "every": self.every})

    def _failed(self, cluster: str, message: str, exc_info: bool = False) -> None:
        self.errors += 1
        self.last_error = f"cluster {cluster}: {message}"
        log.error("checkpoints of cluster %s not written: %s (tried again when its next events are stored)",
                  cluster, message, extra={"cluster": cluster}, exc_info=exc_info)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__
