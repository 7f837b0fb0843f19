"""Fairness and fallback metrics on hand-made records with known answers, and on a real run."""

import pytest

from audit.events import WorldEvent
from audit.metrics import (
    UsageInterval,
    fallback_rates,
    fallback_regret,
    first_choice_hit_rate,
    jain_index,
    percentile,
    starvation,
    tenant_shares,
    usage_intervals,
    wait_percentiles,
)
from audit.policy import parse_policy
from audit.records import DecisionRecord, DeviceRef, TierBlocker
from audit.timestamps import format_time_ms
from tests.simulate.runs import cluster_day

T0 = 1_793_577_600_000
MIN = 60_000


def rec(pod, tenant="a", outcome="allocated", t=0, wait=0, tier=0, models=("H100",), pref="H100", blockers=()):
    devices = [DeviceRef(f"d/p/{pod}-{i}", "n", m, "gpu") for i, m in enumerate(models)] if outcome == "allocated" else []
    return DecisionRecord(
        decision_id=pod, cluster="c", seq=t, time=format_time_ms(T0 + t), attempt=1, tenant=tenant, namespace=tenant,
        pod=pod, pod_uid=pod, claims=[f"{pod}-gpu"], claim_uids=[pod], preference=[pref], policy_version="1",
        policy_digest="x", outcome=outcome, devices=devices, tier_index=tier if outcome == "allocated" else -1,
        preferred_model=pref, allocated_model="|".join(sorted(set(models))) if outcome == "allocated" else "",
        fallback=tier > 0, wait_ms=wait, blockers=list(blockers))


@pytest.mark.parametrize(
    ("values", "expected"),
    [([1, 1, 1, 1], 1.0), ([1, 0], 0.5), ([2, 1], 0.9), ([1, 0, 0, 0], 0.25), ([], 1.0)],
    ids=["equal", "one-of-two", "two-to-one", "one-of-four", "empty"],
)
def test_jain_index(values, expected):
    assert jain_index(values) == pytest.approx(expected)


def test_percentile_nearest_rank():
    xs = [float(x) for x in range(1, 101)]
    assert (percentile(xs, 50), percentile(xs, 95), percentile(xs, 99), percentile(xs, 100)) == (50, 95, 99, 100)
    assert percentile([], 50) == 0.0


def test_wait_hit_rate_and_fallback_rates():
    records = [rec("p1", wait=1000), rec("p2", wait=3000, tier=1, models=("A100",)),
               rec("p3", wait=2000), rec("p4", outcome="unschedulable", wait=9000), rec("p5", "b", wait=5000)]
    assert wait_percentiles(records) == {"a": (2000, 3000, 3000), "b": (5000, 5000, 5000)}
    assert first_choice_hit_rate(records) == 0.75
    assert fallback_rates(records) == {("H100", "A100"): 0.25, ("H100", "H100"): 0.75}


def test_usage_intervals_end_at_the_claim_delete():
    records = [rec("p1", t=0, models=("H100", "H100")), rec("p2", t=10 * MIN, models=("A100",))]
    events = [WorldEvent("c", 9, format_time_ms(T0 + 30 * MIN), "delete", "ResourceClaim", "a", "p1-gpu", {})]
    ivs = usage_intervals(records, events, T0 + 60 * MIN)
    assert ivs == [UsageInterval("a", "H100", 2, T0, T0 + 30 * MIN), UsageInterval("a", "A100", 1, T0 + 10 * MIN,
                                                                                    T0 + 60 * MIN)]


def test_tenant_shares_against_weighted_entitlement():
    policy = parse_policy({"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "p"},
                           "spec": {"version": "1", "tenants": [{"name": "a", "weight": 3}, {"name": "b", "weight": 1}]}})
    ivs = [UsageInterval("a", "A100", 3, 0, 3_600_000), UsageInterval("b", "H100", 1, 0, 3_600_000)]
    s = tenant_shares(ivs, policy, capacity=4, window=(0, 3_600_000))
    assert (s["a"].device_hours, s["a"].entitlement_hours, s["a"].normalized) == (3.0, 3.0, 1.0)
    assert (s["a"].eq_hours, s["b"].eq_hours) == (1.5, 1.0)
    assert jain_index(x.normalized for x in s.values()) == 1.0


def test_fallback_regret_within_window():
    # 4 H100 in the cluster, all busy until minute 5 (p0), then free: the fallback at minute 0 is regretted,
    # the one at minute 20 (H100 busy again from minute 15 to 60) is not.
    ivs = [UsageInterval("a", "H100", 4, T0 - MIN, T0 + 5 * MIN), UsageInterval("a", "H100", 4, T0 + 15 * MIN, T0 + 60 * MIN)]
    records = [rec("p1", t=0, tier=1, models=("A100",)), rec("p2", t=20 * MIN, tier=1, models=("A100",))]
    assert fallback_regret(records, ivs, {"H100": 4}) == (1, 2)
    assert fallback_regret(records, ivs, {"H100": 4}, window_ms=2 * MIN) == (0, 2)


def test_starvation_flags_unexplained_long_waits():
    records = [rec(f"p{i}", wait=1000) for i in range(5)]
    records.append(rec("slow", outcome="unschedulable", t=0, wait=20_000,
                       blockers=[TierBlocker("insufficient_on_node", 0, {})]))
    records.append(rec("silent", outcome="unschedulable", t=0, wait=20_000))
    flags = {s.pod: s.explained for s in starvation(records, T0)}
    assert flags == {"a/slow": True, "a/silent": False}
    # with a 5 s pending limit, pods still pending at 6 s are reported even without a long median
    quick = [rec("p0", wait=0), rec("waiting", outcome="unschedulable", t=0, wait=0,
                                    blockers=[TierBlocker("insufficient_on_node", 0, {})])]
    assert [s.pod for s in starvation(quick, T0 + 6000, max_pending_ms=5000)] == ["a/waiting"]
    assert starvation(quick, T0 + 4000, max_pending_ms=5000) == []


def test_metrics_on_a_simulated_day():
    result = cluster_day(5, 5.0)
    ivs = usage_intervals(result.records, result.events, result.end_ms)
    allocated = [r for r in result.records if r.outcome == "allocated"]
    # a device-plugin record names no devices: the count it was handed is its tier's "selected"
    plugin = sum(t.reasons.get("selected", 0) for r in allocated if r.track == "device-plugin" for t in r.tiers)
    assert plugin > 0
    assert sum(iv.devices for iv in ivs) == sum(len(r.devices) for r in allocated if r.track == "dra") + plugin
    regret, fallbacks = fallback_regret(result.records, ivs, {"H100": 128})
    assert fallbacks == sum(1 for r in result.records if r.outcome == "allocated" and r.fallback)
    assert 0 <= regret <= fallbacks
