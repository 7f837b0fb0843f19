"""``why`` of a device-plugin pod about a model it neither got nor was turned down for.

Such a pod names no model: it takes GPUs of whatever model a device-plugin node it may use
holds. So the answer is never "not in the pod's preference list": from a dump it says what that
model's GPUs on the device-plugin nodes were doing for the pod (in use, too few on one node, on
nodes its taints or nodeSelector exclude, over its tenant's quota), or that no device-plugin node
holds the model, or, when they were free for it, that the pod chose no model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit.cli.main import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
DUMP = FIXTURES / "cluster-device-plugin-models.yaml"

# policy (None: the default), pod, model, reasons, blockers, the summary's first sentence
CASES: dict[str, tuple[str | None, str, str, dict[str, int], list[dict[str, Any]], str]] = {
    "all_in_use": (None, "team-a/train-6", "H100", {"in_use": 8}, [], "H100 skipped: of 8 H100, 8 in use."),
    "not_enough_on_one_node": (None, "team-a/train-6", "A100", {"in_use": 4, "available": 4}, [
        {"code": "insufficient_on_node", "tier": 0, "request": "nvidia.com/gpu", "model": "A100", "count": 6,
         "best": 4, "best_node": "a100-dp-1"}],
        "A100 skipped: of 8 A100, 4 in use, 4 available; no node had 6 usable A100 together (at most 4 on node "
        "a100-dp-1)."),
    "nodes_its_taints_and_selector_exclude": (None, "team-a/train-6", "L4", {"node_filtered": 16}, [],
        "L4 skipped: of 16 L4, 8 on nodes excluded by the pod's nodeSelector, 8 on nodes with taints the pod does not "
        "tolerate."),
    "no_device_plugin_node_holds_it": (None, "team-a/train-6", "L40S", {}, [
        {"code": "no_model_choice", "tier": 0, "request": "nvidia.com/gpu", "model_nodes": 0}],
        "L40S skipped: no device-plugin node holds L40S, and a device-plugin pod does not choose a model (it is "
        "counted as nvidia.com/gpu)."),
    "free_but_another_node_came_first": (None, "team-a/train-2", "L4", {"node_filtered": 8, "available": 8}, [
        {"code": "no_model_choice", "tier": 0, "request": "nvidia.com/gpu", "model_nodes": 2}],
        "L4 skipped: of 16 L4, 8 on nodes with taints the pod does not tolerate, 8 available; a device-plugin pod "
        "does not choose a model (it is counted as nvidia.com/gpu)."),
    "over_the_tenants_quota": ("policy-a100-quota.yaml", "team-a/train-2", "A100", {"quota_exhausted": 8}, [
        {"code": "quota_exhausted", "tier": 0, "request": "nvidia.com/gpu", "tenant": "team-a", "model": "A100",
         "used": 4, "requested": 2, "nominal": 4, "limit": 4, "lendable": 0}],
        "A100 skipped: of 8 A100, 8 over the tenant's quota (4 in use, 4 available); tenant quota 4/4 A100 used."),
    "over_the_tenants_quota_and_too_few_on_one_node": ("policy-a100-quota.yaml", "team-a/train-6", "A100",
        {"quota_exhausted": 8}, [
        {"code": "quota_exhausted", "tier": 0, "request": "nvidia.com/gpu", "tenant": "team-a", "model": "A100",
         "used": 4, "requested": 6, "nominal": 4, "limit": 4, "lendable": 0},
        {"code": "insufficient_on_node", "tier": 0, "request": "nvidia.com/gpu", "model": "A100", "count": 6,
         "best": 4, "best_node": "a100-dp-1"}],
        "A100 skipped: of 8 A100, 8 over the tenant's quota (4 in use, 4 available); tenant quota 4/4 A100 used; no "
        "node had 6 usable A100 together (at most 4 on node a100-dp-1)."),
}


def _why(capsys: pytest.CaptureFixture[str], policy: str | None, pod: str, model: str, output: str) -> str:
    flags = ["--policy", str(FIXTURES / policy)] if policy else []
    assert main(["why", "--dump", str(DUMP), pod, "--model", model, *flags, "-o", output]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_model_the_pod_did_not_name_is_answered_from_its_gpus_on_the_device_plugin_nodes(
        case: str, capsys: pytest.CaptureFixture[str]) -> None:
    policy, pod, model, reasons, blockers, sentence = CASES[case]
    answer = json.loads(_why(capsys, policy, pod, model, "json"))
    assert (answer["skipped"], answer["reasons"], answer["blockers"]) == (True, reasons, blockers)
    assert answer["summary"].startswith(sentence + " Pod not allocated (pending)")
    assert "preference list" not in answer["summary"]


# the pending pod, what it would get now (the engine's decision on the dump), as the sentence ends
WOULD_GET = {
    "team-a/train-6": "If scheduled now: nothing fits (tier 0 nvidia.com/gpu: 16 on nodes the pod cannot use, "
                      "12 in use, 4 available; at most 4 on node a100-dp-1, 6 needed).",
    "team-a/train-2": "If scheduled now: A100 on node a100-dp-1 (tier 0).",
}


@pytest.mark.parametrize("pod", sorted(WOULD_GET))
def test_the_answer_still_says_what_the_pod_would_get_now(pod: str, capsys: pytest.CaptureFixture[str]) -> None:
    answer = json.loads(_why(capsys, None, pod, "L4", "json"))
    assert answer["summary"].endswith(" Pod not allocated (pending). " + WOULD_GET[pod])


def test_the_text_output_lists_the_models_gpus_and_blockers(capsys: pytest.CaptureFixture[str]) -> None:
    assert _why(capsys, None, "team-a/train-6", "A100", "text").splitlines()[1:] == [
        "",
        "reason                        devices",
        "in_use                              4",
        "available                           4",
        "blocker: insufficient_on_node (tier=0, request=nvidia.com/gpu, model=A100, count=6, best=4, "
        "best_node=a100-dp-1)",
        "now: tier 0 nvidia.com/gpu: insufficient_on_node (in_use=12, node_filtered=16, available=4)",
    ]


def test_the_model_it_would_get_is_answered_from_the_decision(capsys: pytest.CaptureFixture[str]) -> None:
    """The decision counts every device-plugin GPU, as the pod's record does (unchanged; a model
    whose quota turned it down likewise, in ``test_would_get_now``)."""
    assert json.loads(_why(capsys, None, "team-a/train-2", "A100", "json"))["summary"] == (
        "A100 not yet allocated: of 32 nvidia.com/gpu, 12 in use, 20 available. Pod not allocated (pending). If "
        "scheduled now: A100 on node a100-dp-1 (tier 0).")


QUOTA_DUMP = FIXTURES / "cluster-device-plugin-quota.yaml"
QUOTA_POLICY = FIXTURES / "policy-h100-quota-gh200.yaml"


def _deferred_on_h100_quota() -> tuple[Any, Any, Any]:
    """The dump's world under its policy, the policy, and the engine's record deferring
    team-c/train-4 on team-c's H100 quota."""
    import yaml

    from audit.events import WorldEvent
    from audit.explain import ClusterView
    from audit.policy import parse_policy
    from audit.scheduler.engine import decide
    from audit.world import World

    doc = yaml.safe_load(QUOTA_POLICY.read_text())
    items = yaml.safe_load(QUOTA_DUMP.read_text())["items"]
    world = World("lab")
    for seq, o in enumerate([doc, *items]):
        world.apply(WorldEvent("lab", seq, "2026-05-01T07:10:00.000Z", "upsert", o["kind"],
                               o["metadata"].get("namespace", ""), o["metadata"]["name"], o))
    return ClusterView.from_objects(items), parse_policy(doc), decide(world, "team-c/train-4", 1, world.time_ms).record


