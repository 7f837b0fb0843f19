"""The store's sink reads a cluster's world from the newest checkpoint at or before the log's end
and the events after it, and gets what folding the whole log gets (the file sink, which keeps no
checkpoints): the same objects, last seq, Policy in force, decisions, and reservations, gone pods
included, however long before the checkpoint a claim's allocation was made."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.events import WorldEvent
from audit.replay.checkpoints import CheckpointWriter, checkpoint_body
from audit.store.queries import AuditStore
from audit.world import World
from ingest.sinks import FileSink, StoredWorld, StoreSink
from tests.store.claim_histories import NAMESPACE, decisions_for, random_history
from tests.store.factory import BASE_TIME, iso

_CLUSTERS = itertools.count()


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[AuditStore, StoreSink, Path]]:
    """One store, written through the store and read through a sink; every example has a cluster of its own."""
    root = tmp_path_factory.mktemp("stored-world")
    store = AuditStore.open(f"chdb://{root}/db", create=True)
    sink = StoreSink(f"chdb://{root}/db", spool_dir=str(root / "spool"))
    try:
        yield store, sink, root
    finally:
        sink.close()
        store.close()


def _keep(stores: tuple[AuditStore, StoreSink, Path], events: list[WorldEvent], every: int | None,
          checkpoints: list[int] | None = None) -> tuple[StoreSink, FileSink]:
    """Store ``events`` with their pods' decisions, and checkpoints every ``every`` events (or at
    the ``checkpoints`` seqs); the same in files beside."""
    store, sink, root = stores
    cluster = events[0].cluster
    writer = store.writer(background=False)
    writer.write_events(events)
    writer.write_records(decisions_for(events))
    assert writer.flush()
    writer.close()
    if every is not None:
        CheckpointWriter(store.write_checkpoint, every, cluster).fold(events)
    world = World(cluster)
    for event in events:
        world.apply(event)
        if event.seq in (checkpoints or ()):
            store.write_checkpoint(cluster, event.seq, checkpoint_body(world))
    files = FileSink(str(root / f"{cluster}.jsonl"))
    files.write_events(events)
    files.write_records(decisions_for(events))
    files.flush()
    return sink, files


def _as_folded(world: StoredWorld | None) -> tuple[Any, ...]:
    assert world is not None
    return world.objects, world.last_seq, world.policy, world.reservations, world.decisions


# ---- a table of histories whose reservations are known --------------------------------------------


class Log:
    """Events of one cluster, written in order."""

    def __init__(self) -> None:
        self.cluster = f"known-{next(_CLUSTERS)}"
        self.events: list[WorldEvent] = []

    def put(self, kind: str, name: str, payload: dict[str, Any] | None, namespace: str = NAMESPACE) -> Log:
        seq = len(self.events)
        self.events.append(WorldEvent(cluster=self.cluster, seq=seq, time=iso(BASE_TIME + timedelta(seconds=seq)),
                                      type="upsert" if payload is not None else "delete", object_kind=kind,
                                      namespace=namespace, name=name, payload=payload or {}))
        return self

    def pod(self, name: str, gone: bool = False) -> Log:
        return self.put("Pod", name, None if gone else {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": NAMESPACE, "uid": f"uid-{name}", "creationTimestamp": iso(BASE_TIME)}})

    def claim(self, name: str, uid: str, device: str | None = None, reserved: tuple[str, ...] = (),
              gone: bool = False) -> Log:
        status: dict[str, Any] = {}
        if device is not None:
            status["allocation"] = {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": device}]}}
        if reserved:
            status["reservedFor"] = [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in reserved]
        return self.put("ResourceClaim", name, None if gone else {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid}, "status": status})

    def policy(self, name: str, gone: bool = False) -> Log:
        return self.put("Policy", name, None if gone else {
            "apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": name},
            "spec": {"version": f"v{len(self.events)}"}}, namespace="")

    def nodes(self, n: int) -> Log:
        for i in range(n):
            self.put("Node", f"node-{i % 3}", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i % 3}"}},
                     namespace="")
        return self

    @property
    def last(self) -> int:
        return len(self.events) - 1


def _left_before_the_checkpoint() -> tuple[Log, list[int]]:
    log = Log().pod("p1").pod("p2").claim("c", "u1", "gpu-0", ("p1",)).claim("c", "u1", "gpu-0", ("p1", "p2"))
    log.claim("c", "u1", "gpu-0", ("p2",)).pod("p1", gone=True)  # p1 has left the claim, then its pod is gone
    at = log.last
    log.pod("p3").claim("c", "u1", "gpu-0", ("p2", "p3"))
    return log, [at]


def _reallocated_in_place_after_it() -> tuple[Log, list[int]]:
    log = Log().pod("p1").pod("p2").claim("c", "u1", "gpu-0", ("p1",)).claim("c", "u1", "gpu-0", ("p1", "p2"))
    at = log.last
    log.claim("c", "u1", "gpu-1", ("p2",)).pod("p3").claim("c", "u1", "gpu-1", ("p2", "p3"))
    return log, [at]


def _allocated_again_before_it() -> tuple[Log, list[int]]:
    log = Log().pod("p1").pod("p2").claim("c", "u1", "gpu-0", ("p1",)).claim("c", "u1").claim("c", "u1", "gpu-0", ("p2",))
    log.nodes(3)
    return log, [log.last]  # a checkpoint at the log's last event: nothing after it


def _held_long_before_the_first_stretch() -> tuple[Log, list[int]]:
    log = Log().pod("p1").pod("p2").claim("c", "u1", "gpu-0", ("p1",)).claim("c", "u1", "gpu-0", ("p1", "p2"))
    log.claim("c", "u1", "gpu-0", ("p2",)).nodes(40)
    first = log.last
    log.nodes(40)
    at = log.last
    log.nodes(5).pod("p4").claim("c", "u1", "gpu-0", ("p2", "p4"))
    return log, [first, at]


def _recreated_under_a_new_uid() -> tuple[Log, list[int]]:
    log = Log().pod("p1").pod("p2").claim("c", "u1", "gpu-0", ("p1",)).claim("c", "u1", "gpu-0", ())
    log.claim("c", "u1", gone=True).claim("c", "u2", "gpu-0", ("p2",)).claim("c", "u2", "gpu-0", ("p2", "p1"))
    at = log.last
    log.claim("c", "u2", "gpu-0", ("p1",)).claim("d", "u3", "gpu-2", ("p2",)).pod("p2", gone=True)
    return log, [at]


def _policy_changed_after_it() -> tuple[Log, list[int]]:
    log = Log().policy("lab").policy("prod").pod("p1").claim("c", "u1", "gpu-0", ("p1",))
    at = log.last
    log.policy("prod", gone=True).policy("lab").claim("c", "u1", gone=True)  # the default in force between
    return log, [at]


@pytest.mark.parametrize(("history", "window", "reservations", "policy", "events"), [
    pytest.param(_left_before_the_checkpoint, 10, {"u1": ["uid-p1", "uid-p2", "uid-p3"]}, "", 2 + 4,
                 id="a-pod-that-left-before-the-checkpoint-is-kept"),
    pytest.param(_reallocated_in_place_after_it, 10, {"u1": ["uid-p2", "uid-p3"]}, "", 3 + 4,
                 id="an-allocation-made-again-after-the-checkpoint-keeps-only-its-own-pods"),
    pytest.param(_allocated_again_before_it, 10, {"u1": ["uid-p2"]}, "", 0 + 3,
                 id="an-allocation-made-again-before-the-checkpoint-keeps-only-its-own-pods"),
    pytest.param(_held_long_before_the_first_stretch, 4, {"u1": ["uid-p1", "uid-p2", "uid-p4"]}, "", 7 + 4,
                 id="a-claim-held-long-is-read-back-over-longer-stretches"),
    pytest.param(_recreated_under_a_new_uid, 10, {"u2": ["uid-p2", "uid-p1"], "u3": ["uid-p2"]}, "", 3 + 6,
                 id="a-claim-made-again-under-its-name-is-another-claim"),
    pytest.param(_policy_changed_after_it, 10, {}, "lab", 3, id="policy-changes-after-the-checkpoint-are-followed"),
])
def test_the_world_from_a_checkpoint_is_the_world_of_the_whole_log(
        stores: tuple[AuditStore, StoreSink, Path], history: Any, window: int, reservations: dict[str, list[str]],
        policy: str, events: int) -> None:
    log, checkpoints = history()
    sink, files = _keep(stores, log.events, None, checkpoints)
    resumed, whole = sink.stored_world(log.cluster, window=window), files.stored_world(log.cluster)
    assert _as_folded(resumed) == _as_folded(whole)
    assert (resumed.reservations, resumed.policy, resumed.last_seq) == (reservations, policy, log.last)
    # read: the events after the checkpoint, and the held claims' own events in the stretches read back
    assert (resumed.checkpoint, resumed.events, whole.checkpoint, whole.events) == (
        checkpoints[-1], events, None, len(log.events))


# ---- random histories -------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), length=st.integers(1, 160), every=st.integers(2, 50),
       window=st.integers(1, 60))
def test_any_history_reads_back_from_its_checkpoint_as_from_its_whole_log(
        stores: tuple[AuditStore, StoreSink, Path], seed: int, length: int, every: int, window: int) -> None:
    events = random_history(f"drawn-{next(_CLUSTERS)}", seed, length)
    sink, files = _keep(stores, events, every)
    resumed, whole = sink.stored_world(events[0].cluster, window=window), files.stored_world(events[0].cluster)
    assert _as_folded(resumed) == _as_folded(whole)
    newest = (length // every) * every - 1  # the last position CheckpointWriter writes at
    assert resumed.checkpoint == (newest if newest >= 0 else None)


def test_a_damaged_checkpoint_is_passed_over_for_the_whole_log(stores: tuple[AuditStore, StoreSink, Path],
                                                                caplog: pytest.LogCaptureFixture) -> None:
    log, checkpoints = _left_before_the_checkpoint()
    sink, files = _keep(stores, log.events, None)
    store = stores[0]
    world = World(log.cluster)
    for event in log.events[:checkpoints[0] + 1]:
        world.apply(event)
    body = checkpoint_body(world)
    store.write_checkpoint(log.cluster, checkpoints[0], {**body, "policy": "prod"})  # no longer its digest's
    with caplog.at_level(logging.WARNING, logger="ingest.sinks"):
        resumed = sink.stored_world(log.cluster)
    assert _as_folded(resumed) == _as_folded(files.stored_world(log.cluster))
    assert (resumed.checkpoint, resumed.events) == (None, len(log.events))
    (warning,) = [r for r in caplog.records if r.getMessage() == "stored world read from the whole log"]
    assert f"checkpoint {log.cluster}@{checkpoints[0]}: content_digest" in warning.error  # type: ignore[attr-defined]


def test_claims_without_a_uid_of_their_own_are_read_from_the_whole_log(
        stores: tuple[AuditStore, StoreSink, Path]) -> None:
    log = Log().pod("p1").pod("p2").claim("c", "", "gpu-0", ("p1",)).claim("c", "", "gpu-0", ("p2",))
    at = log.last
    log.claim("d", "", "gpu-1", ("p1",))
    sink, files = _keep(stores, log.events, None, [at])
    resumed = sink.stored_world(log.cluster)
    assert _as_folded(resumed) == _as_folded(files.stored_world(log.cluster))
    # one history for every claim without a uid, as the whole log's fold keeps it
    assert (resumed.checkpoint, resumed.events, resumed.reservations) == (None, len(log.events), {"": ["uid-p1"]})


def test_the_watcher_logs_where_its_stored_world_was_read_from(stores: tuple[AuditStore, StoreSink, Path],
                                                               caplog: pytest.LogCaptureFixture) -> None:
    from audit.cli.cmd_ingest import _stored_world

    log, checkpoints = _left_before_the_checkpoint()
    sink, _ = _keep(stores, log.events, None, checkpoints)
    with caplog.at_level(logging.INFO, logger="audit.cli.cmd_ingest"):
        _stored_world(sink, log.cluster)
    (line,) = [r for r in caplog.records if r.getMessage() == "read the stored world"]
    assert {k: getattr(line, k) for k in ("checkpoint", "events", "last_seq", "objects", "decisions")} == {
        "checkpoint": checkpoints[0], "events": 2 + 4, "last_seq": log.last, "objects": 3, "decisions": 3}
