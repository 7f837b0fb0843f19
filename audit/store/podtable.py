"""Keeping the ``pods`` table and its series (``audit.store.podschema``) equal to the fold.

After the fold has taken new events, ``PodTable.write`` inserts only what changed: the rows of
pods the fold added or changed since the last write (``LifecycleFold.take_changed``), the policy
and capacity entries appended since, the unhealthy spans that closed since and, when the set of
devices unhealthy right now changed, those open spans. Each row carries the fold's event ``seq``
as its version, so the latest write of a row is the one ``FINAL`` reads. Each write ends with the
``pod_folds`` row saying up to which seq the tables now hold the fold. Writes for one cluster
happen under that cluster's fold lock, in seq order.

``PodTableKeeper`` runs the fold and the write in a thread of its own, woken when a writer has
delivered events: the writer's delivery never waits for the fold (which judges regret with the
allocator and costs far more per event than an insert). A round starts once the writers are
idle (nothing buffered or spooled) and deliveries have paused for ``settle`` seconds, or
``max_lag`` seconds after the first delivery not folded yet, whichever comes first: a writer
running flat out does not share the interpreter with the fold until the table would fall
``max_lag`` behind; fewer, larger rounds pay less often for a round's fixed cost (reading what
it was not handed, taking the lifecycle). The fold is the one the stats endpoints read, so its
work is not added: it is done before a query asks rather than when it does. The events the
writer delivered are handed to the fold with the poke, so a round reads from the store only
what it did not see (another writer's events). They wait as the JSON lines the writer stored,
parsed by the round: strings are not tracked by Python's cycle collector, whereas thousands of
parsed events held until the writer is idle would be, and would bring on full collections of
the heap (each walking every live object) while the writer still runs.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from audit.events import WorldEvent
from audit.metrics.lifecycle import Lifecycle, LifecycleFold, PodLife, UnhealthySpan

log = logging.getLogger(__name__)

InsertColumns = Callable[[str, dict[str, list[Any]]], None]

POD_COLUMNS = ("cluster", "row", "version", "namespace", "pod", "uid", "tenant", "track", "created_ms", "bound_ms",
               "failed_ms", "allocated_ms", "released_ms", "alternatives", "tiers", "first_choice", "fallback",
               "preferred", "allocated", "models", "devices", "h100_eq", "regretted", "asked")


def pod_rows(cluster: str, lives: Sequence[PodLife], rows: Iterable[int], version: int) -> dict[str, list[Any]]:
    """The ``pods`` columns of ``lives[i]`` for each i in ``rows``."""
    out: dict[str, list[Any]] = {name: [] for name in POD_COLUMNS}
    for i in rows:
        p = lives[i]
        values = (cluster, i, version, p.namespace, p.pod, p.uid, p.tenant, p.track, p.created_ms, p.bound_ms,
                  p.failed_ms, p.allocated_ms, p.released_ms, p.alternatives, list(p.tiers), p.first_choice,
                  p.fallback, p.preferred, p.allocated, p.allocated.split("|") if p.allocated else [], p.devices,
                  p.h100_eq, p.regretted, p.asked)
        for name, value in zip(POD_COLUMNS, values, strict=True):
            out[name].append(value)
    return out


@dataclass
class _Written:
    """How much of one cluster's series the table already holds."""

    policies: int = 0
    capacity: int = 0
    closed_spans: int = 0
    open_spans: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    seq: int | None = None  # the fold's seq at the last write


class PodTable:
    """Writes what a fold changed into the pod tables through ``insert(table, columns)``."""

    def __init__(self, insert: InsertColumns) -> None:
        self._insert = insert
        self._written: dict[str, _Written] = {}

    def write(self, fold: LifecycleFold, life: Lifecycle) -> int:
        """Write what changed since the last write of this cluster (``life`` = ``fold.lifecycle()``,
        just taken); returns the number of pod rows written."""
        cluster, version = fold.cluster, max(life.seq, 0)
        done = self._written.setdefault(cluster, _Written())
        if done.seq == life.seq:
            return 0  # nothing folded since
        changed = fold.take_changed()
        try:
            if changed:
                self._insert("pods", pod_rows(cluster, fold.lives, changed, version))
            self._series(fold, life, done, version)
            # last: it vouches for every row and series entry written above
            self._insert("pod_folds", {"cluster": [cluster], "version": [version], "seq": [life.seq],
                                       "end_ms": [life.end_ms], "pods": [len(life.pods)]})
        except BaseException:
            fold.give_back(changed)  # written again (a duplicate row is harmless) with the next fold
            raise
        done.seq = life.seq
        return len(changed)

    def _series(self, fold: LifecycleFold, life: Lifecycle, done: _Written, version: int) -> None:
        cluster = fold.cluster
        # the fold's timelines only grow; before the first instant ends the lifecycle shows the
        # policy in force as a stand-in entry, written again (replaced) once the real one exists
        real_policies = len(fold.policies)
        if len(life.policies) > done.policies:
            new = list(enumerate(life.policies))[done.policies:]
            self._insert("pod_policies", {
                "cluster": [cluster] * len(new), "idx": [i for i, _ in new], "version": [version] * len(new),
                "from_ms": [t for _, (t, _) in new], "policy_name": [p.name for _, (_, p) in new],
                "policy_version": [p.version for _, (_, p) in new],
                "tenants": [[t.name for t in p.tenants] for _, (_, p) in new],
                "weights": [[t.weight for t in p.tenants] for _, (_, p) in new],
                "starvation_ms": [p.starvation_ms for _, (_, p) in new],
                "regret_window_ms": [p.regret_window_ms for _, (_, p) in new]})
            done.policies = real_policies
        if len(life.capacity) > done.capacity:
            new_cap = list(enumerate(life.capacity))[done.capacity:]
            self._insert("pod_capacity", {
                "cluster": [cluster] * len(new_cap), "idx": [i for i, _ in new_cap],
                "version": [version] * len(new_cap), "from_ms": [t for _, (t, _) in new_cap],
                "h100_eq": [c for _, (_, c) in new_cap]})
            done.capacity = len(life.capacity)
        closed = fold.spans[done.closed_spans:]
        open_now = [s for s in life.unhealthy if s.end_ms is None]
        open_keys = frozenset((s.device, s.start_ms) for s in open_now)
        spans: list[UnhealthySpan] = list(closed)
        if open_keys != done.open_spans:
            spans.extend(open_now)
        if spans:
            self._insert("unhealthy_spans", {
                "cluster": [cluster] * len(spans), "device": [s.device for s in spans],
                "start_ms": [s.start_ms for s in spans], "version": [version] * len(spans),
                "model": [s.model for s in spans], "end_ms": [s.end_ms for s in spans]})
        done.closed_spans = len(fold.spans)
        done.open_spans = open_keys