DEFERRED = "Pod not allocated (deferred, retry class quota) under policy v9."
H100_ANSWER = (
    {"in_use": 16, "quota_exhausted": 12},
    [{"code": "quota_exhausted", "tier": 0, "model": "H100", "used": 4, "requested": 4, "nominal": 4, "limit": 4,
      "lendable": 0}],
    f"H100 skipped: of 28 nvidia.com/gpu, 16 in use, 12 over the tenant's quota; tenant quota 4/4 H100 used. {DEFERRED}")

# answered from (the record alone, or the world it was decided on), model: reasons, blockers, summary
DEFERRED_ANSWERS: dict[tuple[str, str], tuple[dict[str, int], list[dict[str, Any]], str]] = {
    ("record", "H100"): H100_ANSWER,
    ("record", "A100"): ({}, [{"code": "no_model_choice", "tier": 0, "request": "nvidia.com/gpu"}], (
        "A100 skipped: a device-plugin pod does not choose a model (it is counted as nvidia.com/gpu), and its record "
        f"does not say which nodes hold A100 or what their GPUs were doing. {DEFERRED}")),
    ("world", "H100"): H100_ANSWER,
    ("world", "A100"): ({"in_use": 8}, [], f"A100 skipped: of 8 A100, 8 in use. {DEFERRED}"),
    ("world", "GH200"): ({"in_use": 4}, [], f"GH200 skipped: of 4 GH200, 4 in use. {DEFERRED}"),
}


