"""The fairness breakdowns of ``benchmarks.fairness_diagnosis``: contended hours, regret by reason,
p99 per track, on small lifecycles whose figures are worked out by hand."""

from __future__ import annotations

import pytest
import yaml

from audit.metrics import Window
from audit.metrics.fairness import jain_contention
from audit.metrics.lifecycle import Lifecycle, PodLife
from audit.policy import Policy, parse_policy
from audit.records import Blocker, DecisionRecord, Outcome, TierBlocker
from benchmarks.fairness_diagnosis import (
    contended_hours,
    p99_beside_own,
    p99_by_track,
    p99_floor,
    pending_over_share,
    regret_by_ask,
    regret_by_reason,
)

MIN = 60_000
HOUR = 60 * MIN

TWO_TEAMS = """
apiVersion: claimtrail.io/v1alpha1
kind: Policy
metadata: {name: two-teams}
spec:
  version: "1"
  tenants:
    - {name: big, namespaces: [big], weight: 2}
    - {name: small, namespaces: [small], weight: 1}
"""
POLICY = parse_policy(yaml.safe_load(TWO_TEAMS))


def _pod(name: str, ns: str, created_min: int, bound_min: int | None, held_min: int = 0, eq: float = 1.0,
         track: str = "dra", regretted: bool = False) -> PodLife:
    bound = None if bound_min is None else bound_min * MIN
    return PodLife("c", ns, name, f"uid-{name}", ns, track, created_min * MIN, bound_ms=bound,
                   allocated_ms=bound, released_ms=None if bound is None else bound + held_min * MIN,
                   devices=1 if bound is not None else 0, h100_eq=eq if bound is not None else 0.0,
                   regretted=regretted)


def _life(pods: list[PodLife]) -> Lifecycle:
    return Lifecycle("c", pods, [(0, POLICY)], [(0, 100.0)], [], 2 * HOUR)


@pytest.mark.parametrize(
    ("small_track", "pinned_only"),
    [
        pytest.param("dra", [], id="a-tenant-waiting-on-dra-pods-is-backlogged-on-the-shared-pool"),
        pytest.param("device-plugin", ["small"], id="a-tenant-waiting-only-on-device-plugin-pods-is-flagged"),
    ],
)
def test_contended_hours_show_each_tenants_share_and_whose_backlog_is_pinned(small_track, pinned_only):
    # hour 0: big (weight 2) runs 4 H100 all hour, small (weight 1) 1; both have a pod pending 40 min
    pods = [_pod(f"big-run-{i}", "big", 0, 0, held_min=60) for i in range(4)]
    pods += [_pod("small-run", "small", 0, 0, held_min=60),
             _pod("big-wait", "big", 0, 40), _pod("small-wait", "small", 0, 40, track=small_track)]
    life = _life(pods)
    window = Window(0, HOUR)
    [row] = contended_hours(life, window)
    # x: big 4 H100-eq-hours / 2 weight-hours = 2, small 1 / 1 = 1 (the pods bound at 40 min have
    # held no device yet within the hour: held_min 0)
    assert row["x"] == {"big": 2.0, "small": 1.0}
    assert row["jain"] == pytest.approx(9 / 10)  # (2 + 1)² / (2 · (4 + 1))
    assert row["pinned_only"] == pinned_only
    assert jain_contention(life, window) == (pytest.approx(row["jain"]), 1)


@pytest.mark.parametrize(
    ("big_eq", "capped_jain"),
    [
        # capacity 90 over weights 3: 30 H100-eq per weight. big (weight 2) at 80 H100-eq has x 40,
        # cut to 30; small at 10 stays 10
        pytest.param(80.0, (30 + 10) ** 2 / (2 * (30**2 + 10**2)), id="a-tenant-above-its-weighted-share-is-cut-to-it"),
        # big at 40 H100-eq: x 20, below its share, nothing to cut
        pytest.param(40.0, (20 + 10) ** 2 / (2 * (20**2 + 10**2)), id="tenants-within-their-shares-keep-their-index"),
    ],
)
def test_contended_hours_show_the_index_with_each_tenant_cut_to_its_weighted_share(big_eq, capped_jain):
    pods = [_pod("big-run", "big", 0, 0, held_min=60, eq=big_eq), _pod("small-run", "small", 0, 0, held_min=60, eq=10.0),
            _pod("big-wait", "big", 0, 40), _pod("small-wait", "small", 0, 40)]
    life = Lifecycle("c", pods, [(0, POLICY)], [(0, 90.0)], [], 2 * HOUR)
    [row] = contended_hours(life, Window(0, HOUR))
    assert row["fair_x"] == pytest.approx(30.0)
    assert row["jain_capped"] == pytest.approx(capped_jain)
    assert row["jain"] == pytest.approx((big_eq / 2 + 10) ** 2 / (2 * ((big_eq / 2) ** 2 + 100)))


