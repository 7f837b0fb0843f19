"""Legacy nvidia.com/gpu pods are decided by count only and recorded on the device-plugin track."""

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.scheduler.worlds import cluster, decide_and_bind, submit


def test_device_plugin_pod_counts_only():
    sim = cluster()
    r = decide_and_bind(sim, submit(sim, "legacy-1", size=3, device_plugin=True)).record
    assert (r.outcome, r.track, r.node, r.allocated_model, r.devices) == ("allocated", "device-plugin", "l4-dp-000",
                                                                            "L4", [])
    assert r.tiers[0].reasons == {"not_reached": 1, "selected": 3}
    assert sim.world.dp_used["l4-dp-000"] == 3
    r2 = decide_and_bind(sim, submit(sim, "legacy-2", size=2, device_plugin=True)).record
    assert (r2.outcome, r2.retry_class) == ("unschedulable", "unschedulable")
    r3 = decide_and_bind(sim, submit(sim, "legacy-3", size=5, device_plugin=True)).record
    assert r3.retry_class == "terminal"


def test_a_device_plugin_pod_is_woken_only_by_room_on_nodes_it_may_use():
    """Its nodeSelector pins H100: a free L4 node cannot place it, so no attempt is spent on it."""
    from audit.scheduler.engine import decide, may_place
    from audit.world import World
    from tests.metrics.eventlog import Log

    log = Log().dp_nodes("H100", 1, 8).dp_nodes("L4", 1, 8)
    log.at(0).dp_pod("team-a/big", 8).bind("team-a/big", "h100-dp-0")
    log.at(1).dp_pod("team-a/pinned", 2, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    log.dp_pod("team-a/any", 2)
    world = World("c1")
    for ev in log.events:
        world.apply(ev)
    assert world.dp_used == {"h100-dp-0": 8}
    assert not may_place(world, "team-a/pinned", log.now)
    assert decide(world, "team-a/pinned", 1, log.now).record.outcome == "unschedulable"
    assert may_place(world, "team-a/any", log.now)
    assert decide(world, "team-a/any", 1, log.now).record.node == "l4-dp-0"


def _quota_world(*extra: tuple[str, str], quotas: dict | None = None):
    """team-a holds 4 of its 4 H100 (nominal 4, no borrowing unless ``quotas`` says) on one of two
    device-plugin H100 nodes: 4 GPUs free there, 8 on the other."""
    from audit.world import World
    from tests.metrics.eventlog import Log, policy_doc

    doc = policy_doc(weights={"team-a": 1, "team-b": 1}, quotas={"team-a": {"H100": 4}, "team-b": {"H100": 8}})
    for tenant in doc["spec"]["tenants"]:
        tenant["quotas"].update((quotas or {}).get(tenant["name"], {}))
    log = Log(doc)
    log.dp_nodes("H100", 2, 8)
    log.at(0).dp_pod("team-a/running", 4).bind("team-a/running", "h100-dp-0")
    log.at(1).dp_pod("team-a/waiting", 2)
    for verb, ref in extra:
        getattr(log, verb)(ref)
    world = World("c1")
    for ev in log.events:
        world.apply(ev)
    return world, log.now


@pytest.mark.parametrize(("quotas", "limit", "lendable", "said"), [
    pytest.param(None, 4, 8, "nominal 4, limit 4, 8 lendable", id="borrowing-limit-reached"),
    pytest.param({"team-a": {"H100": {"nominal": 4, "borrowingLimit": None}}, "team-b": {"H100": {"nominal": 1}}},
                 None, 1, "nominal 4, no borrowing limit, 1 lendable", id="unlimited-borrowing-nothing-to-lend"),
])
def test_a_device_plugin_pod_blocked_by_quota_is_deferred_on_quota_not_called_unschedulable(quotas, limit, lendable,
                                                                                             said):
    """GPUs are free on a node it may use: the record names the quota, as for a DRA pod."""
    from audit.scheduler.engine import decide

    world, now = _quota_world(quotas=quotas)
    r = decide(world, "team-a/waiting", 1, now).record
    assert (r.outcome, r.retry_class, r.track) == ("deferred", "quota", "device-plugin")
    assert [(b.code, b.tier, b.detail) for b in r.blockers] == [("quota_exhausted", 0, {
        "model": "H100", "used": 4, "requested": 2, "nominal": 4, "limit": limit, "lendable": lendable})]
    assert r.message == (f"tenant team-a has no H100 quota left for 2 nvidia.com/gpu (4 in use, {said} by other "
                         "tenants); a device-plugin node has them free")
    # both nodes have room for 2 (4 and 8 free), and the quota turns both down
    assert r.tiers[0].reasons == {"in_use": 4, "quota_exhausted": 12}


@pytest.mark.parametrize(("extra", "woken"), [
    pytest.param((), False, id="quota-full-free-gpus-elsewhere"),
    pytest.param((("finish", "team-a/running"),), True, id="own-release-reopens-quota"),
])
def test_a_device_plugin_pod_is_woken_only_when_its_quota_has_room(extra, woken):
    """Free GPUs that its tenant's quota cannot take cost no attempt (each wake used to retry it)."""
    from audit.scheduler.engine import decide, may_place

    world, now = _quota_world(*extra)
    assert may_place(world, "team-a/waiting", now) is woken
    assert (decide(world, "team-a/waiting", 1, now).record.outcome == "allocated") is woken


DUMPS = Path(__file__).resolve().parents[1] / "fixtures" / "explain"


def _dump_decision(dump: str, policy: str, pod: str) -> Any:
    """The engine's record for ``pod`` on the world of a cluster dump under a policy file."""
    from audit.events import WorldEvent
    from audit.scheduler.engine import decide
    from audit.world import World

    objects = [yaml.safe_load((DUMPS / policy).read_text()), *yaml.safe_load((DUMPS / dump).read_text())["items"]]
    world = World("lab")
    for seq, o in enumerate(objects):
        world.apply(WorldEvent("lab", seq, "2026-05-01T07:10:00.000Z", "upsert", o["kind"],
                               o["metadata"].get("namespace", ""), o["metadata"]["name"], o))
    return decide(world, pod, 1, world.time_ms).record


TWO_QUOTAS = ("cluster-device-plugin-two-quotas.yaml", "policy-h100-a100-quotas.yaml")
_A100_FULL = {"model": "A100", "used": 4, "requested": 2, "nominal": 4, "limit": 4, "lendable": 0}
_H100_FULL = {"model": "H100", "used": 2, "requested": 2, "nominal": 2, "limit": 2, "lendable": 0}
_A100_SAID = "4 in use, nominal 4, limit 4, 0 lendable by other tenants"
_H100_SAID = "2 in use, nominal 2, limit 2, 0 lendable by other tenants"

# (dump, policy, pod): the tier's reason counts, the blockers' details, the message
QUOTA_DEFERRALS: dict[str, tuple[tuple[str, str, str], dict[str, int], list[dict[str, Any]], str]] = {
    # one model's quota in the way: the figure is its GPUs alone, and the record is as it always was
    "one_quota_full": (("cluster-device-plugin-quota.yaml", "policy-h100-quota-gh200.yaml", "team-c/train-4"),
                       {"in_use": 16, "quota_exhausted": 12},
                       [{"model": "H100", "used": 4, "requested": 4, "nominal": 4, "limit": 4, "lendable": 0}],
                       "tenant team-c has no H100 quota left for 4 nvidia.com/gpu (4 in use, nominal 4, limit 4, 0 "
                       "lendable by other tenants); a device-plugin node has them free"),
    # both quotas full, but only the H100 node has room for 5: the A100 node's 4 free GPUs were
    # never the quota's to turn down
    "two_quotas_full_one_node_with_room": ((*TWO_QUOTAS, "team-a/train-5"),
                                           {"in_use": 14, "not_reached": 4, "quota_exhausted": 6},
                                           [{**_H100_FULL, "requested": 5}],
                                           f"tenant team-a has no H100 quota left for 5 nvidia.com/gpu ({_H100_SAID}); "
                                           "a device-plugin node has them free"),
    # both quotas turn it away from nodes with room: each is named with its part of the figure
    # (was: one A100 blocker beside a figure of 10 that counted the H100 node's 6 too)
    "two_quotas_full_both_nodes_with_room": ((*TWO_QUOTAS, "team-a/train-2"),
                                             {"in_use": 14, "quota_exhausted": 10},
                                             [{**_A100_FULL, "over_quota": 4}, {**_H100_FULL, "over_quota": 6}],
                                             f"tenant team-a has no A100 quota left for 2 nvidia.com/gpu ({_A100_SAID}), "
                                             f"nor H100 quota ({_H100_SAID}); device-plugin nodes have them free "
                                             "(4 A100, 6 H100)"),
}


@pytest.mark.parametrize("case", sorted(QUOTA_DEFERRALS))
def test_a_quota_deferral_names_every_model_its_quota_figure_counts(case: str) -> None:
    world, reasons, details, message = QUOTA_DEFERRALS[case]
    r = _dump_decision(*world)
    assert (r.outcome, r.retry_class) == ("deferred", "quota")
    assert r.tiers[0].reasons == reasons
    assert [(b.code, b.tier, b.detail) for b in r.blockers] == [("quota_exhausted", 0, d) for d in details]
    assert r.message == message
    # the blockers' parts add up to the figure (a lone blocker's part is the whole figure)
    assert sum(b.detail.get("over_quota", reasons["quota_exhausted"]) for b in r.blockers) == reasons["quota_exhausted"]
