"""The watcher's event log survives the API server's realities without gaps or doubles.

"Identical to a clean run" is checked per object (every object's sequence of versions, with
payload digests) plus a dense ``seq``: resources are watched in parallel, so how changes of
different kinds interleave depends on arrival, in a clean run as much as in a faulty one.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from audit.canonical import digest
from audit.events import WorldEvent, validate_event
from tests.kube.apiserver import FakeApiServer, WatchScript
from tests.kube.harness import CollectingSink, make_watcher, populate, run_until_caught_up


def _per_object_history(events: list[WorldEvent]) -> dict[tuple[str, str, str], list[tuple[str, str, str]]]:
    out: dict[tuple[str, str, str], list[tuple[str, str, str]]] = defaultdict(list)
    for e in events:
        out[e.key].append((e.type, e.resource_version, digest(e.payload)))
    return dict(out)


def _run(scripts: dict[str, list[WatchScript]], page_size: int = 500) -> tuple[CollectingSink, object]:
    with FakeApiServer() as server:
        populate(server)
        for kind, script in scripts.items():
            server.collections[kind].scripts = script
        sink = CollectingSink()
        watcher = make_watcher(server, sink, page_size=page_size)
        run_until_caught_up(server, watcher)
        return sink, watcher


@pytest.fixture(scope="module")
def clean_run() -> CollectingSink:
    sink, _ = _run({})
    return sink


def test_clean_run_logs_every_world_change_once(clean_run: CollectingSink) -> None:
    events = clean_run.events
    # 5 initial objects + 10 world changes (the scheduler Event is not a world object)
    assert len(events) == 15
    assert [e.seq for e in events] == list(range(15))
    for e in events:
        validate_event(e.to_dict())
    kinds = sorted((e.object_kind, e.type) for e in events)
    assert kinds.count(("Pod", "upsert")) == 3 and kinds.count(("Pod", "delete")) == 2
    assert kinds.count(("ResourceClaim", "upsert")) == 2 and kinds.count(("ResourceClaim", "delete")) == 1
    assert kinds.count(("ResourceSlice", "upsert")) == 3
    assert kinds.count(("Node", "upsert")) == 3


FAULTS = {
    "dropped_connection": {"Pod": [WatchScript(drop_after=2)], "ResourceClaim": [WatchScript(drop_after=1)]},
    "gone_mid_stream": {"Pod": [WatchScript(gone_after=3)], "ResourceSlice": [WatchScript(gone_after=0)]},
    "resource_version_too_old": {
        "ResourceClaim": [WatchScript(drop_after=1), WatchScript(expired=True)],
        "Node": [WatchScript(expired=True)],
    },
    "bookmarks_everywhere": {k: [WatchScript(bookmark_every=1)] for k in ("Pod", "ResourceClaim", "Node")},
    "resumed_watch_resends_history": {
        "Pod": [WatchScript(drop_after=3), WatchScript(replay_from_start=True)],
        "ResourceClaim": [WatchScript(replay_from_start=True)],
    },
    "everything_at_once": {
        "Pod": [WatchScript(drop_after=1), WatchScript(gone_after=1), WatchScript(expired=True),
                WatchScript(replay_from_start=True, bookmark_every=2)],
        "ResourceClaim": [WatchScript(gone_after=1), WatchScript(drop_after=0)],
    },
}


@pytest.mark.parametrize("scripts", list(FAULTS.values()), ids=list(FAULTS))
def test_faulty_run_ends_identical_to_clean_run(clean_run: CollectingSink, scripts: dict) -> None:
    sink, watcher = _run(scripts)
    assert _per_object_history(sink.events) == _per_object_history(clean_run.events)
    assert sorted(e.seq for e in sink.events) == list(range(len(clean_run.events)))
    assert len({(e.key, e.resource_version, e.type) for e in sink.events}) == len(sink.events)


def test_faults_really_happened() -> None:
    sink, watcher = _run(FAULTS["everything_at_once"])
    pods = next(r for r in watcher.reflectors if r.resource.kind == "Pod")
    assert pods.relists >= 3  # the first list, after the 410 event, after the expired watch
    assert pods.reconnects >= 1  # the dropped connection
    assert watcher.log.duplicates > 0  # the resent history was seen and dropped


def test_paginated_lists_give_the_same_log(clean_run: CollectingSink) -> None:
    sink, _ = _run({}, page_size=1)
    assert _per_object_history(sink.events) == _per_object_history(clean_run.events)


def test_expired_continue_token_restarts_the_list(clean_run: CollectingSink) -> None:
    with FakeApiServer() as server:
        populate(server)
        server.collections["ResourceSlice"].expire_continue = 1
        sink = CollectingSink()
        watcher = make_watcher(server, sink, page_size=1)
        run_until_caught_up(server, watcher)
    assert _per_object_history(sink.events) == _per_object_history(clean_run.events)
    assert server.collections["ResourceSlice"].expire_continue == 0  # the expiry happened
    first_pages = [r for r in server.requests if r.startswith("GET /apis/resource.k8s.io/v1/resourceslices?limit=1")
                   and "continue" not in r and "watch" not in r]
    assert len(first_pages) == 2  # the list started over once


def test_delete_missed_during_a_gap_is_synthesized_from_the_relist(clean_run: CollectingSink) -> None:
    with FakeApiServer() as server:
        populate(server)
        pods = server.collections["Pod"]
        pods.scripts = [WatchScript(gone_after=1)]
        pods.relist_jumps_to_end = True  # the relist shows the end state; the gap hid legacy-0 entirely
        sink = CollectingSink()
        watcher = make_watcher(server, sink)
        run_until_caught_up(server, watcher)
    pod_events = [(e.type, e.name) for e in sink.events if e.object_kind == "Pod"]
    assert pod_events == [("upsert", "train-0"), ("delete", "train-0")]
    assert watcher.log.synthesized_deletes == 1
    assert [k for k in watcher.log.alive if k[0] == "Pod"] == []
    clean_world = _final_world(clean_run.events)
    assert _final_world(sink.events) == clean_world


def _final_world(events: list[WorldEvent]) -> dict:
    world: dict = {}
    for e in sorted(events, key=lambda e: e.seq):
        if e.type == "delete":
            world.pop(e.key, None)
        else:
            world[e.key] = digest(e.payload)
    return world


def test_namespace_scope_watches_only_those_namespaces() -> None:
    with FakeApiServer() as server:
        populate(server)
        sink = CollectingSink()
        watcher = make_watcher(server, sink, namespaces=("team-a",))
        run_until_caught_up(server, watcher)
    namespaced = {(e.object_kind, e.namespace) for e in sink.events if e.namespace}
    assert namespaced == {("Pod", "team-a"), ("ResourceClaim", "team-a")}
    # cluster-scoped kinds are still watched whole
    assert {e.object_kind for e in sink.events if not e.namespace} == {"DeviceClass", "Node", "ResourceSlice"}
    assert any(r.startswith("GET /api/v1/namespaces/team-a/pods?") for r in server.requests)
    assert not any(r.startswith("GET /api/v1/pods?") for r in server.requests)


def _pod(uid: str, phase: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker-0", "namespace": "team-a", "uid": uid},
            "spec": {"nodeName": "node-a"}, "status": {"phase": phase}}


GAPS = {
    # what happened to the pod while the watch was down -> its events, as (type, uid)
    "deleted_and_created_again_under_its_name": (
        [{"delete": True}, _pod("uid-2", "Pending")],
        [("upsert", "uid-1"), ("delete", "uid-1"), ("upsert", "uid-2")]),
    "modified": ([_pod("uid-1", "Succeeded")], [("upsert", "uid-1"), ("upsert", "uid-1")]),
    "deleted": ([{"delete": True}], [("upsert", "uid-1"), ("delete", "uid-1")]),
}


@pytest.mark.parametrize(("changes", "expected"), list(GAPS.values()), ids=list(GAPS))
def test_an_object_replaced_during_a_gap_is_logged_deleted_before_its_successor(changes: list, expected: list) -> None:
    with FakeApiServer() as server:
        server.add(_pod("uid-1", "Running"))
        server.release_all()
        for change in changes:
            if change.get("delete"):
                server.delete("Pod", "worker-0", "team-a")
            else:
                server.add(change)
        pods = server.collections["Pod"]
        pods.scripts = [WatchScript(gone_after=0)]
        pods.relist_jumps_to_end = True  # the relist shows the end state; the gap hid the changes
        sink = CollectingSink()
        run_until_caught_up(server, make_watcher(server, sink))
    assert [(e.type, e.payload["metadata"]["uid"]) for e in sink.events] == expected
    assert [e.seq for e in sink.events] == list(range(len(expected)))


SCOPES = {
    # --namespace as given -> the namespaces watched, once each
    "once": (("team-a",), ["team-a"]),
    "repeated": (("team-a", "team-a"), ["team-a"]),
    "repeated_among_others": (("team-b", "team-a", "team-b"), ["team-a", "team-b"]),
}


@pytest.mark.parametrize(("namespaces", "watched"), list(SCOPES.values()), ids=list(SCOPES))
def test_a_namespace_named_twice_is_watched_once(namespaces: tuple, watched: list) -> None:
    with FakeApiServer() as server:
        populate(server)
        sink = CollectingSink()
        watcher = make_watcher(server, sink, namespaces=namespaces)
        run_until_caught_up(server, watcher)
    assert sorted(r.scope for r in watcher.reflectors if r.resource.kind == "Pod") == watched
    assert len({(e.key, e.resource_version, e.type) for e in sink.events}) == len(sink.events)
