"""The API's why for a pending pod: what it would get now (from the world at the latest seq), kept
apart from the recorded outcome, and in-use devices named within the caller's tenant only.

A server of its own: the shared one's records are counted by other tests, and this one adds
pending decisions for pods of the fixture world (team-a/train-1, which the world has pending
with a free A100, and team-b/infer-2, which nothing fits).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from audit.events import WorldEvent
from audit.records import decision_id, to_jsonl
from tests.api import factory
from tests.api.conftest import Server, seed, start_server, stop, world_events

TRAIN_1 = factory._record(
    11, "team-a", "team-a", "train-1", "unschedulable", retry_class="unschedulable",
    tiers=[factory.h100_tier({"in_use": 1, "unhealthy": 2}), factory.a100_tier({"in_use": 1, "not_reached": 1})])
GONE = factory._record(12, "team-a", "team-a", "train-9", "unschedulable", retry_class="unschedulable",
                       tiers=[factory.h100_tier({"in_use": 6})])

# A device-plugin pod's decision: its GPUs are a count, so no device of it can be judged.
LEGACY = dataclasses.replace(
    factory._record(14, "team-a", "team-a", "legacy-1", "allocated", allocated="H100", node="h100-01",
                    tiers=[factory.h100_tier({"selected": 1, "not_reached": 7})]),
    track="device-plugin").seal()

# A second cluster: the PCIe dump, where a NIC + GPU claim with matchAttribute pcieRoot fits nowhere.
PCIE = Path(__file__).resolve().parents[1] / "fixtures" / "explain" / "cluster-pcie.yaml"
PCIE_CLUSTER = "lab-pcie"


def _pcie_events() -> list[WorldEvent]:
    items = yaml.safe_load(PCIE.read_text())["items"]
    return [WorldEvent(cluster=PCIE_CLUSTER, seq=seq, time="2026-05-01T07:00:00.000000Z", type="upsert",
                       object_kind=o["kind"], namespace=o["metadata"].get("namespace", ""), name=o["metadata"]["name"],
                       payload=o) for seq, o in enumerate(items)]


TRAIN_2 = dataclasses.replace(
    factory._record(13, "team-a", "team-a", "train-2", "unschedulable", retry_class="unschedulable",
                    tiers=[factory.h100_tier({"in_use": 1, "not_reached": 3})]),
    cluster=PCIE_CLUSTER, seq=len(_pcie_events()) - 1,
    decision_id=decision_id(PCIE_CLUSTER, "00000000-0000-4000-8000-000000000013", 1)).seal()


@pytest.fixture(scope="module")
def next_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    pytest.importorskip("audit.store.queries", reason="the store is not in this tree yet")
    srv, proc = start_server(tmp_path_factory.mktemp("api-next"))
    try:
        seed(srv)
        events = "".join(json.dumps(e.to_dict()) + "\n" for e in _pcie_events()).encode()
        r = srv.post("/v1/ingest/events", content=events)
        assert r.status_code == 200, r.text
        r = srv.post("/v1/ingest/records", content=to_jsonl([TRAIN_1, GONE, TRAIN_2, LEGACY]).encode())
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


def test_api_names_the_constraint_that_rules_out_every_free_h100(next_server: Server) -> None:
    body = next_server.get(f"/v1/decisions/{TRAIN_2.decision_id}/why", model="H100", detail="devices").json()
    assert body["reasons"] == {"in_use": 1, "constraint_unsatisfied": 3}
    rows = {d["device"]: d["detail"] for d in body["devices"] if d["reason"] == "constraint_unsatisfied"}
    assert rows["gpu.nvidia.com/h100-01/gpu-1"] == {
        "constraint": "matchAttribute", "attribute": "resource.kubernetes.io/pcieRoot", "value": "pci0000:40",
        "requests": "nic,gpu"}
    assert body["would_get"]["result"] == "unschedulable"
    assert [b["reasons"] for b in body["would_get"]["blockers"] if b["model"] == "H100"] == [
        {"in_use": 1, "constraint_unsatisfied": 3}]


def test_per_device_detail_of_a_device_plugin_pod_says_why_there_is_none(next_server: Server) -> None:
    r = next_server.get(f"/v1/decisions/{LEGACY.decision_id}/why", model="H100", detail="devices")
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == (
        f"decision {LEGACY.decision_id}: pod team-a/legacy-1 asks for GPUs through the device plugin, which names "
        "no devices, so there are no per-device reasons; ask without detail=devices for the answer from the decision "
        "record")
    assert next_server.get(f"/v1/decisions/{LEGACY.decision_id}/why", model="H100").json()["skipped"] is False


def test_why_devices_of_a_device_plugin_pod_is_one_line_on_the_command_line(
        next_server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    from audit.cli.main import main
    from tests.api.conftest import TOKENS

    argv = ["why", "team-a/legacy-1", "--model", "H100", "--server", next_server.base, "--token", TOKENS["admin"]]
    assert main([*argv, "--devices"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [
        f"claimtrail why: {next_server.base}: HTTP 422: decision {LEGACY.decision_id}: pod team-a/legacy-1 asks for GPUs "
        "through the device plugin, which names no devices, so there are no per-device reasons; ask without "
        "detail=devices for the answer from the decision record"]
    assert main(argv) == 0  # the record's answer, as the explorer shows it
    assert capsys.readouterr().out.startswith("H100 chosen: of 8 nvidia.com/gpu, 1 allocated to this pod, 7 available.")
