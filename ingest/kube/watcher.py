"""Run one reflector per watched resource and feed one ordered consumer.

Reflector threads only read from the API server; a single consumer applies what they saw to the
event log (so ``seq`` is assigned in one place), derives observed decisions, and writes events
and records to the sink, retrying the sink with backoff so nothing accepted is lost; ``run``
returns once the sink has delivered it all (or given up waiting, leaving it in its spool).

``resume`` seeds the event log and the observer, before ``run``, with the world the sink already
holds of the cluster: the first lists are then a diff against what was logged before, as every
relist is. The decisions that world implies and the sink does not hold (their events were
written, their records not, when the last watcher stopped) are written first thing in ``run``.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from kubernetes import client

from audit.events import WorldEvent
from audit.records import DecisionRecord
from audit.store.ports import PodDecision
from audit.timestamps import format_utc
from ingest.kube.eventlog import Applied, EventLog
from ingest.kube.reflector import Backoff, Change, Reflector, Snapshot
from ingest.kube.resources import WATCHED, WatchedResource
from ingest.sinks import StoredWorld

log = logging.getLogger(__name__)


class Sink(Protocol):
    def write_events(self, events: list[WorldEvent]) -> Any: ...
    def write_records(self, records: list[DecisionRecord]) -> Any: ...
    def flush(self) -> Any: ...
    def close(self) -> Any: ...


class Observer(Protocol):
    def observe(self, applied: list[Applied], world: EventLog) -> list[DecisionRecord]: ...
    def restore(self, world: EventLog, decisions: Iterable[PodDecision],
                reservations: Mapping[str, Sequence[str]]) -> list[DecisionRecord]: ...


def utc_now() -> str:
    return format_utc(datetime.now(UTC))


class Watcher:
    def __init__(
        self,
        api_client: client.ApiClient,
        cluster: str,
        sink: Sink,
        *,
        namespaces: Sequence[str] = (),
        observer: Observer | None = None,
        clock: Callable[[], str] = utc_now,
        next_seq: int = 0,
        resources: Sequence[WatchedResource] = WATCHED,
        backoff: Callable[[], Backoff] = Backoff,
        page_size: int = 500,
        watch_timeout_seconds: int = 300,
    ) -> None:
        self.sink = sink
        self.observer = observer
        self.resources = tuple(resources)
        self.log = EventLog(cluster, clock, next_seq=next_seq)
        self.queue: queue.Queue[Snapshot | Change] = queue.Queue()
        self.reflectors: list[Reflector] = []
        # a namespace named twice is watched once: two reflectors of one scope would each relist
        # it at their own resourceVersion, and one's older list delete what the other just added
        namespaces = self.namespaces = list(dict.fromkeys(namespaces))
        for res in resources:
            scopes: Sequence[str | None] = namespaces if (namespaces and res.namespaced) else [None]
            for ns in scopes:
                self.reflectors.append(
                    Reflector(
                        api_client, res, self.queue.put, namespace=ns, page_size=page_size,
                        watch_timeout_seconds=watch_timeout_seconds, backoff=backoff(),
                    )
                )
        self.applied_count = 0
        self.observer_errors = 0
        # like an informer's cache sync: watch changes wait until every reflector has listed
        # once, so the first observed allocations are checked against a complete inventory
        self._unsynced = {(r.resource.kind, r.scope) for r in self.reflectors}
        self._held: list[Snapshot | Change] = []
        self._busy = threading.Event()
        self._sink_backoff = backoff()
        self._resumed: list[DecisionRecord] = []  # derived by ``resume``, written by ``run``

    def resume(self, stored: StoredWorld) -> int:
        """Hold the objects of ``stored`` that this watcher watches (its kinds, in its namespaces)
        as already logged, and the Policy object in force there, which no API server lists (its
        device-model table names the models of observed decisions, as the store's fold of the log
        names them), and give the observer them and the decisions stored about their pods;
        the decisions it derives from them that the sink does not hold are written when ``run``
        starts. Call before ``run``. Returns how many objects were restored."""
        watched = {r.kind: r for r in self.resources if r.world}
        policy = stored.objects.get("Policy", {}).get(stored.policy) if stored.policy else None
        restored = self.log.restore([
            *((kind, obj) for kind, by_key in sorted(stored.objects.items()) if kind in watched
              for _, obj in sorted(by_key.items())
              if not (self.namespaces and watched[kind].namespaced
                      and (obj.get("metadata") or {}).get("namespace") not in self.namespaces)),
            *([("Policy", policy)] if policy is not None else []),
        ])
        if self.observer is not None:
            try:
                self._resumed = self.observer.restore(self.log, stored.decisions, stored.reservations)
            except Exception:  # noqa: BLE001 - as in observe: one bad object must not stop the event log
                self.observer_errors += 1
                log.exception("could not derive decisions from the stored world")
            if self._resumed:
                log.info("recording decisions the sink's world implies and it does not hold",
                         extra={"decisions": len(self._resumed)})
        return restored

    def run(self, stop: threading.Event) -> None:
        resumed, self._resumed = self._resumed, []
        self._write(lambda: self.sink.write_records(resumed) if resumed else None, stop)
        threads = [
            threading.Thread(target=r.run, args=(stop,), name=f"watch-{r.resource.kind}-{r.scope}", daemon=True)
            for r in self.reflectors
        ]
        for t in threads:
            t.start()
        try:
            while not stop.is_set():
                try:
                    item = self.queue.get(timeout=0.05)
                except queue.Empty:
                    if self._unsynced:
                        # a reflector whose kind is not served never lists: do not wait for it
                        self._consume_sync_progress(stop)
                    continue
                self._busy.set()
                try:
                    self._consume(item, stop)
                finally:
                    self._busy.clear()
        finally:
            for r in self.reflectors:
                r.stop()
            for t in threads:
                t.join(timeout=2)
            self._drain(stop)
            # A leader hands its Lease on when this returns, and the next one starts from what the
            # sink's target holds: what the sink still buffers would reach it too late (its events
            # logged a second time, its records derived again, either quarantined as conflicts)
            if not self.sink.flush():
                log.warning("stopping before the sink delivered everything: the rest waits in its spool")

    def _drain(self, stop: threading.Event) -> None:
        """Apply and write what reflectors already delivered, so a clean shutdown loses nothing."""
        self._consume_sync_progress(stop, force=True)
        while True:
            try:
                item = self.queue.get_nowait()
            except queue.Empty:
                return
            self._consume(item, stop)

    def idle(self) -> bool:
        """True when everything reflectors delivered has been applied and written."""
        return self.queue.empty() and not self._busy.is_set() and not self._held

    def synced(self) -> bool:
        return not self._unsynced

    def _consume(self, item: Snapshot | Change, stop: threading.Event) -> None:
        if not self._unsynced:
            self._apply(item, stop)
            return
        if isinstance(item, Change) or (item.kind, item.scope) not in self._unsynced:
            # watch changes, and relists of reflectors already synced, keep their order behind
            # the initial lists still to come
            self._held.append(item)
            return
        self._unsynced.discard((item.kind, item.scope))
        self._apply(item, stop)
        self._consume_sync_progress(stop)

    def _consume_sync_progress(self, stop: threading.Event, force: bool = False) -> None:
        if force:
            self._unsynced.clear()
        self._unsynced -= {(r.resource.kind, r.scope) for r in self.reflectors if not r.served}
        if not self._unsynced:
            held, self._held = self._held, []
            for change in held:
                self._apply(change, stop)

    def _apply(self, item: Snapshot | Change, stop: threading.Event) -> None:
        applied = self.log.apply(item)
        if not applied:
            return
        self.applied_count += len(applied)
        events = [a.event for a in applied if a.event is not None]
        records: list[DecisionRecord] = []
        if self.observer:
            try:
                records = self.observer.observe(applied, self.log)
            except Exception:  # noqa: BLE001 - one bad object must not stop the world event log
                self.observer_errors += 1
                log.exception("could not derive decisions from a change", extra={"kinds": sorted({a.kind for a in applied})})
        self._write(lambda: self.sink.write_events(events) if events else None, stop)
        self._write(lambda: self.sink.write_records(records) if records else None, stop)

    def _write(self, action: Callable[[], Any], stop: threading.Event) -> None:
        while True:
            try:
                action()
                self._sink_backoff.reset()
                return
            except Exception as exc:  # noqa: BLE001 - any sink failure is retried, never dropped
                if stop.is_set():
                    log.error("stopping with unwritten data", extra={"error": str(exc)})
                    raise
                delay = self._sink_backoff.next_delay()
                log.warning("sink write failed, retrying", extra={"error": str(exc), "delay_s": delay})
                stop.wait(delay)
