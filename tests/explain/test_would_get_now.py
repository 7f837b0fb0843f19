"""``why`` for a pending pod says what it would get if scheduled now, apart from its outcome, and
names the holder of every in-use device within the asker's tenant only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from audit.cli.main import main
from audit.explain import ClusterView, explain, would_get_now
from audit.policy import parse_policy
from tests.explain.builders import DRIVER, claim, gpu, node, pod, scenario, slice_

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explain"

# dump, pod, claim, the would_get answer, the sentence it ends the summary with
ALLOCATABLE: dict[str, tuple[str, str, str, dict[str, Any], str]] = {
    "first_alternative_free": (
        "cluster-numa.yaml", "team-a/infer-4", "team-a/infer-4-devices",
        {"result": "allocated", "model": "H100", "node": "h100-11", "tier": 0, "retry_class": "",
         "devices": ["gpu.nvidia.com/h100-11/gpu-2", "rdma.example.com/h100-11-nic/nic-1"]},
        "If scheduled now: H100 gpu-2, nic-1 on node h100-11 (tier 0)."),
    "only_the_fallback_free": (
        "cluster-pending.yaml", "team-a/train-1", "team-a/train-1-gpu",
        {"result": "allocated", "model": "A100", "node": "a100-07", "tier": 1, "retry_class": "",
         "devices": ["gpu.nvidia.com/a100-07/gpu-3"]},
        "If scheduled now: A100 gpu-3 on node a100-07 (tier 1)."),
}


def _why(capsys: pytest.CaptureFixture[str], dump: str, pod_key: str) -> dict[str, Any]:
    assert main(["why", "--dump", str(FIXTURES / dump), pod_key, "--model", "H100", "-o", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("case", sorted(ALLOCATABLE))
def test_pending_pod_would_get_what_allocate_gives_on_that_node(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    dump, pod_key, claim_key, expected, sentence = ALLOCATABLE[case]
    answer = _why(capsys, dump, pod_key)
    assert answer["outcome"]["result"] == "pending"  # the recorded state stays as it is
    assert answer["would_get"] == expected
    assert answer["summary"].endswith("Pod not allocated (pending). " + sentence)
    main(["allocate", "-f", str(FIXTURES / dump), "--node", expected["node"], "--claim", claim_key, "-o", "json"])
    allocated = json.loads(capsys.readouterr().out)
    assert [f"{r['driver']}/{r['pool']}/{r['device']}" for r in allocated["allocations"][0]["results"]] == \
        expected["devices"]


def test_nothing_fits_names_the_blocker_of_every_tier(capsys: pytest.CaptureFixture[str]) -> None:
    answer = _why(capsys, "cluster-pcie.yaml", "team-a/train-2")
    would = answer["would_get"]
    assert would["result"] == "unschedulable" and would["node"] == "" and would["devices"] == []
    assert [(b["tier"], b["request"], b["model"], b["reasons"]) for b in would["blockers"]] == [
        (0, "nic", "", {"in_use": 1, "constraint_unsatisfied": 1}),
        (1, "gpu/h100", "H100", {"in_use": 1, "constraint_unsatisfied": 3}),
        (2, "gpu/a100", "", {}),
    ]
    assert all(b["code"] == "insufficient_on_node" and b["best"] == 0 for b in would["blockers"])
    assert answer["summary"].endswith(
        "Pod not allocated (pending). If scheduled now: nothing fits (tier 0 nic: 1 in use, 1 violating a claim "
        "constraint; tier 1 H100: 1 in use, 3 violating a claim constraint; tier 2 gpu/a100: no device it asks for).")


def test_a_tier_closed_by_quota_falls_through_to_the_next() -> None:
    policy = parse_policy({"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "p"},
                           "spec": {"version": "v7", "tenants": [
                               {"name": "team-a", "namespaces": ["team-a"],
                                "quotas": {"H100": {"nominal": 1, "borrowingLimit": 0}}}]}})
    objects = scenario(node("n1"), slice_("n1", [gpu("gpu-0"), gpu("gpu-1"), gpu("gpu-2", "A100")]),
                       claim("older", "team-a", allocated=[("n1", "gpu-0")]))
    view = ClusterView.from_objects(objects)
    assert would_get_now(view, "team-a/train", policy) == {
        "result": "allocated", "model": "A100", "node": "n1", "tier": 1, "retry_class": "",
        "devices": [f"{DRIVER}/n1/gpu-2"]}
    # Without the quota the free H100 is taken.
    assert would_get_now(view, "team-a/train")["devices"] == [f"{DRIVER}/n1/gpu-1"]


def test_the_node_tie_break_prefers_the_earlier_alternative_then_the_node_name() -> None:
    objects = scenario(node("n3"), node("n2"), node("n1"), slice_("n1", [gpu("gpu-0", "A100")]),
                       slice_("n2", [gpu("gpu-0")]), slice_("n3", [gpu("gpu-0")]))
    answer = explain(ClusterView.from_objects(objects), "team-a/train", "A100")
    assert answer.would_get is not None
    assert (answer.would_get["node"], answer.would_get["model"]) == ("n2", "H100")


def test_an_allocated_pod_has_no_would_get(capsys: pytest.CaptureFixture[str]) -> None:
    answer = _why(capsys, "cluster-allocated.yaml", "team-a/train-1")
    assert "would_get" not in answer and answer["outcome"]["result"] == "allocated"


def _held_scenario() -> ClusterView:
    return ClusterView.from_objects(scenario(
        node("n1"), slice_("n1", [gpu("gpu-0"), gpu("gpu-1"), gpu("gpu-2")]),
        claim("mine", "team-a", allocated=[("n1", "gpu-0")]), pod("notebook", "mine", "team-a"),
        claim("theirs", "team-b", allocated=[("n1", "gpu-1")]), pod("serve", "theirs", "team-b")))


HOLDERS = {
    "admin_or_dump_sees_every_holder": (None, {
        "gpu-0": {"by": "pod team-a/notebook (claim team-a/mine)", "claim": "team-a/mine", "pod": "team-a/notebook"},
        "gpu-1": {"by": "pod team-b/serve (claim team-b/theirs)", "claim": "team-b/theirs", "pod": "team-b/serve"}}),
    "a_tenant_sees_its_own_holders_and_another_tenant": ("team-a", {
        "gpu-0": {"by": "pod team-a/notebook (claim team-a/mine)", "claim": "team-a/mine", "pod": "team-a/notebook"},
        "gpu-1": {"by": "another tenant"}}),
    "the_other_tenant_sees_the_mirror_image": ("team-b", {
        "gpu-0": {"by": "another tenant"},
        "gpu-1": {"by": "pod team-b/serve (claim team-b/theirs)", "claim": "team-b/theirs", "pod": "team-b/serve"}}),
}


@pytest.mark.parametrize("case", sorted(HOLDERS))
def test_in_use_devices_name_their_holder_within_the_tenant(case: str) -> None:
    viewer, expected = HOLDERS[case]
    answer = explain(_held_scenario(), "team-a/train", "H100", detail=True, viewer=viewer)
    assert answer.devices is not None
    in_use = {d.device.rsplit("/", 1)[1]: d.detail for d in answer.devices if d.reason == "in_use"}
    assert in_use == expected
    assert not any("theirs" in json.dumps(d.to_dict()) for d in answer.devices) or viewer in (None, "team-b")


def test_text_output_lists_every_blocked_tier(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["why", "--dump", str(FIXTURES / "cluster-pcie.yaml"), "team-a/train-2", "--model", "H100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line for line in lines if line.startswith("now: ")] == [
        "now: tier 0 nic: insufficient_on_node (in_use=1, constraint_unsatisfied=1)",
        "now: tier 1 gpu/h100: insufficient_on_node (in_use=1, constraint_unsatisfied=3)",
        "now: tier 2 gpu/a100: insufficient_on_node (no device it asks for)",
    ]


def _fallback_policy(mode: str) -> Any:
    return parse_policy({"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "p"},
                         "spec": {"version": "v3", "fallback": {"mode": mode}}})


FALLBACK_MODES = {
    # strict: the preferred model or wait, so the free A100 is not taken
    "strict": ("unschedulable", [], "If scheduled now: nothing fits (tier 0 H100: 1 in use; tier 1 A100: no fallback "
                                    "under the policy's strict fallback mode)."),
    # the pod's wait is unknown offline: the fallback is taken as open, and the answer says so
    "wait-for-preferred": ("allocated", [f"{DRIVER}/n1/gpu-1"],
                           "If scheduled now: A100 gpu-1 on node n1 (tier 1) (once the policy's wait-for-preferred "
                           "fallback allows it)."),
    "immediate": ("allocated", [f"{DRIVER}/n1/gpu-1"], "If scheduled now: A100 gpu-1 on node n1 (tier 1)."),
}


@pytest.mark.parametrize("mode", sorted(FALLBACK_MODES))
def test_the_policy_fallback_mode_decides_whether_the_fallback_is_taken(mode: str) -> None:
    result, devices, sentence = FALLBACK_MODES[mode]
    objects = scenario(node("n1"), slice_("n1", [gpu("gpu-0"), gpu("gpu-1", "A100")]),
                       claim("other", "team-b", allocated=[("n1", "gpu-0")]))
    answer = explain(ClusterView.from_objects(objects), "team-a/train", "H100", _fallback_policy(mode))
    assert answer.would_get is not None
    assert (answer.would_get["result"], answer.would_get["devices"]) == (result, devices)
    assert answer.summary.endswith(sentence)


QUOTA_TIER = FIXTURES / "cluster-quota-tier.yaml"
# Events in the order a watcher logs a cluster: what the devices are before what holds them.
KIND_ORDER = ("Policy", "DeviceClass", "Node", "ResourceSlice", "ResourceClaim", "Pod")

# policy, pod, the would_get answer, the sentence it ends the summary with. Each pod's second
# alternative selects A100 and H100; team-a's H100 quota is used up, and the only H100s free are
# on gpu-node-1, which sorts first.
SEVERAL_MODELS: dict[str, tuple[str, str, dict[str, Any], str]] = {
    "the_model_within_quota_on_a_later_node": (
        "policy-h100-quota.yaml", "team-a/train-1",
        {"result": "allocated", "model": "A100", "node": "gpu-node-2", "tier": 1, "retry_class": "",
         "devices": ["gpu.nvidia.com/gpu-node-2/gpu-1"]},
        "under policy v4. If scheduled now: A100 gpu-1 on node gpu-node-2 (tier 1)."),
    "nothing_when_only_the_model_over_quota_is_free": (
        "policy-h100-quota.yaml", "team-a/train-2",
        {"result": "unschedulable", "model": "", "node": "", "tier": -1, "devices": [], "blockers": [
            {"code": "quota_exhausted", "tier": 0, "tenant": "team-a", "model": "H100", "used": 1, "requested": 2,
             "nominal": 1, "limit": 1, "lendable": 0, "request": "gpu/h100"},
            {"code": "insufficient_on_node", "tier": 1, "request": "gpu/any", "model": "A100|H100", "count": 2,
             "best": 1, "best_node": "gpu-node-2", "reasons": {"in_use": 2, "available": 1, "quota_exhausted": 2}}]},
        "under policy v4. If scheduled now: nothing fits (tier 0 H100: tenant quota 1/1 H100 used; tier 1 A100|H100: "
        "2 in use, 1 available, 2 over the tenant's quota; at most 1 on node gpu-node-2, 2 needed)."),
    # no model of the tier fits: the tier is closed, with a blocker per model as the engine records
    # it, each with its part of the tier's 5 devices
    "closed_when_no_model_of_the_tier_fits": (
        "policy-gpu-quotas.yaml", "team-a/train-1",
        {"result": "unschedulable", "model": "", "node": "", "tier": -1, "devices": [], "blockers": [
            {"code": "quota_exhausted", "tier": 0, "tenant": "team-a", "model": "H100", "used": 1, "requested": 1,
             "nominal": 1, "limit": 1, "lendable": 0, "request": "gpu/h100"},
            {"code": "quota_exhausted", "tier": 1, "tenant": "team-a", "model": "A100", "used": 0, "requested": 1,
             "nominal": 0, "limit": 0, "lendable": 0, "over_quota": 2, "request": "gpu/any"},
            {"code": "quota_exhausted", "tier": 1, "tenant": "team-a", "model": "H100", "used": 1, "requested": 1,
             "nominal": 1, "limit": 1, "lendable": 0, "over_quota": 3, "request": "gpu/any"}]},
        "under policy v5. If scheduled now: nothing fits (tier 0 H100: tenant quota 1/1 H100 used; tier 1 A100: "
        "tenant quota 0/0 A100 used (2 of the GPUs over quota are A100); tier 1 H100: tenant quota 1/1 H100 used "
        "(3 of the GPUs over quota are H100))."),
}


def _engine_decision(policy: str, pod_key: str, dump: Path = QUOTA_TIER) -> Any:
    """The decision engine's decision for the pod on the same dump and policy."""
    from audit.events import WorldEvent
    from audit.scheduler.engine import decide
    from audit.world import World

    objects = [yaml.safe_load((FIXTURES / policy).read_text()), *yaml.safe_load(dump.read_text())["items"]]
    world = World("lab")
    for seq, o in enumerate(sorted(objects, key=lambda o: KIND_ORDER.index(o["kind"]))):
        world.apply(WorldEvent(cluster="lab", seq=seq, time="2026-05-01T07:00:00.000000Z", type="upsert",
                               object_kind=o["kind"], namespace=o["metadata"].get("namespace", ""),
                               name=o["metadata"]["name"], payload=o))
    return decide(world, pod_key, 1, world.time_ms).record


