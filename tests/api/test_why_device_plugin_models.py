"""The API's why for a device-plugin decision asked about a model the record does not name.

The record counts every device-plugin GPU and knows no node's model, so the API reads the world
the decision saw (at its seq) for that model's GPUs; until the store holds that world the record
answers, saying the pod chose no model, and that answer is not kept. A server of its own, with
the device-plugin dump (``cluster-device-plugin-models.yaml``) under team-a's A100 quota as
cluster ``lab-dp``, and the engine's decisions for its two pending pods on it; and as cluster
``lab-dp-gh``, the dump ``cluster-device-plugin-quota.yaml`` under a policy whose device-model
table names GH200, which the default table does not, with the decision deferring team-c/train-4
on team-c's H100 quota.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from audit.events import WorldEvent
from audit.records import DecisionRecord, to_jsonl
from tests.api.conftest import TOKENS, Server, start_server, stop

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
CLUSTER = "lab-dp"


def _events(cluster: str, policy: str = "policy-a100-quota.yaml",
            dump: str = "cluster-device-plugin-models.yaml") -> list[WorldEvent]:
    objects = [yaml.safe_load((FIXTURES / policy).read_text()), *yaml.safe_load((FIXTURES / dump).read_text())["items"]]
    return [WorldEvent(cluster=cluster, seq=seq, time="2026-05-01T07:10:00.000000Z", type="upsert",
                       object_kind=o["kind"], namespace=o["metadata"].get("namespace", ""), name=o["metadata"]["name"],
                       payload=o) for seq, o in enumerate(objects)]


def _decide(events: list[WorldEvent], pods: tuple[str, ...]) -> dict[str, DecisionRecord]:
    """The engine's decisions for ``pods`` (NAMESPACE/NAME) on the world of ``events``, by name."""
    from audit.scheduler.engine import decide
    from audit.world import World

    world = World(events[0].cluster)
    for event in events:
        world.apply(event)
    return {pod.partition("/")[2]: decide(world, pod, 1, world.time_ms).record for pod in pods}


def _decisions(cluster: str) -> dict[str, DecisionRecord]:
    """The engine's decisions for the pending pods on the world of ``_events``."""
    return _decide(_events(cluster), ("team-a/train-6", "team-a/train-2"))


GH_CLUSTER = "lab-dp-gh"
GH_WORLD = ("policy-h100-quota-gh200.yaml", "cluster-device-plugin-quota.yaml")
GH_DEFERRED = _decide(_events(GH_CLUSTER, *GH_WORLD), ("team-c/train-4",))["train-4"]
# the same dump under a policy whose rule takes the Grace Hopper model from the product's name (\1)
GROUP_CLUSTER = "lab-dp-group"
GROUP_WORLD = ("policy-gh-group.yaml", "cluster-device-plugin-quota.yaml")
GROUP_DEFERRED = _decide(_events(GROUP_CLUSTER, *GROUP_WORLD), ("team-c/train-4",))["train-4"]


def _post(srv: Server, path: str, lines: str) -> None:
    r = srv.post(path, content=lines.encode())
    assert r.status_code == 200, r.text


def _events_jsonl(cluster: str, *world: str) -> str:
    return "".join(json.dumps(e.to_dict()) + "\n" for e in _events(cluster, *world))


DECIDED = _decisions(CLUSTER)
# the same decisions in a cluster whose world arrives after them
LATE = _decisions("lab-dp-late")


@pytest.fixture(scope="module")
def dp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    pytest.importorskip("audit.store.queries", reason="the store is not in this tree yet")
    srv, proc = start_server(tmp_path_factory.mktemp("api-dp-models"))
    try:
        _post(srv, "/v1/ingest/events", _events_jsonl(CLUSTER))
        _post(srv, "/v1/ingest/events", _events_jsonl(GH_CLUSTER, *GH_WORLD))
        _post(srv, "/v1/ingest/events", _events_jsonl(GROUP_CLUSTER, *GROUP_WORLD))
        _post(srv, "/v1/ingest/records", to_jsonl([*DECIDED.values(), *LATE.values(), GH_DEFERRED, GROUP_DEFERRED]))
        yield srv
    finally:
        stop(proc)


def test_the_decisions_are_what_the_dump_says() -> None:
    assert [(r.outcome, r.node, r.allocated_model) for r in DECIDED.values()] == [
        ("unschedulable", "", ""), ("allocated", "l4-dp-2", "L4")]