@pytest.mark.parametrize(("source", "model"), sorted(DEFERRED_ANSWERS))
def test_a_pod_deferred_on_one_models_quota_is_not_answered_with_its_figures_for_another(
        source: str, model: str) -> None:
    """The record's counts are of every device-plugin GPU and its quota blocker is H100's: it
    answers for H100 with them, and of A100 says that it does not say; the world says what A100's
    (and GH200's) GPUs were doing."""
    from audit.explain import explain, explain_record

    view, policy, record = _deferred_on_h100_quota()
    answer = (explain_record(record, model) if source == "record"
              else explain(view, ("team-c", "train-4"), model, policy, record=record))
    assert (answer.skipped, answer.reasons, answer.blockers, answer.summary) == (True, *DEFERRED_ANSWERS[source, model])


def _deferred_on_two_quotas() -> Any:
    """The engine's record deferring team-a/train-2 on team-a's A100 and H100 quotas, both full, with
    4 A100 and 6 H100 free on nodes it may use (``cluster-device-plugin-two-quotas.yaml``)."""
    import yaml

    from audit.events import WorldEvent
    from audit.scheduler.engine import decide
    from audit.world import World

    doc = yaml.safe_load((FIXTURES / "policy-h100-a100-quotas.yaml").read_text())
    items = yaml.safe_load((FIXTURES / "cluster-device-plugin-two-quotas.yaml").read_text())["items"]
    world = World("lab")
    for seq, o in enumerate([doc, *items]):
        world.apply(WorldEvent("lab", seq, "2026-05-01T07:10:00.000Z", "upsert", o["kind"],
                               o["metadata"].get("namespace", ""), o["metadata"]["name"], o))
    return decide(world, "team-a/train-2", 1, world.time_ms).record


TWO_DEFERRED = "Pod not allocated (deferred, retry class quota) under policy v4."
# model: blockers, summary (the reasons are the record's one tier's: {"in_use": 14, "quota_exhausted": 10})
TWO_QUOTA_ANSWERS: dict[str, tuple[list[dict[str, Any]], str]] = {
    "A100": ([{"code": "quota_exhausted", "tier": 0, "model": "A100", "used": 4, "requested": 2, "nominal": 4,
               "limit": 4, "lendable": 0, "over_quota": 4}],
             "A100 skipped: of 24 nvidia.com/gpu, 14 in use, 10 over the tenant's quota; tenant quota 4/4 A100 used "
             f"(4 of the GPUs over quota are A100). {TWO_DEFERRED}"),
    "H100": ([{"code": "quota_exhausted", "tier": 0, "model": "H100", "used": 2, "requested": 2, "nominal": 2,
               "limit": 2, "lendable": 0, "over_quota": 6}],
             "H100 skipped: of 24 nvidia.com/gpu, 14 in use, 10 over the tenant's quota; tenant quota 2/2 H100 used "
             f"(6 of the GPUs over quota are H100). {TWO_DEFERRED}"),
}


@pytest.mark.parametrize("model", sorted(TWO_QUOTA_ANSWERS))
def test_a_pod_deferred_on_two_quotas_is_answered_for_each_with_its_part_of_the_figure(model: str) -> None:
    """Both models' quotas turned the pod away from nodes with room: the record names each, so
    the record answers for each with its own blocker and its part of the 10 over quota (before,
    it named A100 alone beside a figure counting the H100 too, and said nothing of H100)."""
    from audit.explain import explain_record

    answer = explain_record(_deferred_on_two_quotas(), model)
    assert (answer.skipped, answer.reasons, answer.blockers, answer.summary) == (
        True, {"in_use": 14, "quota_exhausted": 10}, *TWO_QUOTA_ANSWERS[model])


def test_a_pending_pod_over_two_quotas_would_be_turned_away_by_both(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["why", "--dump", str(FIXTURES / "cluster-device-plugin-two-quotas.yaml"), "team-a/train-2",
                 "--model", "L4", "--policy", str(FIXTURES / "policy-h100-a100-quotas.yaml"), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"] == (
        "L4 skipped: of 8 L4, 8 in use. Pod not allocated (pending) under policy v4. If scheduled now: nothing fits "
        "(tier 0 A100: tenant quota 4/4 A100 used (4 of the GPUs over quota are A100); tier 0 H100: tenant quota 2/2 "
        "H100 used (6 of the GPUs over quota are H100)).")


def test_a_model_a_rule_takes_from_a_device_plugin_nodes_product_is_known(capsys: pytest.CaptureFixture[str]) -> None:
    """The policy's GH200 rule keeps the product's own name (\\1): the GH200 node's GPUs are GH200,
    so the dump knows the model though the table names it nowhere (was: refused, known: A100, H100,
    L4, L40S)."""
    assert main(["why", "--dump", str(QUOTA_DUMP), "team-c/train-4", "--model", "GH200", "--policy",
                 str(FIXTURES / "policy-gh-group.yaml"), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"] == (
        "GH200 skipped: of 4 GH200, 4 in use. Pod not allocated (pending) under policy v9. If scheduled now: nothing "
        "fits (tier 0 H100: tenant quota 4/4 H100 used).")
