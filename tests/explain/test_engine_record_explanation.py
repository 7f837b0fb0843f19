"""Explaining the engine's own records: counts cover exactly the model's devices, as ``explain`` does."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.explain import explain, explain_record
from audit.explain.reasons import PRIMARY_ORDER
from audit.records import DeviceRef, Reason, TierSummary
from audit.scheduler.engine import decide
from tests.api import factory
from tests.scheduler.worlds import dump_world, occupied, submit, world_view

ALL = list(range(8))
NODES = ["h100-000", "h100-001", "a100-000", "a100-001", "l40s-000"]


def _decided(held: dict[str, list[int]], size: int = 1, taints: Any = (), **policy_spec: Any) -> tuple[Any, str, Any]:
    sim = occupied(held, taints, **policy_spec)
    key = submit(sim, "job-1", size=size)
    return sim.world, key, decide(sim.world, key, 1, sim.now).record


@pytest.mark.parametrize(
    ("held", "size", "model", "summary"),
    [
        pytest.param({"h100-000": ALL, "h100-001": ALL}, 1, "H100",
                     "H100 skipped: of 16 H100, 16 in use. Allocated A100 gpu-0 on node a100-000 (tier 1) "
                     "under policy 1.", id="fallback-counts-no-a100-as-h100"),
        pytest.param({"h100-000": ALL, "h100-001": ALL[:5]}, 4, "H100",
                     "H100 skipped: of 16 H100, 13 in use, 3 available; no node had 4 usable H100 together. "
                     "Allocated A100 gpu-0, gpu-1, gpu-2, gpu-3 on node a100-000 (tier 1) under policy 1.",
                     id="free-h100-too-thin-names-insufficient-on-node"),
        pytest.param({"h100-000": ALL}, 1, "H100",
                     "H100 chosen: of 16 H100, 1 allocated to this pod, 8 in use, 7 available. Allocated H100 gpu-0 "
                     "on node h100-001 (tier 0) under policy 1.", id="chosen-model-names-the-pods-own-device"),
    ],
)
def test_why_sentence_from_an_engine_record(held, size, model, summary):
    _, _, record = _decided(held, size)
    assert explain_record(record, model).summary == summary


@pytest.mark.parametrize(
    ("outcome", "recorded", "answered"),
    [
        pytest.param("allocated", {"selected": 1, "not_reached": 3, "in_use": 2},
                     {"selected": 1, "in_use": 2, "available": 3}, id="selected-stays-not-reached-reads-available"),
        pytest.param("error", {"selected": 1, "not_reached": 3, "in_use": 2}, {"in_use": 2, "available": 4},
                     id="selected-of-a-failed-binding-reads-available"),
        pytest.param("unschedulable", {"unhealthy": 2, "node_filtered": 5}, {"node_filtered": 5, "unhealthy": 2},
                     id="device-reasons-kept"),
        pytest.param("deferred", {"quota_exhausted": 16}, {"quota_exhausted": 16}, id="closed-tier-keeps-its-reason"),
    ],
)
def test_record_codes_as_why_reasons(outcome, recorded, answered):
    record = factory._record(9, "team-a", "team-a", "p", outcome, tiers=[factory.h100_tier(recorded)])
    answer = explain_record(record, "H100")
    assert answer.reasons == answered
    assert list(answer.reasons) == list(answered)  # the pod's own first, then primary order


@pytest.mark.parametrize("mode", ["strict", "wait-for-preferred"])
def test_tiers_held_shut_by_the_fallback_mode_read_as_the_full_explanation(mode):
    world, key, record = _decided({"h100-000": ALL, "h100-001": ALL, "a100-000": ALL}, fallback={"mode": mode})
    fast = explain_record(record, "A100")
    assert fast.reasons == {"in_use": 8, "available": 8}
    assert fast.reasons == explain(world_view(world), key, "A100", world.policy, record=record).reasons


occupancy = st.dictionaries(st.sampled_from(NODES), st.lists(st.integers(0, 7), max_size=8, unique=True), max_size=5)
tainted = st.lists(st.tuples(st.sampled_from(NODES), st.integers(0, 7)), max_size=4)


@settings(max_examples=25, deadline=None)
@given(occupancy, tainted, st.sampled_from([1, 2, 4, 8]))
def test_record_answer_agrees_with_the_full_explanation(held, taints, size):
    world, key, record = _decided(held, size, taints)
    for model in ("H100", "A100"):
        fast = explain_record(record, model)
        full = explain(world_view(world), key, model, world.policy, record=record)
        assert fast.visible == sum(d.model == model for d in world.devices.values())
        assert fast.reasons == full.reasons
        assert set(fast.reasons) <= {*PRIMARY_ORDER, Reason.SELECTED.value, Reason.QUOTA_EXHAUSTED.value}



def _device_plugin_records() -> dict[str, Any]:
    """A device-plugin pod deferred on its tenant's H100 quota, one allocated on an H100 node, and
    the watcher's record of a device-plugin binding (``ingest.kube.observe``: no tiers)."""
    from audit.scheduler.engine import decide
    from audit.world import World
    from tests.builders import decision
    from tests.metrics.eventlog import Log, policy_doc

    log = Log(policy_doc(weights={"team-a": 1, "team-b": 1}, quotas={"team-a": {"H100": 4}, "team-b": {"H100": 8}}))
    log.dp_nodes("H100", 2, 8)
    log.at(0).dp_pod("team-a/running", 4).bind("team-a/running", "h100-dp-0")
    log.at(1).dp_pod("team-a/waiting", 2).dp_pod("team-b/fits", 2)
    world = World("c1")
    for ev in log.events:
        world.apply(ev)
    observed = decision(pod="legacy-1", preference=[], outcome="allocated", node="h100-dp-1", allocated_model="H100",
                        track="device-plugin", policy_version="1", tiers=[])
    return {"deferred": decide(world, "team-a/waiting", 1, log.now).record,
            "allocated": decide(world, "team-b/fits", 1, log.now).record, "observed": observed}


