"""The pod lifecycle of each cluster, kept current from the store's event log.

Every stats figure is computed from the pod lifecycle (``audit.metrics``), which is a fold of the
world event log. The store keeps one fold per cluster in memory and, before answering, folds the
events stored since it last looked — only a contiguous run of ``seq`` (an event still missing
stops the fold there until it arrives, so the rows never skip a change). Folding is incremental:
a day of a 64-node cluster costs seconds once, then only what arrived since. With a
``PodTable``, each fold that took new events also writes what it changed into the store's
``pods`` table and series (``audit.store.podtable``).

A process that has not folded a cluster yet first looks at those tables: when they are written
up to the last event stored, it answers from the lifecycle read back from them
(``audit.store.podload``) and folds nothing. The first event stored past them starts the fold
from the beginning of the log, as when no table says anything: the tables hold the fold's rows,
not the world state it would continue from.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from audit.events import WorldEvent
from audit.metrics.lifecycle import Lifecycle, LifecycleFold
from audit.store.podload import stored_lifecycle
from audit.store.podtable import PodTable

log = logging.getLogger(__name__)


class LifecycleCache:
    def __init__(self, table: PodTable | None = None) -> None:
        self._table = table
        self._folds: dict[str, LifecycleFold] = {}
        self._stored: dict[str, Lifecycle] = {}  # read back from the pod tables, while no fold exists
        self._looked: set[str] = set()  # clusters whose tables were read (once per process)
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, cluster: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(cluster, threading.Lock())

    def folded_seq(self, cluster: str) -> int:
        """The seq of the last event folded for ``cluster`` (-1: none)."""
        fold = self._folds.get(cluster)
        if fold is not None:
            return fold.world.seq
        stored = self._stored.get(cluster)
        return stored.seq if stored is not None else -1

    def current(self, store: Any, cluster: str, known: Sequence[WorldEvent] = ()) -> Lifecycle:
        """The cluster's lifecycle with every stored event folded (up to the first missing seq).
        ``known``: events of the cluster known to be stored (a writer's delivered batch), folded
        without reading them back while they continue the fold's seq."""
        with self._lock(cluster):
            fold = self._folds.get(cluster)
            if fold is None:
                stored = self._read_back(store, cluster)
                if stored is not None:
                    return stored
                fold = self._folds[cluster] = LifecycleFold(cluster)
            for ev in sorted(known, key=lambda e: e.seq):
                if ev.seq == fold.world.seq + 1:
                    fold.apply(ev)
                elif ev.seq > fold.world.seq:
                    break  # a gap: the store has what comes between
            top = store.max_seq(cluster)
            if top is not None and top > fold.world.seq:
                for ev in store.events(cluster, fold.world.seq, top):
                    if ev.seq != fold.world.seq + 1:
                        break  # a gap: wait for the missing event rather than fold past it
                    fold.apply(ev)
            life = fold.lifecycle()
            if self._table is not None:
                self._table.write(fold, life)
            return life

    def _read_back(self, store: Any, cluster: str) -> Lifecycle | None:
        """The lifecycle the pod tables hold, while they are written up to the last stored event."""
        if self._table is None:
            return None
        if cluster not in self._looked:
            self._looked.add(cluster)
            found = store.insight(stored_lifecycle, cluster)
            if found is not None:
                self._stored[cluster] = found
                log.info("pod lifecycle of cluster %s read back from the pod tables at seq %d (%d pods)", cluster,
                         found.seq, len(found.pods))
        stored = self._stored.get(cluster)
        # asked after the tables were read: a fold (here or in another process) writes the tables
        # only after the events it folded are stored, so rows newer than the mark imply a later seq
        if stored is not None and store.max_seq(cluster) != stored.seq:
            del self._stored[cluster]  # events past the tables: only the fold from the start can take them
            return None
        return stored