def test_an_hour_with_one_backlogged_tenant_is_not_contended():
    life = _life([_pod("big-wait", "big", 0, 40), _pod("small-wait", "small", 0, 10)])
    assert contended_hours(life, Window(0, HOUR)) == []


def _record(pod: PodLife, detail: dict[str, object] | None) -> DecisionRecord:
    blockers = [] if detail is None else [TierBlocker(Blocker.FALLBACK_ESTIMATE.value, 0, detail)]
    return DecisionRecord("d-" + pod.pod, "c", 1, "2026-11-02T00:00:00Z", 1, pod.tenant, pod.namespace, pod.pod,
                          pod.uid, [], [], [], "1", "x", Outcome.ALLOCATED.value, fallback=True, blockers=blockers)


def test_regretted_fallbacks_are_grouped_by_what_the_estimate_said():
    timed_out = {"basis": "estimate", "wait_on": "quota", "waited_ms": 10 * MIN, "max_wait_ms": 10 * MIN}
    far = {"basis": "at_least", "wait_on": "devices", "waited_ms": 0, "max_wait_ms": 10 * MIN}
    behind = {"basis": "at_least", "wait_on": "quota", "waited_ms": 0, "max_wait_ms": 10 * MIN, "ahead": 3}
    pods = [_pod("a", "big", 0, 10, regretted=True), _pod("b", "big", 0, 10), _pod("c", "small", 0, 1, regretted=True),
            _pod("d", "small", 0, 0), _pod("e", "small", 0, 0, regretted=True)]
    records = [_record(pods[0], timed_out), _record(pods[1], timed_out), _record(pods[2], far), _record(pods[3], None),
               _record(pods[4], behind)]
    assert regret_by_reason(records, _life(pods)) == [
        {"basis": "estimate", "wait_on": "quota", "waited_max_wait": True, "behind_pinned": False, "fallbacks": 2,
         "regretted": 1},
        {"basis": "at_least", "wait_on": "devices", "waited_max_wait": False, "behind_pinned": False, "fallbacks": 1,
         "regretted": 1},
        {"basis": "at_least", "wait_on": "quota", "waited_max_wait": False, "behind_pinned": True, "fallbacks": 1,
         "regretted": 1},
        {"basis": "no estimate", "wait_on": "", "waited_max_wait": False, "behind_pinned": False, "fallbacks": 1,
         "regretted": 0},
    ]


def test_regretted_fallbacks_are_grouped_by_tenant_and_ask_most_regretted_first():
    one = {"basis": "at_least", "wait_on": "quota", "count": 1, "waited_ms": 0, "max_wait_ms": 10 * MIN}
    four = {"basis": "estimate", "wait_on": "devices", "count": 4, "waited_ms": 10 * MIN, "max_wait_ms": 10 * MIN}
    pods = [_pod("a", "small", 0, 1, regretted=True), _pod("b", "small", 0, 1, regretted=True),
            _pod("c", "small", 0, 1), _pod("d", "big", 0, 10, regretted=True), _pod("e", "big", 0, 10),
            _pod("f", "big", 0, 10), _pod("g", "big", 0, 0)]
    records = [_record(pods[0], one), _record(pods[1], one), _record(pods[2], one), _record(pods[3], four),
               _record(pods[4], four), _record(pods[5], four), _record(pods[6], None)]
    assert regret_by_ask(records, _life(pods)) == [
        {"tenant": "small", "count": 1, "wait_on": "quota", "basis": "at_least", "fallbacks": 3, "regretted": 2},
        {"tenant": "big", "count": 4, "wait_on": "devices", "basis": "estimate", "fallbacks": 3, "regretted": 1},
        {"tenant": "big", "count": 0, "wait_on": "", "basis": "no estimate", "fallbacks": 1, "regretted": 0},
    ]


def test_p99_per_track_separates_a_tenants_device_plugin_waits():
    pods = [_pod(f"d{i}", "small", 0, 1) for i in range(3)] + [_pod("p", "small", 0, 50, track="device-plugin"),
                                                                _pod("never", "small", 0, None)]
    assert p99_by_track(_life(pods)) == {"small": 3000.0, "small device-plugin": 3000.0, "small dra": 60.0}


@pytest.mark.parametrize(
    ("held_eq", "over_h"),
    [
        # small's share is 90 × 1/3 = 30 H100-eq: holding exactly that counts as at its share
        pytest.param(30.0, 40 / 60, id="a-tenant-at-its-share-waits-behind-its-own-demand"),
        pytest.param(29.0, 0.0, id="a-tenant-below-its-share-does-not"),
    ],
)
def test_pending_over_share_counts_the_wait_while_the_tenant_held_its_share(held_eq, over_h):
    # small holds held_eq from 0 to 60 min; one pod pends 0-40 min, another 60-90 min (nothing held)
    pods = [_pod("run", "small", 0, 0, held_min=60, eq=held_eq), _pod("w1", "small", 0, 40),
            _pod("w2", "small", 60, 90), _pod("other", "big", 0, 0, held_min=90, eq=50.0)]
    life = Lifecycle("c", pods, [(0, POLICY)], [(0, 90.0)], [], 2 * HOUR)
    total, over = pending_over_share(life, Window(0, 2 * HOUR), "small")
    assert total == pytest.approx(70 / 60)
    assert over == pytest.approx(over_h)