@pytest.mark.parametrize(("which", "model", "codes", "summary"), [
    pytest.param("deferred", "H100", ["quota_exhausted"],
                 "H100 skipped: of 16 nvidia.com/gpu, 4 in use, 12 over the tenant's quota; tenant quota 4/4 H100 used. Pod not "
                 "allocated (deferred, retry class quota) under policy 1.", id="quota-of-the-model-its-nodes-hold"),
    pytest.param("allocated", "H100", [],
                 "H100 chosen: of 16 nvidia.com/gpu, 2 allocated to this pod, 4 in use, 10 available. Allocated H100 on node "
                 "h100-dp-0 (tier 0) under policy 1.", id="allocated-model"),
    pytest.param("deferred", "A100", ["no_model_choice"],
                 "A100 skipped: a device-plugin pod does not choose a model (it is counted as nvidia.com/gpu), and its "
                 "record does not say which nodes hold A100 or what their GPUs were doing. Pod not allocated (deferred, "
                 "retry class quota) under policy 1.", id="a-model-no-blocker-names"),
    pytest.param("allocated", "L4", ["no_model_choice"],
                 "L4 skipped: a device-plugin pod does not choose a model (it is counted as nvidia.com/gpu), and its "
                 "record does not say which nodes hold L4 or what their GPUs were doing. Allocated H100 on node "
                 "h100-dp-0 (tier 0) under policy 1.", id="a-model-it-did-not-get"),
    pytest.param("observed", "A100", ["no_model_choice"],
                 "A100 skipped: a device-plugin pod does not choose a model (it is counted as nvidia.com/gpu), and its "
                 "record does not say which nodes hold A100 or what their GPUs were doing. Allocated H100 on node "
                 "h100-dp-1 under policy 1.", id="a-record-without-counts"),
    pytest.param("observed", "H100", [],
                 "H100 chosen: its record does not count its nodes' nvidia.com/gpu. Allocated H100 on node h100-dp-1 "
                 "under policy 1.", id="the-model-of-a-record-without-counts"),
])
def test_a_device_plugin_record_answers_for_the_model_its_nodes_hold(which: str, model: str, codes: list[str],
                                                                     summary: str) -> None:
    """Its one tier asks for GPUs of any model: the model it got, or whose quota turned it down, is
    the one it asked for, and the record's blockers of that model say why. Of any other model the
    record says nothing (its counts are of every device-plugin GPU, its quota blocker another
    model's): the pod chose no model, not one outside a preference list."""
    answer = explain_record(_device_plugin_records()[which], model)
    assert [b["code"] for b in answer.blockers] == codes
    assert answer.summary == summary


