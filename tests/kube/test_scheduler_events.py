"""Scheduler ``FailedScheduling`` events become unschedulable records of the right pod, at the
right time, whatever shape of Event the scheduler wrote."""

from __future__ import annotations

from typing import Any

import pytest

from audit.records import DecisionRecord
from ingest.kube.observe import DecisionObserver
from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import FIXED_TIME, CollectingSink, make_watcher, run_until_caught_up

OLD_UID = "5a0e6f41-0009-4a8d-8f1e-000000000001"
NEW_UID = "5a0e6f41-0009-4a8d-8f1e-000000000002"


def _pod(uid: str, created: str = "2026-11-29T13:00:00Z") -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "job-0", "namespace": "team-b", "uid": uid, "creationTimestamp": created},
        "spec": {"containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
        "status": {"phase": "Pending"},
    }


def _event(name: str, uid: str, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": "team-b"},
        "involvedObject": {"kind": "Pod", "namespace": "team-b", "name": "job-0", "uid": uid},
        "reason": "FailedScheduling", "type": "Warning",
        "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu.",
        **fields,
    }


def _observe(objects: list[dict[str, Any]]) -> list[DecisionRecord]:
    """Objects before ``LISTED`` are what the first list shows; the rest happen while watched."""
    with FakeApiServer() as server:
        for obj in objects:
            if obj is LISTED:
                server.release_all()
            elif obj.get("delete"):
                server.delete("Pod", "job-0", "team-b")
            else:
                server.add(obj)
        if not any(o is LISTED for o in objects):
            server.release_all()
        sink = CollectingSink()
        observer = DecisionObserver("test-cluster", lambda: FIXED_TIME, check_allocations=False)
        run_until_caught_up(server, make_watcher(server, sink, observer=observer))
    return sink.records


LISTED: dict[str, Any] = {}
OLD_EVENT = _event("job-0.0001", OLD_UID, count=3, lastTimestamp="2026-11-29T12:30:00Z")
NEW_EVENT = _event("job-0.0002", NEW_UID, count=1, lastTimestamp="2026-11-29T13:00:05Z")

SAME_NAME = {
    # a Job or StatefulSet pod recreated under its name: the first pod's events outlive it
    "old_events_listed_with_the_successor": ([_pod(NEW_UID), OLD_EVENT, NEW_EVENT], [(NEW_UID, 1, 5000)]),
    "old_events_only": ([_pod(NEW_UID), OLD_EVENT], []),
    "both_pods_seen": ([_pod(OLD_UID, "2026-11-29T12:00:00Z"), OLD_EVENT, LISTED, {"delete": True}, _pod(NEW_UID),
                        NEW_EVENT],
                       [(OLD_UID, 3, 1800000), (NEW_UID, 1, 5000)]),
}


@pytest.mark.parametrize(("objects", "expected"), list(SAME_NAME.values()), ids=list(SAME_NAME))
def test_scheduler_events_count_for_the_pod_they_name_by_uid(objects: list[dict[str, Any]], expected: list) -> None:
    got = sorted((r.pod_uid, r.attempt, r.wait_ms) for r in _observe(objects))
    assert got == sorted(expected)


# kube-scheduler writes events.k8s.io/v1 Events: read as core/v1 they carry eventTime (the first
# occurrence) and, from the second occurrence on, series.count and series.lastObservedTime
SHAPES = {
    "core_v1_count": (_event("job-0.1", NEW_UID, count=2, firstTimestamp="2026-11-29T13:00:01Z",
                             lastTimestamp="2026-11-29T13:05:01Z"), (2, "2026-11-29T13:05:01Z", 301000)),
    "events_v1_first": (_event("job-0.1", NEW_UID, eventTime="2026-11-29T13:00:01.000000Z"),
                        (1, "2026-11-29T13:00:01.000000Z", 1000)),
    "events_v1_series": (_event("job-0.1", NEW_UID, eventTime="2026-11-29T13:00:01.000000Z",
                                series={"count": 3, "lastObservedTime": "2026-11-29T13:10:01.000000Z"}),
                         (3, "2026-11-29T13:10:01.000000Z", 601000)),
}


@pytest.mark.parametrize(("event", "expected"), list(SHAPES.values()), ids=list(SHAPES))
def test_a_repeated_scheduling_failure_is_timed_at_its_last_occurrence(event: dict[str, Any], expected: tuple) -> None:
    (record,) = _observe([_pod(NEW_UID), event])
    assert (record.attempt, record.time, record.wait_ms) == expected