class PodTableKeeper:
    """A thread that folds and writes a cluster's pod tables whenever events of it were delivered."""

    def __init__(self, sync: Callable[[str, list[WorldEvent]], Any], busy: Callable[[], bool] = lambda: False,
                 settle: float = 0.5, max_lag: float = 30.0, stale: Callable[[], Iterable[str]] | None = None) -> None:
        self._sync = sync
        # clusters whose stored events run past the fold (written by another process): looked for
        # every ``max_lag`` seconds while nothing is due, and folded like a delivery
        self._stale = stale
        self._busy_writers = busy
        self.settle = settle
        self.max_lag = max_lag
        self._first = self._last = 0.0  # monotonic times of the first and last poke not folded yet
        self._due: dict[str, list[str]] = {}  # cluster -> its events delivered since the last round, as JSON
        self._waiters = 0  # callers of wait_idle: a round starts at once for them
        self._busy = False
        self._cond = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="claimtrail-pods", daemon=True)
        self._thread.start()

    def poke_clusters(self, clusters: Iterable[str]) -> None:
        """Clusters with stored events the fold has not seen: due, with nothing handed over."""
        with self._cond:
            now = time.monotonic()
            if not self._due:
                self._first = now
            self._last = now - self.settle  # nothing is arriving: no pause to wait for
            for cluster in clusters:
                self._due.setdefault(cluster, [])
            self._cond.notify_all()

    def poke(self, clusters: Sequence[str], lines: Sequence[str]) -> None:
        """Events now stored, each given by its cluster and its JSON line (``rows.event_json``):
        their clusters are due, and the fold may take them without reading them back."""
        if len(clusters) != len(lines):
            raise ValueError(f"{len(clusters)} clusters for {len(lines)} event lines")
        with self._cond:
            now = time.monotonic()
            if not self._due:
                self._first = now
            self._last = now
            for cluster, line in zip(clusters, lines, strict=True):
                self._due.setdefault(cluster, []).append(line)
            self._cond.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Fold and write every cluster poked so far now, and wait until it is done; False on timeout."""
        with self._cond:
            self._waiters += 1
            self._cond.notify_all()
            try:
                return self._cond.wait_for(lambda: not self._due and not self._busy, timeout)
            finally:
                self._waiters -= 1

    def close(self) -> None:
        """Fold what is still due, then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()

    def _look_for_stale(self) -> None:
        if self._stale is None:
            return
        with self._cond:
            if self._cond.wait_for(lambda: self._due or self._closed, self.max_lag):
                return
        try:
            stale = list(self._stale())
        except Exception:  # the store is away: looked at again later
            log.warning("cannot look for events stored by others", exc_info=True)
            return
        if stale:
            self.poke_clusters(stale)

    def _loop(self) -> None:
        while True:
            self._look_for_stale()
            with self._cond:
                self._cond.wait_for(lambda: self._due or self._closed)
                while not self._closed and not self._waiters:
                    now = time.monotonic()
                    deadline = self._first + self.max_lag
                    if now >= deadline or (now >= self._last + self.settle and not self._busy_writers()):
                        break
                    # a poke meanwhile moves the start later; busy writers are looked at again
                    self._cond.wait(min(deadline, max(self._last + self.settle, now + self.settle)) - now)
                if not self._due:
                    return  # closed, everything delivered is folded
                due, self._due = self._due, {}
                self._busy = True
            for cluster in sorted(due):
                try:
                    self._sync(cluster, [WorldEvent.from_dict(json.loads(line)) for line in due[cluster]])
                except Exception:  # the store is away: the next delivery pokes it again
                    log.warning("pod table of cluster %s not updated", cluster, exc_info=True)
            with self._cond:
                self._busy = False
                self._cond.notify_all()
