"""A restarted watcher goes on from the world its sink holds, through each sink: the store on chDB,
the API of a real ``serve`` on loopback, and JSON lines files.

Each case runs a watcher against the local API server until it has caught up, stops it, changes
the cluster (or not) as happened while no watcher ran, and runs a new watcher on a new sink of the
same target, as a restarted process would. What the second run writes is exactly what the gap
changed, and the records of decisions whose events the sink took from a watcher that lost the
records; nothing is quarantined."""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from audit.events import WorldEvent
from audit.records import DecisionRecord, decision_id
from ingest.kube.eventlog import EventLog
from ingest.kube.lease import LeaseElector
from ingest.kube.observe import DecisionObserver
from ingest.kube.watcher import Watcher
from ingest.sinks import FileSink, HttpSink, StoredWorld, StoreSink
from tests.api.conftest import TOKENS, start_server, stop
from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import (
    FIXED_TIME,
    Recording,
    RecordsLost,
    Target,
    api_client,
    apply_changes,
    fast_backoff,
    load_docs,
    watch_once,
)

TRAIN_POD = "5a0e6f41-0001-4a8d-8f1e-6b2b7c9d0001"
TRAIN_CLAIM = "7d1c2b9e-0001-4c55-9a51-1f0e5d3a0001"
LEGACY_POD = "5a0e6f41-0002-4a8d-8f1e-6b2b7c9d0002"

CHANGES = load_docs("changes.yaml")
FIRST_DELETE = next(i for i, d in enumerate(CHANGES) if "delete" in d)
# changes.yaml up to its first delete: train-0 failed once, then got its claim and runs on node-a,
# legacy-0 runs on node-b with a device-plugin GPU
RUNNING = CHANGES[:FIRST_DELETE]
# up to the scheduler's FailedScheduling event: train-0 pending, its claim not allocated yet
PENDING = CHANGES[:3]
ALLOCATED = CHANGES[3:5]  # train-0's claim allocated on node-a, train-0 bound there
LEGACY_BOUND = CHANGES[5:6]  # legacy-0 bound to node-b with a device-plugin GPU


