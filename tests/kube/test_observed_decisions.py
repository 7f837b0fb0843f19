"""Claims, bindings and scheduler events seen by the watcher become DecisionRecords."""

from __future__ import annotations

import pytest

from audit.records import DecisionRecord, decision_id, validate_record
from ingest.kube.observe import DecisionObserver
from tests.kube.apiserver import FakeApiServer, WatchScript
from tests.kube.harness import FIXED_TIME, CollectingSink, make_watcher, populate, run_until_caught_up


def _observe(scripts: dict | None = None) -> list[DecisionRecord]:
    with FakeApiServer() as server:
        populate(server)
        for kind, script in (scripts or {}).items():
            server.collections[kind].scripts = script
        sink = CollectingSink()
        observer = DecisionObserver("test-cluster", lambda: FIXED_TIME, check_allocations=False)
        watcher = make_watcher(server, sink, observer=observer)
        run_until_caught_up(server, watcher)
    return sink.records


@pytest.fixture(scope="module")
def records() -> dict[str, DecisionRecord]:
    out = {r.decision_id: r for r in _observe()}
    for r in out.values():
        validate_record(r.to_dict())
    return out


TRAIN_POD = "5a0e6f41-0001-4a8d-8f1e-6b2b7c9d0001"
TRAIN_CLAIM = "7d1c2b9e-0001-4c55-9a51-1f0e5d3a0001"
LEGACY_POD = "5a0e6f41-0002-4a8d-8f1e-6b2b7c9d0002"


def test_three_decisions_are_observed(records: dict[str, DecisionRecord]) -> None:
    assert sorted(records) == sorted(
        [decision_id("test-cluster", TRAIN_POD, 1), decision_id("test-cluster", TRAIN_CLAIM, 0),
         decision_id("test-cluster", LEGACY_POD, 0)]
    )


def test_cannot_allocate_all_claims_becomes_an_unschedulable_dra_record(records: dict[str, DecisionRecord]) -> None:
    r = records[decision_id("test-cluster", TRAIN_POD, 1)]
    assert (r.outcome, r.track, r.template_version, r.attempt, r.retry_class) == ("unschedulable", "dra", "v2", 1, "unschedulable")
    assert "cannot allocate all claims" in r.message
    assert r.wait_ms == 1000  # created 10:00:00, event at 10:00:01
    # the engine's names: the tiers' models under the policy's device-model table, not the subrequests'
    assert (r.preference, r.preferred_model) == (["H100", "A100"], "H100")


def test_claim_allocation_with_binding_becomes_an_allocated_dra_record(records: dict[str, DecisionRecord]) -> None:
    r = records[decision_id("test-cluster", TRAIN_CLAIM, 0)]
    assert (r.outcome, r.track, r.node, r.template_version) == ("allocated", "dra", "node-a", "v2")
    # the device's model is the policy's name for its productName; its request keeps the subrequest
    assert [(d.device, d.model, d.request) for d in r.devices] == [
        ("gpu.nvidia.com/node-a/gpu-0", "H100", "gpu/h100")
    ]
    assert (r.preference, r.tier_index, r.fallback) == (["H100", "A100"], 0, False)
    assert (r.preferred_model, r.allocated_model) == ("H100", "H100")
    assert r.wait_ms == 4000  # creation 10:00:00 -> PodScheduled 10:00:04
    assert r.claims == ["train-0-gpu-5x8q2"] and r.output_digest == r.compute_output_digest()


def test_gpu_limit_pod_becomes_a_device_plugin_record(records: dict[str, DecisionRecord]) -> None:
    r = records[decision_id("test-cluster", LEGACY_POD, 0)]
    # the model of its node's GPU product label (NVIDIA-A100-SXM4-80GB) under the policy's table
    assert (r.outcome, r.track, r.node, r.allocated_model, r.template_version) == (
        "allocated", "device-plugin", "node-b", "A100", "device-plugin")
    assert [(d.device, d.model) for d in r.devices] == [("nvidia.com/gpu/node-b/0", "A100")]
    assert r.wait_ms == 2000


def test_reconnects_and_relists_do_not_double_records(records: dict[str, DecisionRecord]) -> None:
    faulty = _observe({
        "Pod": [WatchScript(drop_after=1), WatchScript(replay_from_start=True), WatchScript(expired=True)],
        "Event": [WatchScript(gone_after=0)],
        "ResourceClaim": [WatchScript(replay_from_start=True)],
    })
    assert sorted(r.decision_id for r in faulty) == sorted(records)
    # seq is the world position at which each was observed, which depends on arrival order
    assert {r.decision_id: _content(r) for r in faulty} == {k: _content(v) for k, v in records.items()}


def _content(r: DecisionRecord) -> dict:
    return {k: v for k, v in r.to_dict().items() if k not in ("seq", "output_digest")}


def test_each_failed_attempt_of_a_device_plugin_pod_is_a_record_and_cpu_pods_are_ignored() -> None:
    with FakeApiServer() as server:
        populate(server, changes="changes-pending.yaml")
        sink = CollectingSink()
        observer = DecisionObserver("test-cluster", lambda: FIXED_TIME, check_allocations=False)
        run_until_caught_up(server, make_watcher(server, sink, observer=observer))
    got = sorted((r.pod, r.attempt, r.track, r.outcome, r.wait_ms, r.preference, r.preferred_model)
                 for r in sink.records)
    assert got == [
        ("legacy-big", 1, "device-plugin", "unschedulable", 2000, ["nvidia.com/gpu"], ""),
        ("legacy-big", 2, "device-plugin", "unschedulable", 302000, ["nvidia.com/gpu"], ""),
    ]
    assert all("Insufficient nvidia.com/gpu" in r.message for r in sink.records)