H100_CLOSED = [{"name": "alpha", "namespaces": ["alpha"], "weight": 1,
                "quotas": {"H100": {"nominal": 0, "borrowingLimit": 0}}}]


def test_a_tier_the_quota_closed_reads_alike_from_the_record_and_device_by_device():
    """The quota, not the devices, kept the pod off H100: both views say ``quota_exhausted`` for
    every H100; the per-device answer adds what each device's own checks found."""
    world, key, record = _decided({"h100-000": ALL[:5]}, tenants=H100_CLOSED)
    fast = explain_record(record, "H100")
    full = explain(world_view(world), key, "H100", world.policy, record=record, detail=True)
    assert fast.reasons == full.reasons == {"quota_exhausted": 16}
    assert fast.blockers == full.blockers
    assert Counter((d.reason, d.detail["verdict"]) for d in full.devices or []) == {
        ("quota_exhausted", "in_use"): 5, ("quota_exhausted", "available"): 11}
    assert fast.summary == ("H100 skipped: of 16 H100, 16 over the tenant's quota; tenant quota 0/0 H100 used. "
                            "Allocated A100 gpu-0 on node a100-000 (tier 1) under policy 1.")
    assert full.summary == ("H100 skipped: of 16 H100, 16 over the tenant's quota (5 in use, 11 available); tenant "
                            "quota 0/0 H100 used. Allocated A100 gpu-0 on node a100-000 (tier 1) under policy 1.")


DUMPS = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
TWO_QUOTAS = (DUMPS / "policy-h100-a100-quotas.yaml", DUMPS / "cluster-dra-two-quotas.yaml")
DEFERRED_V4 = "Pod not allocated (deferred, retry class quota) under policy v4."
_A100_FULL = {"code": "quota_exhausted", "model": "A100", "used": 4, "nominal": 4, "limit": 4, "lendable": 0}
_H100_FULL = {"code": "quota_exhausted", "model": "H100", "used": 2, "nominal": 2, "limit": 2, "lendable": 0}

# (pod, model): the answer's reasons, blockers and sentence from the engine's record alone. Both
# of team-a's quotas are used up; train-2's one tier (A100|H100) and train-1's second are closed
# by both, train-1's first (H100) by the H100 quota.
SEVERAL_QUOTAS: dict[tuple[str, str], tuple[dict[str, int], list[dict[str, Any]], str]] = {
    ("team-a/train-2", "A100"): (
        {"quota_exhausted": 12}, [{**_A100_FULL, "tier": 0, "requested": 2, "over_quota": 8}],
        "A100 skipped: of 12 A100|H100, 12 over the tenant's quota; tenant quota 4/4 A100 used (8 of the GPUs over "
        f"quota are A100). {DEFERRED_V4}"),
    # was: the A100 quota's figures said as H100's ("tenant quota 4/4 H100 used")
    ("team-a/train-2", "H100"): (
        {"quota_exhausted": 12}, [{**_H100_FULL, "tier": 0, "requested": 2, "over_quota": 4}],
        "H100 skipped: of 12 A100|H100, 12 over the tenant's quota; tenant quota 2/2 H100 used (4 of the GPUs over "
        f"quota are H100). {DEFERRED_V4}"),
    ("team-a/train-1", "A100"): (
        {"quota_exhausted": 12}, [{**_A100_FULL, "tier": 1, "requested": 1, "over_quota": 8}],
        "A100 skipped: of 12 A100|H100, 12 over the tenant's quota; tenant quota 4/4 A100 used (8 of the GPUs over "
        f"quota are A100). {DEFERRED_V4}"),
    # the model's own tier, closed on its quota alone: as it always was
    ("team-a/train-1", "H100"): (
        {"quota_exhausted": 4}, [{**_H100_FULL, "tier": 0, "requested": 1}],
        f"H100 skipped: of 4 H100, 4 over the tenant's quota; tenant quota 2/2 H100 used. {DEFERRED_V4}"),
}