def _standalone(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``docs`` with train-0's claim created directly (standalone) instead of from its template."""
    out = copy.deepcopy(docs)
    for doc in out:
        if doc.get("kind") == "ResourceClaim":
            doc["metadata"].pop("annotations")
        elif doc.get("kind") == "Pod" and doc["metadata"]["name"] == "train-0":
            doc["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "train-0-gpu-5x8q2"}]
    return out


@pytest.fixture(scope="module")
def chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("resume-store")


@pytest.fixture(scope="module")
def api_base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    srv, proc = start_server(tmp_path_factory.mktemp("resume-api"))
    try:
        yield srv.base
    finally:
        stop(proc)


@pytest.fixture(params=["store", "http", "file"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Target:
    """Sinks of one target for one test; every test names a cluster of its own."""
    if request.param == "store":
        dsn = f"chdb://{request.getfixturevalue('chdb_dir')}/db"
        return lambda: StoreSink(dsn, spool_dir=str(tmp_path / "spool"), max_delay=0.05)
    if request.param == "http":
        base = request.getfixturevalue("api_base")
        return lambda: HttpSink(base, token=TOKENS["admin"], spool_dir=str(tmp_path / "spool"), max_delay=0.05,
                                backoff_base=0.02)
    return lambda: FileSink(str(tmp_path / "out.jsonl"))


def _cluster(request: pytest.FixtureRequest) -> str:
    return f"{request.node.originalname.removeprefix('test_')}-{request.node.callspec.id}"


def _stored(target: Target, events: list[WorldEvent]) -> None:
    """Events a sink of ``target``'s kind holds before a watcher starts."""
    sink = target()
    try:
        sink.write_events(events)
        assert sink.flush() is True
    finally:
        sink.close()


def _started(server: FakeApiServer, changes: list[dict[str, Any]]) -> None:
    apply_changes(server, load_docs("cluster.yaml"))
    server.release_all()
    apply_changes(server, changes)


def test_a_restart_on_an_unchanged_cluster_writes_nothing(request: pytest.FixtureRequest, target: Target) -> None:
    cluster = _cluster(request)
    with FakeApiServer() as server:
        _started(server, RUNNING)
        first = watch_once(server, target, cluster)
        second = watch_once(server, target, cluster)
    assert (len(first.events), sorted((r.pod, r.outcome) for r in first.records), first.quarantined) == (
        11, [("legacy-0", "allocated"), ("train-0", "allocated"), ("train-0", "unschedulable")], 0)
    assert (second.events, second.records, second.quarantined) == ([], [], 0)


def test_an_object_deleted_while_no_watcher_ran_is_logged_deleted(request: pytest.FixtureRequest,
                                                                  target: Target) -> None:
    cluster = _cluster(request)
    with FakeApiServer() as server:
        _started(server, RUNNING)
        first = watch_once(server, target, cluster)
        server.delete("Pod", "legacy-0", "team-b")
        second = watch_once(server, target, cluster)
    assert [(e.seq, e.type, e.object_kind, e.namespace, e.name) for e in second.events] == [
        (len(first.events), "delete", "Pod", "team-b", "legacy-0")]
    assert (second.records, second.quarantined) == ([], 0)


def test_a_pod_allocated_while_no_watcher_ran_gets_its_decision_once(request: pytest.FixtureRequest,
                                                                     target: Target) -> None:
    cluster = _cluster(request)
    with FakeApiServer() as server:
        _started(server, PENDING)
        first = watch_once(server, target, cluster)
        apply_changes(server, CHANGES[len(PENDING):len(PENDING) + 2])  # the claim allocated, the pod bound
        second = watch_once(server, target, cluster)
        third = watch_once(server, target, cluster)
    assert [(r.pod, r.outcome, r.attempt) for r in first.records] == [("train-0", "unschedulable", 1)]
    assert sorted((e.type, e.object_kind, e.name) for e in second.events) == [
        ("upsert", "Pod", "train-0"), ("upsert", "ResourceClaim", "train-0-gpu-5x8q2")]
    assert [(r.decision_id, r.outcome, r.node) for r in second.records] == [
        (decision_id(cluster, TRAIN_CLAIM, 0), "allocated", "node-a")]
    assert (second.quarantined, third.events, third.records, third.quarantined) == (0, [], [], 0)


def test_another_clusters_history_in_the_sink_is_not_mixed_in(request: pytest.FixtureRequest,
                                                              target: Target) -> None:
    cluster = _cluster(request)
    other = cluster + "-other"
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", "uid": "another", "resourceVersion": "9"}}
    gone = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-z", "uid": "z", "resourceVersion": "3"}}
    # the other cluster's log: a node-a of its own, a node-z ours never had
    _stored(target, [WorldEvent(cluster=other, seq=s, time=FIXED_TIME, type="upsert", object_kind="Node",
                                namespace="", name=o["metadata"]["name"], payload=o, resource_version=rv)
                     for s, (o, rv) in enumerate([(node, "9"), (gone, "3")])])
    with FakeApiServer() as server:
        _started(server, RUNNING)
        first = watch_once(server, target, cluster)
        second = watch_once(server, target, cluster)
    assert [e.seq for e in first.events] == list(range(11))  # ours start at 0, whatever the other holds
    assert (second.events, second.records, second.quarantined) == ([], [], 0)


LOST = {
    # what a watcher wrote whole, what a watcher then saw while its records were lost (events
    # written) -> the records the restarted watcher writes: pod, what the id is keyed on, outcome,
    # attempt, node, time, wait_ms
    "a_template_claims_allocation": (PENDING, ALLOCATED, [
        ("train-0", TRAIN_CLAIM, "allocated", 0, "node-a", "2026-11-29T10:00:04Z", 4000)]),
    "a_standalone_claims_allocation": (_standalone(PENDING), _standalone(ALLOCATED), [
        ("train-0", f"{TRAIN_CLAIM}/{TRAIN_POD}", "allocated", 0, "node-a", "2026-11-29T10:00:04Z", 4000)]),
    "a_device_plugin_pods_binding": (RUNNING[:5], LEGACY_BOUND, [
        ("legacy-0", LEGACY_POD, "allocated", 0, "node-b", "2026-11-29T10:01:02Z", 2000)]),
    # not part of the world: recovered from the cluster, which lists the event again
    "a_scheduling_failure_whose_event_is_still_listed": (PENDING[:2], PENDING[2:], [
        ("train-0", TRAIN_POD, "unschedulable", 1, "", "2026-11-29T10:00:01Z", 1000)]),
}


@pytest.mark.parametrize(("before", "lost", "expected"), list(LOST.values()), ids=list(LOST))
def test_a_decision_whose_record_was_lost_after_its_events_is_recorded_on_restart(
        request: pytest.FixtureRequest, target: Target, before: list[dict[str, Any]], lost: list[dict[str, Any]],
        expected: list[tuple[str, str, str, int, str, str, int]]) -> None:
    cluster = _cluster(request)
    with FakeApiServer() as server:
        _started(server, before)
        first = watch_once(server, target, cluster)
        crashed = watch_once(server, lambda: RecordsLost(target()), cluster, while_running=lost)
        resumed = watch_once(server, target, cluster)
        again = watch_once(server, target, cluster)

    def fields(records: list[DecisionRecord]) -> list[tuple[str, str, str, int, str, str, int]]:
        return [(r.pod, r.decision_id, r.outcome, r.attempt, r.node, r.time, r.wait_ms) for r in records]

    def apart_from_position(r: DecisionRecord) -> dict[str, Any]:
        return {k: v for k, v in r.to_dict().items() if k not in ("seq", "output_digest")}

    wanted = [(pod, decision_id(cluster, key, attempt), outcome, attempt, node, time, wait)
              for pod, key, outcome, attempt, node, time, wait in expected]
    assert (fields(crashed.records), fields(resumed.records), resumed.events) == (wanted, wanted, [])
    # as first derived, but for the world position: the end of the log it was derived from
    assert [apart_from_position(r) for r in resumed.records] == [apart_from_position(r) for r in crashed.records]
    assert [r.seq for r in resumed.records] == [len(first.events) + len(crashed.events) - 1] * len(wanted)
    assert ([first.quarantined, crashed.quarantined, resumed.quarantined], again.events, again.records,
            again.quarantined) == ([0, 0, 0], [], [], 0)


NAMED_BY_POLICY = {"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "sxm-names"},
                   "spec": {"version": "7", "deviceModels": [
                       {"model": "H100-80G", "driver": "gpu.nvidia.com", "attribute": "productName",
                        "match": "^NVIDIA H100"},
                       {"model": "A100-80G", "driver": "gpu.nvidia.com", "attribute": "productName",
                        "match": "^NVIDIA A100"}]}}
STORED_POLICY = {
    # the Policy events the stored log holds before the watcher's -> the records it writes: pod,
    # outcome, preference, allocated model, its devices' models
    "a_policy_in_force": (["upsert"], [
        ("legacy-0", "allocated", ["nvidia.com/gpu"], "A100-80G", ["A100-80G"]),
        ("train-0", "allocated", ["H100-80G", "A100-80G"], "H100-80G", ["H100-80G"]),
        ("train-0", "unschedulable", ["H100-80G", "A100-80G"], "", [])]),
    "a_policy_deleted_since": (["upsert", "delete"], [
        ("legacy-0", "allocated", ["nvidia.com/gpu"], "A100", ["A100"]),
        ("train-0", "allocated", ["H100", "A100"], "H100", ["H100"]),
        ("train-0", "unschedulable", ["H100", "A100"], "", [])]),
}


@pytest.mark.parametrize(("policy_events", "expected"), list(STORED_POLICY.values()), ids=list(STORED_POLICY))
def test_a_watcher_names_models_by_the_policy_its_stored_log_holds(
        request: pytest.FixtureRequest, target: Target, policy_events: list[str],
        expected: list[tuple[str, str, list[str], str, list[str]]]) -> None:
    cluster = _cluster(request)
    # as the store's fold of the log reads it: the Policy object in force names the models
    _stored(target, [WorldEvent(cluster=cluster, seq=s, time=FIXED_TIME, type=t, object_kind="Policy",
                                namespace="", name="sxm-names", payload=NAMED_BY_POLICY)
                     for s, t in enumerate(policy_events)])
    with FakeApiServer() as server:
        _started(server, RUNNING)
        written = watch_once(server, target, cluster)
    assert sorted((r.pod, r.outcome, r.preference, r.allocated_model, [d.model for d in r.devices])
                  for r in written.records) == expected
    assert written.quarantined == 0


def test_a_pod_whose_decision_cannot_be_derived_costs_the_others_nothing(caplog: pytest.LogCaptureFixture) -> None:
    claim, train, legacy = copy.deepcopy([*ALLOCATED, *LEGACY_BOUND])
    claim["status"]["allocation"]["devices"]["results"] = "not a list"  # what no API server would hold
    world = EventLog("c", lambda: FIXED_TIME)
    world.restore((d["kind"], d) for d in [*load_docs("cluster.yaml"), claim, train, legacy])
    with caplog.at_level(logging.ERROR, logger="ingest.kube.observe"):
        derived = DecisionObserver("c", lambda: FIXED_TIME, check_allocations=False).restore(world, [], {})
    assert [(r.pod, r.decision_id) for r in derived] == [("legacy-0", decision_id("c", LEGACY_POD, 0))]
    assert [(r.getMessage(), r.tenant_data) for r in caplog.records] == [  # type: ignore[attr-defined]
        ("could not derive a decision from the stored world", {"pod": "team-a/train-0"})]


def test_a_leader_hands_its_lease_on_once_the_api_holds_what_it_wrote(api_base: str, tmp_path: Path) -> None:
    cluster = "handover"

    def replica(name: str) -> HttpSink:
        # batches wait for a flush: what a leader leaves buffered is not delivered by the clock
        return HttpSink(api_base, token=TOKENS["admin"], spool_dir=str(tmp_path / name), max_delay=60)

    leader = Recording(replica("leader"))
    seen_at_handover: list[StoredWorld | None] = []
    done = threading.Event()

    def at_lease_update() -> None:
        if not done.is_set():  # a renewal: wait for the update that hands the Lease on
            server.before_lease_update = at_lease_update
            return
        follower = replica("follower")  # what the next leader reads before it lists
        try:
            seen_at_handover.append(follower.stored_world(cluster))
        finally:
            follower.close()

    def lead(stop_leading: threading.Event) -> None:
        try:
            watcher.run(stop_leading)
        finally:
            done.set()

    with FakeApiServer() as server:
        _started(server, RUNNING)
        watcher = Watcher(api_client(server), cluster, leader, clock=lambda: FIXED_TIME, backoff=fast_backoff,
                          next_seq=0, observer=DecisionObserver(cluster, lambda: FIXED_TIME, check_allocations=False))
        elector = LeaseElector(api_client(server), "claimtrail", "w", "watcher-a", lease_duration=3, renew_deadline=2,
                               retry_period=0.05)
        server.before_lease_update = at_lease_update
        stop_all = threading.Event()
        thread = threading.Thread(target=elector.run, args=(stop_all, lead), daemon=True)
        thread.start()
        try:  # (renewals move the server's revision on, so catching up is judged by what was written)
            deadline = time.monotonic() + 30
            while (len(leader.written.events), len(leader.written.records)) != (11, 3) or not watcher.idle():
                assert time.monotonic() < deadline, "the leader did not catch up"
                time.sleep(0.02)
        finally:
            stop_all.set()
            thread.join(30)
        leader.sink.close()
    (held,) = seen_at_handover
    assert held is not None
    assert (held.events, sorted(d.decision_id for d in held.decisions)) == (
        11, sorted(r.decision_id for r in leader.written.records))