@pytest.mark.parametrize("case", sorted(SEVERAL_MODELS))
def test_a_tier_of_several_models_never_offers_one_over_quota(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    policy, pod_key, expected, sentence = SEVERAL_MODELS[case]
    assert main(["why", "--dump", str(QUOTA_TIER), pod_key, "--model", "H100", "--policy", str(FIXTURES / policy),
                 "-o", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["would_get"] == expected
    assert answer["summary"].endswith("Pod not allocated (pending) " + sentence)
    # The decision engine, on the same objects and policy, places the pod alike (or not at all).
    record = _engine_decision(policy, pod_key)
    assert (record.outcome == "allocated", [d.device for d in record.devices]) == \
        (expected["result"] == "allocated", expected["devices"])


TWO_QUOTAS = FIXTURES / "cluster-dra-two-quotas.yaml"
# pod -> the sentence why --dump ends with for it. Both of team-a's quotas are used up: a tier of
# A100 and H100 is closed by both, and each model's quota is said with its part of the tier's
# devices (was: "tier 0 A100|H100: tenant quota 4/4 A100 used; no other model of the tier fits
# the tenant's quota either", the H100 quota unsaid)
BOTH_QUOTAS_NOW: dict[str, str] = {
    "team-a/train-1": "If scheduled now: nothing fits (tier 0 H100: tenant quota 2/2 H100 used; tier 1 A100: tenant "
                      "quota 4/4 A100 used (8 of the GPUs over quota are A100); tier 1 H100: tenant quota 2/2 H100 "
                      "used (4 of the GPUs over quota are H100)).",
    "team-a/train-2": "If scheduled now: nothing fits (tier 0 A100: tenant quota 4/4 A100 used (8 of the GPUs over "
                      "quota are A100); tier 0 H100: tenant quota 2/2 H100 used (4 of the GPUs over quota are H100)).",
}


@pytest.mark.parametrize("pod_key", sorted(BOTH_QUOTAS_NOW))
def test_a_tier_closed_by_several_quotas_now_is_blocked_as_the_engine_records_it(
        pod_key: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["why", "--dump", str(TWO_QUOTAS), pod_key, "--model", "H100", "--policy",
                 str(FIXTURES / "policy-h100-a100-quotas.yaml"), "-o", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["summary"].endswith(f"Pod not allocated (pending) under policy v4. {BOTH_QUOTAS_NOW[pod_key]}")
    # one rule: the engine's record of the pod on the same objects has these very blockers
    record = _engine_decision("policy-h100-a100-quotas.yaml", pod_key, TWO_QUOTAS)
    assert [{k: v for k, v in b.items() if k not in ("tenant", "request")} for b in answer["would_get"]["blockers"]] \
        == [{"code": b.code, "tier": b.tier, **b.detail} for b in record.blockers]


# policy, pod, the "now:" lines of the text output
NOW_LINES: dict[str, tuple[str, str, list[str]]] = {
    "a_tier_of_several_models_closed_by_quota_says_what_closed_it": ("policy-gpu-quotas.yaml", "team-a/train-1", [
        "now: tier 0 gpu/h100: quota_exhausted (tenant=team-a, model=H100, used=1, requested=1, nominal=1, limit=1, "
        "lendable=0)",
        "now: tier 1 gpu/any: quota_exhausted (tenant=team-a, model=A100, used=0, requested=1, nominal=0, limit=0, "
        "lendable=0, over_quota=2)",
        "now: tier 1 gpu/any: quota_exhausted (tenant=team-a, model=H100, used=1, requested=1, nominal=1, limit=1, "
        "lendable=0, over_quota=3)"]),
    "a_tier_with_no_room_says_what_its_devices_are": ("policy-h100-quota.yaml", "team-a/train-2", [
        "now: tier 0 gpu/h100: quota_exhausted (tenant=team-a, model=H100, used=1, requested=2, nominal=1, limit=1, "
        "lendable=0)",
        "now: tier 1 gpu/any: insufficient_on_node (in_use=2, available=1, quota_exhausted=2)"]),
}


@pytest.mark.parametrize("case", sorted(NOW_LINES))
def test_text_output_says_what_closed_each_tier(case: str, capsys: pytest.CaptureFixture[str]) -> None:
    policy, pod_key, expected = NOW_LINES[case]
    assert main(["why", "--dump", str(QUOTA_TIER), pod_key, "--model", "H100", "--policy",
                 str(FIXTURES / policy)]) == 0
    assert [line for line in capsys.readouterr().out.splitlines() if line.startswith("now: ")] == expected


def test_a_placement_of_two_models_is_passed_over_where_the_policy_forbids_mixing() -> None:
    # one claim per GPU: the per-claim constraint cannot see across claims, the engine's check can
    dump, policy = FIXTURES / "cluster-mixed-models.yaml", "policy-no-mixed-models.yaml"
    view = ClusterView.from_objects(yaml.safe_load(dump.read_text())["items"])
    now = would_get_now(view, "team-a/pair-1", parse_policy(yaml.safe_load((FIXTURES / policy).read_text())))
    assert (now["node"], now["devices"]) == (
        "gpu-node-2", ["gpu.nvidia.com/gpu-node-2/gpu-0", "gpu.nvidia.com/gpu-node-2/gpu-1"])
    record = _engine_decision(policy, "team-a/pair-1", dump)
    assert (record.node, [d.device for d in record.devices]) == (now["node"], now["devices"])


DEVICE_PLUGIN = FIXTURES / "cluster-device-plugin.yaml"

# policy (None: the default), pod, would_get, the summary's sentence for --model A100
DEVICE_PLUGIN_NOW: dict[str, tuple[str | None, str, dict[str, Any], str]] = {
    "the_first_node_with_room": (None, "team-a/train-4", {
        "result": "allocated", "model": "A100", "devices": [], "node": "gpu-node-2", "tier": 0, "retry_class": ""},
        "A100 not yet allocated: of 16 nvidia.com/gpu, 10 in use, 6 available. Pod not allocated (pending). "
        "If scheduled now: A100 on node gpu-node-2 (tier 0)."),
    "no_node_has_room": (None, "team-a/train-6", {
        "result": "unschedulable", "model": "", "devices": [], "node": "", "tier": -1, "retry_class": "unschedulable",
        "blockers": [{"code": "insufficient_on_node", "tier": 0, "request": "nvidia.com/gpu", "model": "", "count": 6,
                      "best": 4, "best_node": "gpu-node-2", "reasons": {"in_use": 10, "available": 6}}]},
        "A100 skipped: of 8 A100, 4 in use, 4 available; no node had 6 usable A100 together (at most 4 on node "
        "gpu-node-2). Pod not allocated (pending). If scheduled now: nothing fits (tier 0 nvidia.com/gpu: 10 in use, "
        "6 available; at most 4 on node gpu-node-2, 6 needed)."),
    "the_room_is_over_quota": ("policy-a100-quota.yaml", "team-a/train-4", {
        "result": "unschedulable", "model": "", "devices": [], "node": "", "tier": -1, "retry_class": "quota",
        "blockers": [{"code": "quota_exhausted", "tier": 0, "request": "nvidia.com/gpu", "model": "A100", "used": 4,
                      "requested": 4, "nominal": 4, "limit": 4, "lendable": 0}]},
        "A100 skipped: of 16 nvidia.com/gpu, 10 in use, 2 available, 4 over the tenant's quota; tenant quota 4/4 "
        "A100 used. Pod not allocated (pending) under policy v7. If scheduled now: nothing fits (tier 0 A100: tenant "
        "quota 4/4 A100 used)."),
}


@pytest.mark.parametrize("case", sorted(DEVICE_PLUGIN_NOW))
def test_a_pending_device_plugin_pod_gets_the_engines_device_plugin_decision(
        case: str, capsys: pytest.CaptureFixture[str]) -> None:
    policy, pod_key, expected, summary = DEVICE_PLUGIN_NOW[case]
    flags = ["--policy", str(FIXTURES / policy)] if policy else []
    assert main(["why", "--dump", str(DEVICE_PLUGIN), pod_key, "--model", "A100", *flags, "-o", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["outcome"]["result"] == "pending"
    assert answer["would_get"] == expected
    assert answer["summary"] == summary


def test_a_bound_device_plugin_pod_holds_its_nodes_model() -> None:
    view = ClusterView.from_objects(yaml.safe_load(DEVICE_PLUGIN.read_text())["items"])
    assert would_get_now(view, "team-a/serve-1") == {
        "result": "allocated", "model": "H100", "devices": [], "node": "gpu-node-1", "tier": 0, "retry_class": ""}
