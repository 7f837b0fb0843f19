"""Until every reflector has listed once, watch changes and later relists wait in arrival order,
so a relist never overtakes the changes that came before it."""

from __future__ import annotations

import threading

from kubernetes import client

from ingest.kube.reflector import Change, Snapshot
from ingest.kube.resources import BY_KIND
from ingest.kube.watcher import Watcher
from tests.kube.harness import CollectingSink


def _pod(rv: int, phase: str) -> dict:
    return {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns", "resourceVersion": str(rv)}, "status": {"phase": phase}}


def test_relist_arriving_before_sync_does_not_overtake_earlier_changes() -> None:
    sink = CollectingSink()
    # no request is made: items are fed to the consumer directly
    watcher = Watcher(client.ApiClient(), "c", sink, resources=[BY_KIND["Pod"], BY_KIND["Node"]], clock=lambda: "t")
    stop = threading.Event()
    for item in [
        Snapshot("Pod", "", [], "5"),
        Change("Pod", "ADDED", _pod(7, "Pending")),
        Change("Pod", "MODIFIED", _pod(10, "Running")),
        Snapshot("Pod", "", [_pod(10, "Running")], "10"),  # a relist after 410, before Node listed
        Snapshot("Node", "", [], "10"),
    ]:
        watcher._consume(item, stop)
    assert [(e.type, e.resource_version, e.payload["status"]["phase"]) for e in sink.events] == [
        ("upsert", "7", "Pending"), ("upsert", "10", "Running")]
    assert watcher.log.duplicates == 1 and watcher.log.stale == 0


class _BrokenObserver:
    def observe(self, applied: list, world: object) -> list:
        raise KeyError("spec")


def test_a_failing_decision_observer_does_not_stop_the_event_log() -> None:
    sink = CollectingSink()
    watcher = Watcher(client.ApiClient(), "c", sink, resources=[BY_KIND["Pod"]], clock=lambda: "t",
                      observer=_BrokenObserver())
    stop = threading.Event()
    watcher._consume(Snapshot("Pod", "", [_pod(3, "Running")], "3"), stop)
    watcher._consume(Change("Pod", "DELETED", _pod(4, "Running")), stop)
    assert [(e.type, e.resource_version) for e in sink.events] == [("upsert", "3"), ("delete", "4")]
    assert watcher.observer_errors == 2
