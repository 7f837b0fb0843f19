"""Shared set-up for watcher tests: load YAML fixtures into the local API server, run a watcher
until it has caught up with the server, and collect what it wrote; or run one watcher process on a
sink that resumes from what it holds, as a restarted process would."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from audit.events import WorldEvent
from audit.records import DecisionRecord
from ingest.kube.observe import DecisionObserver
from ingest.kube.reflector import Backoff
from ingest.kube.watcher import Watcher
from tests.kube.apiserver import FakeApiServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kube"
FIXED_TIME = "2026-11-29T12:00:00.000000Z"


class CollectingSink:
    """A sink that keeps what it was given, in order (the API/DSN sinks are tested elsewhere)."""

    def __init__(self) -> None:
        self.events: list[WorldEvent] = []
        self.records: list[DecisionRecord] = []

    def write_events(self, events: list[WorldEvent]) -> None:
        self.events.extend(events)

    def write_records(self, records: list[DecisionRecord]) -> None:
        self.records.extend(records)

    def flush(self) -> bool:
        return True

    def close(self) -> None:
        pass


def load_docs(name: str) -> list[dict[str, Any]]:
    with open(FIXTURES / name) as fh:
        return [d for d in yaml.safe_load_all(fh) if d]


def apply_changes(server: FakeApiServer, docs: Iterable[dict[str, Any]]) -> None:
    """Each document is an object's new state, or a top-level ``delete:`` naming one to remove."""
    for doc in docs:
        if "delete" in doc:
            d = doc["delete"]
            server.delete(d["kind"], d["name"], d.get("namespace", ""))
        else:
            server.add(doc)


def populate(server: FakeApiServer, initial: str = "cluster.yaml", changes: str | None = "changes.yaml") -> None:
    for obj in load_docs(initial):
        server.add(obj)
    server.release_all()
    apply_changes(server, load_docs(changes) if changes else [])


def api_client(server: FakeApiServer) -> client.ApiClient:
    cfg = client.Configuration()
    cfg.host = server.url
    return client.ApiClient(cfg)


def run_until_caught_up(server: FakeApiServer, watcher: Watcher, limit_s: float = 30.0) -> None:
    """Run the watcher until every reflector holds the server's revision and all is written.

    The limit only guards against a hang; no test asserts on how long this takes.
    """
    stop = threading.Event()
    thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_caught_up(server, watcher, limit_s)
    finally:
        stop.set()
        thread.join(timeout=5)


def wait_caught_up(server: FakeApiServer, watcher: Watcher, limit_s: float = 30.0) -> None:
    """Wait until a running watcher's reflectors hold the server's revision and all is written."""
    target = str(server.revision)
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        served = [r for r in watcher.reflectors if r.served]
        if all(r.resource_version == target for r in served) and watcher.idle():
            return
        time.sleep(0.02)
    raise AssertionError(
        "watcher did not catch up: " + ", ".join(f"{r.resource.kind}@{r.resource_version}" for r in watcher.reflectors)
    )


def fast_backoff() -> Backoff:
    return Backoff(base=0.005, cap=0.02)


def make_watcher(server: FakeApiServer, sink: CollectingSink, **kw: Any) -> Watcher:
    kw.setdefault("backoff", fast_backoff)
    return Watcher(api_client(server), "test-cluster", sink, clock=lambda: FIXED_TIME, **kw)


@dataclass
class Written:
    """What one watcher run handed its sink, and what the sink's target quarantined."""

    events: list[WorldEvent] = field(default_factory=list)
    records: list[DecisionRecord] = field(default_factory=list)
    quarantined: int = 0


class Recording:
    """The sink under test, keeping what the watcher wrote through it."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self.written = Written()

    def write_events(self, events: list[WorldEvent]) -> None:
        self.written.events += events
        self.sink.write_events(events)

    def write_records(self, records: list[DecisionRecord]) -> None:
        self.written.records += records
        self.sink.write_records(records)

    def flush(self) -> Any:
        return self.sink.flush()

    def close(self) -> None:
        pass


class RecordsLost:
    """A sink that takes the events it is given and never the records: what a watcher leaves that
    stops (is killed, crashes) after its sink took a batch's events and before it took the
    records those events imply."""

    def __init__(self, sink: Any) -> None:
        self.sink = sink

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sink, name)

    def write_records(self, records: list[DecisionRecord]) -> None:
        pass


Target = Callable[[], Any]  # a new sink on the same target, as a restarted process opens it


def watch_once(server: FakeApiServer, target: Target, cluster: str,
               while_running: Iterable[dict[str, Any]] = (), *, check_allocations: bool = False) -> Written:
    """One watcher process: read back what the sink holds, resume, catch up, make each change of
    ``while_running`` once it has seen the one before (the cluster's order, whatever order its
    reflectors deliver in), stop, flush. ``check_allocations``: the observer re-runs each
    allocation through the allocator (its records then carry the re-run's tiers)."""
    sink = target()
    try:
        stored = sink.stored_world(cluster)
        assert stored is not None
        recording = Recording(sink)
        watcher = Watcher(api_client(server), cluster, recording, clock=lambda: FIXED_TIME, backoff=fast_backoff,
                          next_seq=0 if stored.last_seq is None else stored.last_seq + 1,
                          observer=DecisionObserver(cluster, lambda: FIXED_TIME,
                                                    check_allocations=check_allocations))
        watcher.resume(stored)
        stop = threading.Event()
        thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
        thread.start()
        try:
            wait_caught_up(server, watcher)
            for change in while_running:
                apply_changes(server, [change])
                wait_caught_up(server, watcher)
        finally:
            stop.set()
            thread.join(timeout=5)
        assert sink.flush() is True
        recording.written.quarantined = getattr(sink, "quarantined", 0)
        return recording.written
    finally:
        sink.close()
