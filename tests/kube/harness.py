"""Shared set-up for watcher tests: load YAML fixtures into the local API server, run a watcher
until it has caught up with the server, and collect what it wrote."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from audit.events import WorldEvent
from audit.records import DecisionRecord
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

    def close(self) -> None:
        pass


def load_docs(name: str) -> list[dict[str, Any]]:
    with open(FIXTURES / name) as fh:
        return [d for d in yaml.safe_load_all(fh) if d]


def populate(server: FakeApiServer, initial: str = "cluster.yaml", changes: str | None = "changes.yaml") -> None:
    for obj in load_docs(initial):
        server.add(obj)
    server.release_all()
    for doc in load_docs(changes) if changes else []:
        if "delete" in doc:
            d = doc["delete"]
            server.delete(d["kind"], d["name"], d.get("namespace", ""))
        else:
            server.add(doc)


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
    target = str(server.revision)
    deadline = time.monotonic() + limit_s
    try:
        while time.monotonic() < deadline:
            served = [r for r in watcher.reflectors if r.served]
            if all(r.resource_version == target for r in served) and watcher.idle():
                return
            time.sleep(0.02)
        raise AssertionError(
            "watcher did not catch up: " + ", ".join(f"{r.resource.kind}@{r.resource_version}" for r in watcher.reflectors)
        )
    finally:
        stop.set()
        thread.join(timeout=5)


def fast_backoff() -> Backoff:
    return Backoff(base=0.005, cap=0.02)


def make_watcher(server: FakeApiServer, sink: CollectingSink, **kw: Any) -> Watcher:
    kw.setdefault("backoff", fast_backoff)
    return Watcher(api_client(server), "test-cluster", sink, clock=lambda: FIXED_TIME, **kw)
