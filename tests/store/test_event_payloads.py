"""An event whose payload the world cannot read is refused when it is admitted (by the API's
ingest and by the offline import of files alike), naming the field, instead of being stored and
stopping every later fold of its cluster with a traceback."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit.cli.main import main
from audit.events import EventError, validate_event
from audit.store.ingest import admit_event
from audit.world import World

POD_META = {"name": "p", "namespace": "ns", "creationTimestamp": "2026-05-01T07:00:00Z"}

REFUSED: dict[str, tuple[str, dict[str, Any], str]] = {
    "pod-spec-not-an-object": ("Pod", {"metadata": POD_META, "spec": "x"}, "payload.spec"),
    "pod-without-metadata": ("Pod", {"spec": {"containers": []}}, "payload.metadata"),
    "pod-metadata-null": ("Pod", {"metadata": None}, "payload.metadata"),
    "pod-created-at-no-time": ("Pod", {"metadata": {**POD_META, "creationTimestamp": "yesterday"}},
                               "payload.metadata.creationTimestamp"),
    "pod-gpu-limit-not-a-number": ("Pod", {"metadata": POD_META, "spec": {"nodeName": "n", "containers": [
        {"resources": {"limits": {"nvidia.com/gpu": "two"}}}]}},
        "payload.spec.containers.0.resources.limits.nvidia.com/gpu"),
    "pod-container-not-an-object": ("Pod", {"metadata": POD_META, "spec": {"nodeName": "n", "containers": ["c"]}},
                                    "payload.spec.containers.0"),
    "claim-allocation-not-an-object": ("ResourceClaim", {"status": {"allocation": 7}}, "payload.status.allocation"),
    "claim-result-not-an-object": ("ResourceClaim", {"status": {"allocation": {"devices": {"results": ["gpu-0"]}}}},
                                   "payload.status.allocation.devices.results.0"),
    "slice-of-a-node-without-pool": ("ResourceSlice", {"spec": {"nodeName": "n", "driver": "d"}}, "payload.spec.pool"),
    "slice-of-a-node-pool-null": ("ResourceSlice", {"spec": {"nodeName": "n", "driver": "d", "pool": None}},
                                  "payload.spec.pool"),
    "slice-pool-not-an-object": ("ResourceSlice", {"spec": {"nodeName": "n", "driver": "d", "pool": "p"}},
                                 "payload.spec.pool"),
    "slice-device-not-an-object": ("ResourceSlice", {"spec": {"nodeName": "n", "driver": "d", "pool": {
        "name": "p", "generation": 1}, "devices": ["gpu-0"]}}, "payload.spec.devices.0"),
    "node-gpus-not-a-number": ("Node", {"status": {"allocatable": {"nvidia.com/gpu": "eight"}}},
                               "payload.status.allocatable.nvidia.com/gpu"),
    "node-labels-not-an-object": ("Node", {"metadata": {"name": "n", "labels": ["a"]},
                                           "status": {"allocatable": {"nvidia.com/gpu": "8"}}}, "payload.metadata.labels"),
    "taint-rule-selector-not-an-object": ("DeviceTaintRule", {"spec": {"deviceSelector": "all"}},
                                          "payload.spec.deviceSelector"),
    "policy-not-a-policy": ("Policy", {"spec": {"tenants": "all"}}, "payload.apiVersion"),
}


def event(kind: str, payload: dict[str, Any]) -> dict[str, Any]:
    return {"cluster": "c1", "seq": 1, "time": "2026-05-01T07:00:00.000Z", "type": "upsert", "object_kind": kind,
            "namespace": "ns" if kind in ("Pod", "ResourceClaim") else "", "name": "o", "payload": payload}


@pytest.mark.parametrize(("kind", "payload", "path"), REFUSED.values(), ids=REFUSED.keys())
def test_an_event_payload_the_world_cannot_read_is_refused_naming_its_field(kind: str, payload: dict[str, Any],
                                                                            path: str) -> None:
    with pytest.raises(Exception) as folded:  # noqa: PT011 - what the world raised before admission refused it
        World("c1").apply(validate_event(event(kind, payload)))
    assert not isinstance(folded.value, EventError)
    with pytest.raises(EventError) as refused:
        admit_event(event(kind, payload))
    assert refused.value.path == path, str(refused.value)


@pytest.mark.parametrize(("kind", "payload", "path"), REFUSED.values(), ids=REFUSED.keys())
def test_replay_of_files_refuses_such_an_event_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          kind: str, payload: dict[str, Any], path: str) -> None:
    records, events = tmp_path / "records.jsonl", tmp_path / "events.jsonl"
    records.write_text("")
    events.write_text(json.dumps(event(kind, payload)) + "\n")
    code = main(["replay", "--quiet", "--records", str(records), "--events", str(events)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and f"--events {events}:1 at {path}: WorldEvent: {path}: " in err, err


ADMITTED: dict[str, tuple[str, dict[str, Any]]] = {
    "pod-pending": ("Pod", {"metadata": POD_META, "spec": {"containers": [{"name": "main"}]}}),
    "pod-with-device-plugin-gpus": ("Pod", {"metadata": POD_META, "spec": {"nodeName": "n", "containers": [
        {"resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}),
    "claim-allocated": ("ResourceClaim", {"metadata": {"namespace": "ns"}, "status": {"allocation": {"devices": {
        "results": [{"driver": "d", "pool": "p", "device": "gpu-0"}]}}}}),
    "slice-of-a-node": ("ResourceSlice", {"spec": {"nodeName": "n", "driver": "d", "pool": {"name": "p", "generation": 1},
                                                   "devices": [{"name": "gpu-0", "attributes": {}}]}}),
    "node-with-gpus": ("Node", {"metadata": {"name": "n", "labels": {"a": "b"}},
                                "status": {"allocatable": {"nvidia.com/gpu": 8}}}),
    "object-with-nulls": ("Pod", {"metadata": {**POD_META, "labels": None}, "spec": None, "status": None}),
}


@pytest.mark.parametrize(("kind", "payload"), ADMITTED.values(), ids=ADMITTED.keys())
def test_an_event_payload_the_world_reads_is_admitted_and_folds(kind: str, payload: dict[str, Any]) -> None:
    World("c1").apply(admit_event(event(kind, payload)))
