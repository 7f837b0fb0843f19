"""A watcher's HTTP sink reads its cluster's world from the API's newest checkpoint
(``GET /v1/events/checkpoint``), the events after it (``GET /v1/events``) and its held claims'
own events (``POST /v1/events/objects``), and gets what folding the whole log gets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from audit.replay.checkpoints import CheckpointWriter, checkpoint_text
from audit.store.queries import AuditStore
from ingest.sinks import FileSink, HttpSink
from tests.api.conftest import TOKENS, Server, start_server, stop
from tests.store.claim_histories import decisions_for, random_history

CHECKED, UNCHECKED = "checked", "unchecked"
EVENTS = {CHECKED: random_history(CHECKED, 7, 300), UNCHECKED: random_history(UNCHECKED, 8, 120)}
EVERY = 40  # checkpoints of CHECKED at seqs 39, 79, … 279


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, dict[int, str], Path]]:
    """A server over a store that holds both clusters' logs and decisions, and CHECKED's checkpoints
    (by seq, as stored); the same logs in files beside, without checkpoints."""
    root = tmp_path_factory.mktemp("resume-api")
    bodies: dict[int, str] = {}
    with AuditStore.open(f"chdb://{root}/db", create=True) as store:
        writer = store.writer(background=False)
        for events in EVENTS.values():
            writer.write_events(events)
            writer.write_records(decisions_for(events))
        assert writer.flush()
        writer.close()

        def keep(cluster: str, seq: int, body: dict[str, Any]) -> None:
            store.write_checkpoint(cluster, seq, body)
            bodies[seq] = checkpoint_text(body)

        CheckpointWriter(keep, EVERY, CHECKED).fold(EVENTS[CHECKED])
    for cluster, events in EVENTS.items():
        files = FileSink(str(root / f"{cluster}.jsonl"))
        files.write_events(events)
        files.write_records(decisions_for(events))
        files.close()
    server, proc = start_server(root)
    try:
        yield server, bodies, root
    finally:
        stop(proc)


@pytest.mark.parametrize(("cluster", "checkpoint"), [(CHECKED, 279), (UNCHECKED, None)],
                         ids=["from-the-newest-checkpoint", "from-the-whole-log-without-one"])
def test_the_http_sink_reads_the_world_the_whole_log_gives(served: tuple[Server, dict[int, str], Path], tmp_path: Path,
                                                           cluster: str, checkpoint: int | None) -> None:
    server, _, root = served
    sink = HttpSink(server.base, token=TOKENS["admin"], spool_dir=str(tmp_path / "spool"))
    try:
        resumed = sink.stored_world(cluster, page=50, window=5)  # pages and stretches short enough to take several
    finally:
        sink.close()
    whole = FileSink(str(root / f"{cluster}.jsonl")).stored_world(cluster)
    assert resumed is not None and resumed.reservations and resumed.decisions
    assert (resumed.objects, resumed.last_seq, resumed.policy, resumed.reservations, resumed.decisions) == (
        whole.objects, whole.last_seq, whole.policy, whole.reservations, whole.decisions)
    assert resumed.checkpoint == checkpoint
    assert (resumed.events < len(EVENTS[cluster])) == (checkpoint is not None)


def test_the_newest_checkpoint_is_served_as_stored(served: tuple[Server, dict[int, str], Path]) -> None:
    server, bodies, _ = served
    r = server.get("/v1/events/checkpoint", cluster=CHECKED)
    assert r.status_code == 200, r.text
    assert (r.headers["content-type"], r.content) == ("application/json", bodies[max(bodies)].encode())


@pytest.mark.parametrize(("who", "query", "status"), [
    ("admin", {"cluster": UNCHECKED}, 404),
    ("admin", {"cluster": "no-such-cluster"}, 404),
    ("team-a", {"cluster": CHECKED}, 403),
    (None, {"cluster": CHECKED}, 401),
    ("admin", {}, 400),
    ("admin", {"cluster": "bad\ncluster"}, 400),
], ids=["cluster-without-checkpoints", "unknown-cluster", "tenant-token", "no-token", "missing-cluster",
        "control-character"])
def test_checkpoint_refusals_are_problems(served: tuple[Server, dict[int, str], Path], who: str | None,
                                          query: dict[str, str], status: int) -> None:
    r = served[0].get("/v1/events/checkpoint", who, **query)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"


def _claim_seqs(names: list[str], after: int, upto: int) -> list[int]:
    return [e.seq for e in EVENTS[CHECKED] if e.object_kind == "ResourceClaim" and after < e.seq <= upto
            and f"{e.namespace}/{e.name}" in names]


@pytest.mark.parametrize("ask", [
    {"names": ["team-a/gpu-a"]},
    {"names": ["team-a/gpu-a", "team-a/gpu-c"], "after_seq": 100, "upto_seq": 200},
    {"names": ["team-a/gpu-b"], "limit": 3},
    {"names": ["team-a/gpu-b", "gpu-b", "other/gpu-b"], "after_seq": 250},
    {"names": []},
], ids=["one-claim", "two-claims-in-a-range", "paged", "other-namespaces-are-other-objects", "none"])
def test_object_events_are_those_of_the_objects_named_in_seq_order(served: tuple[Server, dict[int, str], Path],
                                                                   ask: dict[str, Any]) -> None:
    server = served[0]
    body = {"cluster": CHECKED, "kind": "ResourceClaim", **ask}
    seqs: list[int] = []
    while True:
        r = server.post("/v1/events/objects", json=body)
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["items"]) <= ask.get("limit", 1000)
        seqs += [item["seq"] for item in page["items"]]
        if page["next_after_seq"] is None:
            break
        body["after_seq"] = page["next_after_seq"]
    expected = _claim_seqs(ask["names"], ask.get("after_seq", -1), ask.get("upto_seq", 10**9))
    assert seqs == expected and (expected or not ask["names"])


@pytest.mark.parametrize(("who", "body", "status"), [
    ("team-a", {"cluster": CHECKED, "kind": "ResourceClaim", "names": ["team-a/gpu-a"]}, 403),
    ("admin", {"cluster": CHECKED, "kind": "ResourceClaim", "names": [f"team-a/c{i}" for i in range(1001)]}, 400),
    ("admin", {"cluster": CHECKED, "kind": "", "names": ["team-a/gpu-a"]}, 400),
    ("admin", {"cluster": "", "kind": "ResourceClaim", "names": ["team-a/gpu-a"]}, 400),
    ("admin", {"cluster": CHECKED, "kind": "ResourceClaim", "names": ["team-a/gpu-a"], "limit": 0}, 400),
    ("admin", {"cluster": CHECKED, "kind": "ResourceClaim", "names": ["team-a/gpu-a"], "seq": 3}, 400),
], ids=["tenant-token", "too-many-names", "empty-kind", "empty-cluster", "limit-zero", "unknown-field"])
def test_object_event_refusals_are_problems(served: tuple[Server, dict[int, str], Path], who: str, body: dict[str, Any],
                                            status: int) -> None:
    r = served[0].post("/v1/events/objects", who, json=body)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