@pytest.mark.parametrize(("pod", "model"), sorted(SEVERAL_QUOTAS))
def test_a_tier_closed_by_several_quotas_is_answered_with_the_models_own(pod: str, model: str) -> None:
    """The record names each model whose quota closed the tier, with its part of the tier's count:
    the answer gives the asked model's quota and part, from the record and device by device."""
    world = dump_world(*TWO_QUOTAS)
    record = decide(world, pod, 1, world.time_ms).record
    fast = explain_record(record, model)
    assert (fast.reasons, fast.blockers, fast.summary) == SEVERAL_QUOTAS[pod, model]
    assert explain(world_view(world), pod, model, world.policy, record=record, detail=True).blockers == fast.blockers


def test_the_pods_own_device_reads_selected_in_both_views():
    world, key, record = _decided({"h100-000": ALL})
    fast = explain_record(record, "H100")
    full = explain(world_view(world), key, "H100", world.policy, record=record, detail=True)
    assert fast.reasons == full.reasons == {"selected": 1, "in_use": 8, "available": 7}
    assert [d.device for d in full.devices or [] if d.reason == "selected"] == [d.device for d in record.devices]


@pytest.mark.parametrize(
    ("track", "devices", "recorded", "answered"),
    [
        pytest.param("dra", 1, {"selected": 7, "in_use": 2}, {"selected": 1, "in_use": 2, "available": 6},
                     id="selected-on-nodes-passed-over-reads-available"),
        pytest.param("dra", 2, {"selected": 2, "not_reached": 3}, {"selected": 2, "available": 3},
                     id="the-pods-own-devices-stay-selected"),
        pytest.param("device-plugin", 0, {"selected": 2, "not_reached": 3}, {"selected": 2, "available": 3},
                     id="device-plugin-gpus-have-no-identities-and-stay-as-recorded"),
    ],
)
def test_selected_counts_only_the_devices_the_pod_holds(track, devices, recorded, answered):
    tier = TierSummary(index=0, request="gpu", model="H100", considered=sum(recorded.values()), reasons=recorded)
    record = factory._record(9, "team-a", "team-a", "p", "allocated", allocated="H100", node="h100-01",
                             device="gpu.nvidia.com/h100-01/gpu-0", tier_index=0, tiers=[tier])
    record.track = track
    record.devices = [DeviceRef(device=f"gpu.nvidia.com/h100-01/gpu-{i}", node="h100-01", model="H100",
                                request="gpu") for i in range(devices)]
    assert explain_record(record, "H100").reasons == answered


def test_a_record_whose_devices_name_no_tier_request_keeps_its_counts():
    # another producer's naming: nothing says which tier gave which device, so nothing is moved
    tier = TierSummary(index=0, request="gpu/h100", model="H100", considered=9, reasons={"selected": 7, "in_use": 2})
    record = factory._record(9, "team-a", "team-a", "p", "allocated", allocated="H100", node="h100-01",
                             device="gpu.nvidia.com/h100-01/gpu-0", tier_index=0, tiers=[tier])
    assert explain_record(record, "H100").reasons == {"selected": 7, "in_use": 2}