UNSCHEDULABLE = "Pod not allocated (unschedulable, retry class unschedulable) under policy v7."
ALLOCATED = "Allocated L4 on node l4-dp-2 (tier 0) under policy v7."

# pod, model, reasons, blocker codes, summary
WORLD_ANSWERS: dict[str, tuple[str, str, dict[str, int], list[str], str]] = {
    "all_in_use": ("train-6", "H100", {"in_use": 8}, [], f"H100 skipped: of 8 H100, 8 in use. {UNSCHEDULABLE}"),
    "nodes_its_taints_and_selector_exclude": ("train-6", "L4", {"node_filtered": 16}, [],
        "L4 skipped: of 16 L4, 8 on nodes excluded by the pod's nodeSelector, 8 on nodes with taints the pod does not "
        f"tolerate. {UNSCHEDULABLE}"),
    "no_device_plugin_node_holds_it": ("train-6", "L40S", {}, ["no_model_choice"],
        "L40S skipped: no device-plugin node holds L40S, and a device-plugin pod does not choose a model (it is "
        f"counted as nvidia.com/gpu). {UNSCHEDULABLE}"),
    "over_quota_and_too_few_on_one_node": ("train-6", "A100", {"quota_exhausted": 8},
        ["quota_exhausted", "insufficient_on_node"],
        "A100 skipped: of 8 A100, 8 over the tenant's quota (4 in use, 4 available); tenant quota 4/4 A100 used; no "
        f"node had 6 usable A100 together (at most 4 on node a100-dp-1). {UNSCHEDULABLE}"),
    "over_quota_where_it_got_another_model": ("train-2", "A100", {"quota_exhausted": 8}, ["quota_exhausted"],
        "A100 skipped: of 8 A100, 8 over the tenant's quota (4 in use, 4 available); tenant quota 4/4 A100 used. "
        f"{ALLOCATED}"),
    "all_in_use_where_it_got_another_model": ("train-2", "H100", {"in_use": 8}, [],
        f"H100 skipped: of 8 H100, 8 in use. {ALLOCATED}"),
}


@pytest.mark.parametrize("case", sorted(WORLD_ANSWERS))
def test_a_model_the_record_does_not_name_is_answered_from_the_world_it_was_decided_on(
        dp_server: Server, case: str) -> None:
    pod, model, reasons, codes, summary = WORLD_ANSWERS[case]
    body = dp_server.get(f"/v1/decisions/{DECIDED[pod].decision_id}/why", model=model).json()
    assert (body["reasons"], [b["code"] for b in body["blockers"]], body["summary"]) == (reasons, codes, summary)


def test_the_pod_route_answers_alike_and_adds_what_it_would_get_now(dp_server: Server) -> None:
    body = dp_server.get("/v1/pods/team-a/train-6/why", model="L4", cluster=CLUSTER).json()
    assert body["reasons"] == {"node_filtered": 16}
    assert body["summary"] == (
        "L4 skipped: of 16 L4, 8 on nodes excluded by the pod's nodeSelector, 8 on nodes with taints the pod does not "
        f"tolerate. {UNSCHEDULABLE} If scheduled now: nothing fits (tier 0 nvidia.com/gpu: 16 on nodes the pod cannot "
        "use, 12 in use, 4 available; at most 4 on node a100-dp-1, 6 needed).")


def test_the_model_the_record_names_is_still_the_records_answer(dp_server: Server) -> None:
    body = dp_server.get(f"/v1/decisions/{DECIDED['train-2'].decision_id}/why", model="L4").json()
    assert body["summary"] == (
        "L4 chosen: of 32 nvidia.com/gpu, 2 allocated to this pod, 8 on nodes the pod cannot use, 12 in use, "
        f"6 available, 4 over the tenant's quota. {ALLOCATED}")


def test_a_tenant_sees_how_many_nodes_hold_the_model(dp_server: Server) -> None:
    body = dp_server.get(f"/v1/decisions/{DECIDED['train-2'].decision_id}/why", who="team-a", model="L40S").json()
    assert body["blockers"] == [{"code": "no_model_choice", "tier": 0, "request": "nvidia.com/gpu", "model_nodes": 0}]


RECORD_ONLY = ("L4 skipped: a device-plugin pod does not choose a model (it is counted as nvidia.com/gpu), and its "
               f"record does not say which nodes hold L4 or what their GPUs were doing. {UNSCHEDULABLE}")