def _quota_policy(borrowing: str) -> Policy:
    """The two teams with H100 quotas: big 8 that it may not exceed, small 2 plus ``borrowing``."""
    doc = yaml.safe_load(TWO_TEAMS)
    big, small = doc["spec"]["tenants"]
    big["quotas"] = yaml.safe_load("{H100: {nominal: 8, borrowingLimit: 0}}")
    small["quotas"] = yaml.safe_load(f"{{H100: {{nominal: 2, borrowingLimit: {borrowing}}}}}")
    return parse_policy(doc)


def _held(name: str, ns: str, start_min: int, end_min: int, devices: int, model: str = "H100") -> PodLife:
    return PodLife("c", ns, name, f"uid-{name}", ns, "dra", start_min * MIN, bound_ms=start_min * MIN,
                   allocated_ms=start_min * MIN, released_ms=end_min * MIN, preferred=model, allocated=model,
                   devices=devices, h100_eq=float(devices))


@pytest.mark.parametrize(
    ("borrowing", "big_holds", "less_quota_s"),
    [
        # small holds its nominal 2 H100 for the first 30 of the 40 min its pod waits, and may not borrow
        pytest.param("0", 0, 600.0, id="a-wait-while-the-tenants-own-quota-is-full-is-taken-out"),
        # it may borrow 2 and big lends its 8 unused: the quota never closes
        pytest.param("2", 0, 2400.0, id="a-quota-others-lend-to-is-open"),
        # big uses all 8 of its own: nothing to lend, closed again
        pytest.param("2", 8, 600.0, id="a-quota-with-nothing-to-borrow-is-closed"),
    ],
)
def test_p99_beside_own_takes_out_the_wait_behind_the_tenants_own_quota(borrowing, big_holds, less_quota_s):
    policy = _quota_policy(borrowing)
    pods = [_held("run", "small", 0, 30, 2), _held("wait", "small", 0, 40, 0), _held("best", "big", 0, 60, 1)]
    pods[1] = PodLife("c", "small", "wait", "uid-wait", "small", "dra", 0, bound_ms=40 * MIN, allocated_ms=40 * MIN,
                      released_ms=50 * MIN, preferred="H100", allocated="H100", devices=1, h100_eq=1.0)
    if big_holds:
        pods.append(_held("lender", "big", 0, 60, big_holds))
    life = Lifecycle("c", pods, [(0, policy)], [(0, 90.0)], [], HOUR)
    got = p99_beside_own(life, Window(0, HOUR))
    # nearest-rank p99 of small's two waits (0 s for the pod bound at once, 2400 s) is the larger;
    # small (weight 1 of 3) never holds its 30 H100-eq share, so no wait is behind its own demand
    assert got["small"] == {"all": 2400.0, "less_quota": less_quota_s, "less_share": 2400.0}
    assert got["big"]["all"] == 0.0


@pytest.mark.parametrize(
    ("pool", "small_tracks", "floor"),
    [
        # 4 devices, 3 held by big for an hour: the one left holds one of small's two 30-minute pods
        # created at 0, so the other waited until it ended; its wait (1,800 s) is small's p99 (the
        # 2nd of 2) and every X below 1,800 s is proved
        pytest.param(4, ("dra", "dra"), 1799.0, id="one-device-left-for-two-pods-proves-the-p99"),
        pytest.param(5, ("dra", "dra"), 0.0, id="room-for-both-proves-nothing"),
        # a device-plugin pod waits for the nodes it is pinned to, which the pool's count does not say
        pytest.param(4, ("dra", "device-plugin"), 0.0, id="a-tenant-with-device-plugin-pods-gets-no-bound"),
    ],
)
def test_the_p99_floor_counts_pods_no_schedule_can_start_in_time(pool, small_tracks, floor):
    big = [_pod(f"b{i}", "big", 0, 0, held_min=60) for i in range(3)]
    small = [_pod("s1", "small", 0, 0, held_min=30, track=small_tracks[0]),
             _pod("s2", "small", 0, 30, held_min=30, track=small_tracks[1])]
    life = _life(big + small)
    assert p99_floor(life, Window(0, 2 * HOUR), "small", pool) == floor
    assert p99_beside_own(life, Window(0, 2 * HOUR))["small"]["all"] == 1800.0  # the p99 it bounds
