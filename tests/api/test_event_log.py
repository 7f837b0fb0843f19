"""``GET /v1/events``: a cluster's world events as stored, page by page in seq order, for admins only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from audit.events import WorldEvent
from tests.api.conftest import Server, own_server

CLUSTER, OTHER = "log-a", "log-b"
SEQS = (0, 1, 2, 5, 7)  # with gaps: a page ends at a seq, not at a count

server = own_server("event-log")


def _event(cluster: str, seq: int) -> WorldEvent:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{seq}", "labels": {"seq": str(seq)}}}
    return WorldEvent(cluster=cluster, seq=seq, time=f"2026-05-01T08:00:{seq:02d}.000000Z", type="upsert",
                      object_kind="Node", namespace="", name=f"n{seq}", payload=node, resource_version=str(seq))


STORED = {seq: _event(CLUSTER, seq).to_dict() for seq in SEQS}


@pytest.fixture(scope="module")
def log(server: Server) -> Iterator[Server]:
    events = [_event(CLUSTER, s) for s in reversed(SEQS)] + [_event(CLUSTER, 2)]  # out of order, one sent twice
    events += [_event(OTHER, s) for s in (0, 1, 3)]
    r = server.post("/v1/ingest/events", content="".join(json.dumps(e.to_dict()) + "\n" for e in events).encode())
    assert r.status_code == 200 and r.json()["quarantined"] == 0, r.text
    yield server


@pytest.mark.parametrize(
    ("query", "seqs", "next_after_seq"),
    [
        ({}, SEQS, None),
        ({"limit": 2}, (0, 1), 1),
        ({"after_seq": 1, "limit": 2}, (2, 5), 5),
        ({"after_seq": 3, "limit": 2}, (5, 7), None),  # a full page that is the last one
        ({"after_seq": 5, "limit": 2}, (7,), None),
        ({"after_seq": 7}, (), None),
        ({"after_seq": 2**70}, (), None),
        ({"after_seq": -1, "limit": 5}, SEQS, None),
        ({"after_seq": -1, "limit": 4}, SEQS[:4], SEQS[3]),
    ],
    ids=["all", "first-page", "next-page", "full-last-page", "short-last-page", "after-the-last", "far-beyond",
         "exactly-all", "all-but-the-last"],
)
def test_event_log_pages_in_seq_order_as_stored(log: Server, query: dict[str, int], seqs: tuple[int, ...],
                                                next_after_seq: int | None) -> None:
    r = log.get("/v1/events", cluster=CLUSTER, **query)
    assert r.status_code == 200, r.text
    assert r.json() == {"cluster": CLUSTER, "items": [STORED[s] for s in seqs], "next_after_seq": next_after_seq}


def test_following_next_after_seq_reads_the_whole_log_once(log: Server) -> None:
    items: list[dict[str, Any]] = []
    query: dict[str, int] = {"limit": 2}
    while True:
        body = log.get("/v1/events", cluster=CLUSTER, **query).json()
        items += body["items"]
        if body["next_after_seq"] is None:
            break
        query["after_seq"] = body["next_after_seq"]
    assert items == list(STORED.values())


def test_event_log_of_a_cluster_without_events_is_empty(log: Server) -> None:
    r = log.get("/v1/events", cluster="no-such-cluster")
    assert r.json() == {"cluster": "no-such-cluster", "items": [], "next_after_seq": None}


@pytest.mark.parametrize(
    ("who", "query", "status"),
    [
        ("team-a", {"cluster": CLUSTER}, 403),
        ("team-a", {}, 403),
        (None, {"cluster": CLUSTER}, 401),
        ("admin", {}, 400),
        ("admin", {"cluster": ""}, 400),
        ("admin", {"cluster": "bad\ncluster"}, 400),
        ("admin", {"cluster": CLUSTER, "after_seq": -2}, 400),
        ("admin", {"cluster": CLUSTER, "after_seq": "x"}, 400),
        ("admin", {"cluster": CLUSTER, "limit": 0}, 400),
        ("admin", {"cluster": CLUSTER, "limit": 10_001}, 400),
        ("admin", {"cluster": CLUSTER, "seq": 1}, 400),
    ],
    ids=["tenant-token", "tenant-token-without-cluster", "no-token", "missing-cluster", "empty-cluster",
         "control-character", "after-seq-below-minus-one", "after-seq-not-an-integer", "limit-zero",
         "limit-over-10000", "unknown-parameter"],
)
def test_event_log_refuses_tenants_and_bad_parameters(log: Server, who: str | None, query: dict[str, Any],
                                                      status: int) -> None:
    r = log.get("/v1/events", who, **query)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/problem+json"
    if status == 403:
        assert "admin token" in r.json()["detail"]
