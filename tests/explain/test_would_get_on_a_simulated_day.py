"""On the default simulated day (``claimtrail simulate``: the cluster-day scenario, seed 1, 24 h),
``why``'s "if scheduled now" for a pending pod is the decision engine's decision at that moment,
for pods whose tier selects several models (``gpu/compatible``: A100|H100|L40S) while their
tenant's H100 quota is used up: the allocator may pick an H100 through that tier, and the engine
passes over the node that gives it, as ``why`` must."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from audit.explain import explain_record, would_get_now
from audit.explain.record import device_reason_counts, own_devices
from audit.records import DecisionRecord
from audit.world import World
from tests.scheduler.worlds import world_view
from tests.simulate.runs import cluster_day

# The burst of team-b's jobs at 03:00 fills the A100 and L40S nodes while team-b's H100 quota is
# used up: the first decisions on tiers of several models come with it, and those of its first
# minutes are all checked.
SWEEP_UNTIL = "2026-11-02T03:06"

# (pod, decision seq) -> the would_get answer on the world the decision was taken on
FOUND: dict[str, tuple[str, int, dict[str, Any]]] = {
    "unschedulable_when_only_h100_over_quota_is_free": ("team-b/job-000462", 2332, {
        "result": "unschedulable", "model": "", "devices": [], "node": "", "tier": -1, "blockers": [
            {"code": "quota_exhausted", "tier": 0, "tenant": "team-b", "model": "H100", "used": 24, "requested": 4,
             "nominal": 24, "limit": 40, "lendable": 1, "request": "gpu/h100"},
            {"code": "insufficient_on_node", "tier": 1, "request": "gpu/a100", "model": "A100", "count": 4, "best": 0,
             "best_node": "", "reasons": {"in_use": 192}},
            {"code": "insufficient_on_node", "tier": 2, "request": "gpu/compatible", "model": "A100|H100|L40S",
             "count": 4, "best": 1, "best_node": "l40s-015",
             "reasons": {"in_use": 432, "available": 1, "quota_exhausted": 15}}]}),
    "an_l40s_where_a_free_h100_is_over_quota": ("team-b/job-000381", 1999, {
        "result": "allocated", "model": "L40S", "devices": ["gpu.nvidia.com/l40s-000/gpu-4"], "node": "l40s-000",
        "tier": 2, "retry_class": ""}),
}


def _several_models(record: DecisionRecord) -> bool:
    """A DRA decision the engine took with every tier open that failed, or placed the pod through a
    tier of several models."""
    if record.track != "dra" or not any("|" in t.model for t in record.tiers):
        return False
    return record.outcome == "unschedulable" or (
        record.outcome == "allocated" and "|" in record.tiers[record.tier_index].model)


def _at_decisions(records: list[DecisionRecord]) -> Iterator[tuple[DecisionRecord, World]]:
    """Each record with the world as its decision found it (the world is advanced in place)."""
    day = cluster_day(seed=1, hours=24.0)
    world = World(day.world.cluster)
    events = iter(day.events)
    for record in sorted(records, key=lambda r: r.seq):
        while world.seq < record.seq:
            world.apply(next(events))
        yield record, world


def _engine_answer(record: DecisionRecord) -> tuple[str, list[str]]:
    return record.outcome, [d.device for d in record.devices]


@pytest.mark.parametrize("case", sorted(FOUND))
def test_why_now_is_the_engines_decision(case: str) -> None:
    pod_key, seq, expected = FOUND[case]
    ns, name = pod_key.split("/")
    record = next(r for r in cluster_day(seed=1, hours=24.0).records
                  if (r.namespace, r.pod, r.seq) == (ns, name, seq))
    assert _several_models(record)
    for _, world in _at_decisions([record]):
        assert would_get_now(world_view(world), pod_key, world.policy) == expected
    assert _engine_answer(record) == (expected["result"], expected["devices"])


def test_why_now_agrees_with_every_engine_decision_on_tiers_of_several_models() -> None:
    records = [r for r in cluster_day(seed=1, hours=24.0).records if _several_models(r) and r.time < SWEEP_UNTIL]
    assert Counter(r.outcome for r in records) == {"allocated": 80, "unschedulable": 32}
    disagree = []
    for record, world in _at_decisions(records):
        now = would_get_now(world_view(world), f"{record.namespace}/{record.pod}", world.policy)
        if (now["result"], now["devices"]) != _engine_answer(record):
            disagree.append((record.seq, record.pod, now["result"], now["devices"]))
    assert disagree == []


def test_the_record_summary_counts_only_the_device_the_pod_got() -> None:
    # the engine's record counts 7 devices selected in tier 2: the allocator picked one on each
    # of seven nodes, and the engine passed over six of them (their H100 over team-b's quota)
    record = next(r for r in cluster_day(seed=1, hours=24.0).records
                  if (r.namespace, r.pod, r.seq) == ("team-b", "job-000381", 1999))
    assert record.tiers[2].reasons == {"in_use": 314, "not_reached": 126, "selected": 7, "unhealthy": 1}
    assert explain_record(record, "L40S").summary == (
        "L40S chosen: of 448 A100|H100|L40S, 1 allocated to this pod, 314 in use, 1 unhealthy, 132 available. "
        "Allocated L40S gpu-4 on node l40s-000 (tier 2) under policy 2026-11-01.1.")


def test_every_dra_record_reads_as_many_selected_as_devices_held() -> None:
    records = [r for r in cluster_day(seed=1, hours=24.0).records if r.track == "dra" and r.outcome == "allocated"]
    wrong = [(r.seq, r.pod) for r in records
             if sum(device_reason_counts(t, True, own_devices(r, t)).get("selected", 0) for t in r.tiers)
             != len(r.devices)]
    assert len(records) == 2863 and wrong == []


def test_why_now_is_the_engines_decision_for_every_device_plugin_pod() -> None:
    """A device-plugin pod's "if scheduled now" is the engine's device-plugin decision on the world
    folded from the view: the node it was given, or nothing (deferred on quota, or no room)."""
    records = [r for r in cluster_day(seed=1, hours=24.0).records
               if r.track == "device-plugin" and r.time < "2026-11-02T06:00"]
    assert Counter(r.outcome for r in records) == {"allocated": 66, "deferred": 12, "unschedulable": 1}
    disagree = []
    for record, world in _at_decisions(records):
        now = would_get_now(world_view(world), f"{record.namespace}/{record.pod}", world.policy)
        engine = ("allocated", record.node) if record.outcome == "allocated" else ("unschedulable", "")
        if (now["result"], now["node"]) != engine:
            disagree.append((record.seq, record.pod, now["result"], now["node"]))
    assert disagree == []