def test_before_its_world_arrives_the_record_answers_and_is_not_kept(dp_server: Server) -> None:
    path = f"/v1/decisions/{LATE['train-6'].decision_id}/why"
    before = dp_server.get(path, model="L4").json()
    assert ([b["code"] for b in before["blockers"]], before["summary"]) == (["no_model_choice"], RECORD_ONLY)
    _post(dp_server, "/v1/ingest/events", _events_jsonl("lab-dp-late"))
    assert dp_server.get(path, model="L4").json()["summary"] == WORLD_ANSWERS["nodes_its_taints_and_selector_exclude"][4]


def _cli(dp_server: Server, capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    from audit.cli.main import main

    assert main(["why", "team-a/train-6", "--model", "A100", "--server", dp_server.base, "--token", TOKENS["admin"],
                 "--cluster", CLUSTER, *flags]) == 0
    return capsys.readouterr().out


def test_the_command_line_prints_the_answer_as_text(dp_server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    lines = _cli(dp_server, capsys).splitlines()
    assert lines[0].startswith(WORLD_ANSWERS["over_quota_and_too_few_on_one_node"][4] + " If scheduled now:")
    assert lines[1:5] == [
        "",
        "reason                        devices",
        "quota_exhausted                     8",
        "blocker: quota_exhausted (tier=0, request=nvidia.com/gpu, tenant=team-a, model=A100, used=4, requested=6, "
        "nominal=4, limit=4, lendable=0)",
    ]


def test_the_command_line_prints_the_answer_as_json(dp_server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    answer: dict[str, Any] = json.loads(_cli(dp_server, capsys, "-o", "json"))
    assert (answer["decision_id"], answer["skipped"], answer["reasons"]) == (
        DECIDED["train-6"].decision_id, True, {"quota_exhausted": 8})
    assert answer["blockers"][1] == {"code": "insufficient_on_node", "tier": 0, "request": "nvidia.com/gpu",
                                     "model": "A100", "count": 6, "best": 4, "best_node": "a100-dp-1"}


def test_the_deferred_decision_is_what_the_quota_dump_says() -> None:
    assert (GH_DEFERRED.outcome, GH_DEFERRED.retry_class, GH_DEFERRED.tiers[0].reasons,
            [(b.code, b.detail["model"]) for b in GH_DEFERRED.blockers]) == (
        "deferred", "quota", {"in_use": 16, "quota_exhausted": 12}, [("quota_exhausted", "H100")])


DEFERRED = "Pod not allocated (deferred, retry class quota) under policy v9."
# the models of the cluster's policy, not the resource its device-plugin pods ask for (nvidia.com/gpu, the
# record's preference entry)
KNOWN = "(known: A100, GH200, H100, L4, L40S)"

# route, model, status, the answer's summary (200) or the problem's detail
POLICY_MODELS: dict[str, tuple[str, str, int, str]] = {
    "a_model_only_the_clusters_policy_names": (
        f"/v1/decisions/{GH_DEFERRED.decision_id}/why", "GH200", 200, f"GH200 skipped: of 4 GH200, 4 in use. {DEFERRED}"),
    "the_same_by_the_pod_route": (
        "/v1/pods/team-c/train-4/why", "GH200", 200, f"GH200 skipped: of 4 GH200, 4 in use. {DEFERRED} If scheduled "
        "now: nothing fits (tier 0 H100: tenant quota 4/4 H100 used)."),
    "a_model_no_table_names": (f"/v1/decisions/{GH_DEFERRED.decision_id}/why", "B200", 422,
                               f"model 'B200': not a device model this cluster or decision knows {KNOWN}"),
    "a_model_miscased": (f"/v1/decisions/{GH_DEFERRED.decision_id}/why", "gh200", 422,
                         "model 'gh200': not a device model this cluster or decision knows; did you mean GH200?"),
}


@pytest.mark.parametrize("case", sorted(POLICY_MODELS))
def test_the_model_check_takes_the_models_of_the_policy_in_force_for_the_records_cluster(
        dp_server: Server, case: str) -> None:
    route, model, status, said = POLICY_MODELS[case]
    r = dp_server.get(route, model=model, **({"cluster": GH_CLUSTER} if route.startswith("/v1/pods/") else {}))
    assert (r.status_code, r.json()["summary" if status == 200 else "detail"]) == (status, said)
    if status != 200:
        assert r.json()["type"].endswith("/unknown-model")


def test_the_policys_models_are_kept_not_read_again_for_each_question(dp_server: Server) -> None:
    """The pod route keeps no answer, so a second question finds only the policy's models kept."""
    from tests.api.test_hardened_ingest import metric

    def counters() -> tuple[float, float]:
        return (metric(dp_server, 'claimtrail_answer_cache{counter="hits"}'),
                metric(dp_server, 'claimtrail_answer_cache{counter="misses"}'))

    assert dp_server.get("/v1/pods/team-c/train-4/why", model="GH200", cluster=GH_CLUSTER).status_code == 200
    hits, misses = counters()
    assert dp_server.get("/v1/pods/team-c/train-4/why", model="GH200", cluster=GH_CLUSTER).status_code == 200
    assert counters() == (hits + 1, misses)


GH_LATE = _decide(_events("lab-dp-gh-late", *GH_WORLD), ("team-c/train-4",))["train-4"]


def test_before_its_world_arrives_the_default_policys_models_are_taken_and_not_kept(dp_server: Server) -> None:
    """Until then the record answers a model of the default table, stating no figure of another
    model: the quota it was deferred on is H100's."""
    _post(dp_server, "/v1/ingest/records", to_jsonl([GH_LATE]))
    path = f"/v1/decisions/{GH_LATE.decision_id}/why"
    before = dp_server.get(path, model="GH200")
    assert (before.status_code, before.json()["detail"]) == (422, "model 'GH200': not a device model this cluster or "
                                                             "decision knows (known: A100, H100, L4, L40S)")
    record_only = dp_server.get(path, model="A100").json()
    assert (record_only["reasons"], record_only["summary"]) == ({}, (
        "A100 skipped: a device-plugin pod does not choose a model (it is counted as nvidia.com/gpu), and its record "
        f"does not say which nodes hold A100 or what their GPUs were doing. {DEFERRED}"))
    _post(dp_server, "/v1/ingest/events", _events_jsonl("lab-dp-gh-late", *GH_WORLD))
    assert [dp_server.get(path, model=model).json()["summary"] for model in ("GH200", "A100")] == [
        f"GH200 skipped: of 4 GH200, 4 in use. {DEFERRED}", f"A100 skipped: of 8 A100, 8 in use. {DEFERRED}"]


# route, model: status, the answer's summary (200) or the problem's detail
GROUP_MODELS: dict[tuple[str, str], tuple[int, str]] = {
    # (was: 422, known: A100, H100, L4, L40S)
    (f"/v1/decisions/{GROUP_DEFERRED.decision_id}/why", "GH200"): (
        200, f"GH200 skipped: of 4 GH200, 4 in use. {DEFERRED}"),
    ("/v1/pods/team-c/train-4/why", "GH200"): (
        200, f"GH200 skipped: of 4 GH200, 4 in use. {DEFERRED} If scheduled now: nothing fits (tier 0 H100: tenant "
        "quota 4/4 H100 used)."),
    (f"/v1/decisions/{GROUP_DEFERRED.decision_id}/why", "GH300"): (
        422, "model 'GH300': not a device model this cluster or decision knows (known: A100, GH200, H100, L4, L40S)"),
}


@pytest.mark.parametrize(("route", "model"), sorted(GROUP_MODELS))
def test_a_model_a_rule_takes_from_the_devices_text_is_known_by_the_devices_of_the_decisions_world(
        dp_server: Server, route: str, model: str) -> None:
    """The table names no GH200 itself: its rule gives GH200 to the GH200 node's GPUs, which the
    world at the record's seq holds."""
    status, said = GROUP_MODELS[route, model]
    r = dp_server.get(route, model=model, **({"cluster": GROUP_CLUSTER} if route.startswith("/v1/pods/") else {}))
    assert (r.status_code, r.json()["summary" if status == 200 else "detail"]) == (status, said)


def test_the_devices_models_are_kept_not_rebuilt_for_each_question(dp_server: Server) -> None:
    """The pod route keeps no answer: a second question finds the policy's and the devices' models kept."""
    from tests.api.test_hardened_ingest import metric

    def counters() -> tuple[float, float]:
        return (metric(dp_server, 'claimtrail_answer_cache{counter="hits"}'),
                metric(dp_server, 'claimtrail_answer_cache{counter="misses"}'))

    ask = {"model": "GH200", "cluster": GROUP_CLUSTER}
    assert dp_server.get("/v1/pods/team-c/train-4/why", **ask).status_code == 200
    hits, misses = counters()
    assert dp_server.get("/v1/pods/team-c/train-4/why", **ask).status_code == 200
    assert counters() == (hits + 2, misses)
