"""A producer that restarts goes on from the last event seq the server holds for its cluster (the
route, and a watcher's HTTP sink reading the stored world back), and asks which decisions it
stores about the pods it still sees."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from audit.events import WorldEvent
from audit.records import DecisionRecord
from ingest.sinks import HttpSink
from tests.api import factory
from tests.api.conftest import TOKENS, Server, world_events

FRESH_CLUSTER = "sink-restart-test"


def _event(seq: int, cluster: str = FRESH_CLUSTER) -> WorldEvent:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{seq}"}}
    return WorldEvent(cluster=cluster, seq=seq, time="2026-05-01T08:00:00.000000Z", type="upsert",
                      object_kind="Node", namespace="", name=f"n{seq}", payload=node)


@pytest.mark.parametrize(
    ("who", "cluster", "status", "last_seq"),
    [
        ("admin", factory.CLUSTER, 200, len(world_events()) - 1),
        ("admin", "no-such-cluster", 200, None),
        ("team-a", factory.CLUSTER, 403, None),
        (None, factory.CLUSTER, 401, None),
        ("admin", "no such cluster; DROP TABLE events", 200, None),
        ("admin", "bad\ncluster", 400, None),
        ("admin", "", 400, None),
    ],
    ids=["stored", "unknown", "tenant-token", "no-token", "injection-is-a-name", "control-character", "empty"],
)
def test_last_event_seq_answers_producers_only(server: Server, who: str | None, cluster: str, status: int,
                                               last_seq: int | None) -> None:
    r = server.get("/v1/ingest/events/last-seq", who, cluster=cluster)
    assert r.status_code == status, r.text
    if status == 200:
        assert r.json() == {"cluster": cluster, "last_seq": last_seq}
    else:
        assert r.headers["content-type"] == "application/problem+json"


@pytest.mark.parametrize("cluster", ["prod eu", "lab/α (2026)", "a" * 300])
def test_any_cluster_name_ingest_takes_can_be_resumed(server: Server, tmp_path: Path, cluster: str) -> None:
    sink = HttpSink(server.base, token=TOKENS["admin"], spool_dir=str(tmp_path / "spool"), backoff_base=0.02)
    try:
        sink.write_events([_event(s, cluster) for s in (0, 1, 2)])
        assert sink.flush(timeout=30) is True
        stored = sink.stored_world(cluster)
        assert stored is not None and (stored.last_seq, stored.events) == (2, 3)
    finally:
        sink.close()
    r = server.get("/v1/ingest/events/last-seq", "admin", cluster=cluster)
    assert r.json() == {"cluster": cluster, "last_seq": 2}


def test_a_restarted_http_sink_counts_what_its_spool_still_held(server: Server, tmp_path: Path) -> None:
    spool = str(tmp_path / "spool")
    first = HttpSink(server.base, token="wrong", spool_dir=spool, backoff_base=0.02, backoff_cap=0.05)
    first.write_events([_event(s) for s in range(1, 6)])
    assert first.flush(timeout=0.3) is False  # refused: the batch stays spooled when the process ends
    first.close()
    second = HttpSink(server.base, token=TOKENS["admin"], spool_dir=spool, backoff_base=0.02)
    try:
        fresh, unknown = second.stored_world(FRESH_CLUSTER), second.stored_world("no-such-cluster")
        assert fresh is not None and fresh.last_seq == 5  # delivered first, then asked
        assert unknown is not None and (unknown.last_seq, unknown.events) == (None, 0)
    finally:
        second.close()


def test_a_sink_that_cannot_ask_says_it_does_not_know_and_why(server: Server, tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    sink = HttpSink(server.base, token=TOKENS["team-a"], spool_dir=str(tmp_path / "spool"))
    try:
        with caplog.at_level(logging.WARNING, logger="ingest.sinks"):
            assert sink.stored_world(factory.CLUSTER) is None
    finally:
        sink.close()
    (warning,) = [r for r in caplog.records if r.getMessage() == "stored world unknown"]
    assert "HTTP 403" in warning.error  # type: ignore[attr-defined]


def _pod_decisions(r: DecisionRecord) -> dict:
    return {"decision_id": r.decision_id, "namespace": r.namespace, "pod_uid": r.pod_uid, "attempt": r.attempt,
            "outcome": r.outcome}


@pytest.mark.parametrize(
    ("who", "body", "status", "items"),
    [
        ("admin", {"cluster": factory.CLUSTER, "pod_uids": ["pod-uid-3", "pod-uid-1", "pod-uid-404"]}, 200,
         sorted([_pod_decisions(factory.FALLBACK), _pod_decisions(factory.PENDING)], key=lambda d: d["decision_id"])),
        ("admin", {"cluster": "no-such-cluster", "pod_uids": ["pod-uid-1"]}, 200, []),
        ("admin", {"cluster": factory.CLUSTER, "pod_uids": []}, 200, []),
        ("team-a", {"cluster": factory.CLUSTER, "pod_uids": ["pod-uid-1"]}, 403, None),
        (None, {"cluster": factory.CLUSTER, "pod_uids": ["pod-uid-1"]}, 401, None),
        ("admin", {"cluster": "bad\ncluster", "pod_uids": ["pod-uid-1"]}, 400, None),
        ("admin", {"cluster": factory.CLUSTER, "pod_uids": ["u"] * 20_001}, 400, None),
        ("admin", {"cluster": factory.CLUSTER, "pod_uids": ["pod-uid-1"], "tenant": "team-a"}, 400, None),
    ],
    ids=["stored", "unknown-cluster", "no-pods", "tenant-token", "no-token", "control-character", "too-many-uids",
         "unknown-field"],
)
def test_pod_decisions_answer_producers_with_the_decisions_about_those_pods(
        server: Server, who: str | None, body: dict, status: int, items: list | None) -> None:
    r = server.post("/v1/ingest/pod-decisions", who, json=body)
    assert r.status_code == status, r.text
    if status == 200:
        assert r.json() == {"cluster": body["cluster"], "items": items}
    else:
        assert r.headers["content-type"] == "application/problem+json"
