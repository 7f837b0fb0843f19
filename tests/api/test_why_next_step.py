"""The API's why for a pending pod: what it would get now (from the world at the latest seq), kept
apart from the recorded outcome, and in-use devices named within the caller's tenant only.

A server of its own: the shared one's records are counted by other tests, and this one adds
pending decisions for pods of the fixture world (team-a/train-1, which the world has pending
with a free A100, and team-b/infer-2, which nothing fits).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from audit.records import to_jsonl
from tests.api import factory
from tests.api.conftest import Server, seed, start_server, stop, world_events

TRAIN_1 = factory._record(
    11, "team-a", "team-a", "train-1", "unschedulable", retry_class="unschedulable",
    tiers=[factory.h100_tier({"in_use": 1, "unhealthy": 2}), factory.a100_tier({"in_use": 1, "not_reached": 1})])
GONE = factory._record(12, "team-a", "team-a", "train-9", "unschedulable", retry_class="unschedulable",
                       tiers=[factory.h100_tier({"in_use": 6})])


@pytest.fixture(scope="module")
def next_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    pytest.importorskip("audit.store.queries", reason="the store is not in this tree yet")
    srv, proc = start_server(tmp_path_factory.mktemp("api-next"))
    try:
        seed(srv)
        r = srv.post("/v1/ingest/records", content=to_jsonl([TRAIN_1, GONE]).encode())
        assert r.status_code == 200, r.text
        yield srv
    finally:
        stop(proc)


A100_NOW = {"result": "allocated", "model": "A100", "node": "a100-07", "tier": 1, "retry_class": "",
            "devices": ["gpu.nvidia.com/a100-07/gpu-3"]}


def test_pending_pod_would_get_the_free_fallback_now(next_server: Server) -> None:
    body = next_server.get("/v1/pods/team-a/train-1/why", model="H100").json()
    assert body["decision_id"] == TRAIN_1.decision_id
    assert body["outcome"]["result"] == "unschedulable"  # the record's, unchanged
    seq = body["would_get"].pop("seq")
    assert seq == len(world_events()) - 1  # the latest seq of the world
    assert body["would_get"] == A100_NOW
    assert body["summary"].endswith("If scheduled now: A100 gpu-3 on node a100-07 (tier 1).")


def test_decision_why_with_devices_also_says_what_happens_next(next_server: Server) -> None:
    body = next_server.get(f"/v1/decisions/{TRAIN_1.decision_id}/why", model="H100", detail="devices").json()
    assert {k: v for k, v in body["would_get"].items() if k != "seq"} == A100_NOW
    summary = next_server.get(f"/v1/decisions/{TRAIN_1.decision_id}/why", model="H100").json()
    assert "would_get" not in summary  # the summary answer reads the record alone


def test_an_allocated_decision_has_no_would_get(next_server: Server) -> None:
    body = next_server.get(f"/v1/decisions/{factory.FALLBACK.decision_id}/why", model="H100", detail="devices").json()
    assert "would_get" not in body


def test_a_pod_gone_from_the_world_says_so(next_server: Server) -> None:
    body = next_server.get("/v1/pods/team-a/train-9/why", model="H100").json()
    assert body["would_get"]["result"] == "unknown"
    assert body["would_get"]["error"] == "Pod team-a/train-9: not found in the cluster view"
    assert body["reasons"] == {"in_use": 6}


# The one in-use H100 of the world (h100-01/gpu-0) is held by team-b's infer-9.
HOLDER = {
    "admin": {"by": "pod team-b/infer-9 (claim team-b/infer-9-gpu)", "claim": "team-b/infer-9-gpu",
              "pod": "team-b/infer-9"},
    "team-a": {"by": "another tenant"},
}


@pytest.mark.parametrize("who", sorted(HOLDER))
def test_in_use_holder_is_named_only_within_the_callers_tenant(next_server: Server, who: str) -> None:
    body = next_server.get(f"/v1/decisions/{TRAIN_1.decision_id}/why", who=who, model="H100", detail="devices").json()
    held = [d for d in body["devices"] if d["reason"] == "in_use"]
    assert [(d["device"], d["detail"]) for d in held] == [("gpu.nvidia.com/h100-01/gpu-0", HOLDER[who])]
