"""Each definition of audit.metrics on small histories whose figures are worked out by hand."""

from __future__ import annotations

import pytest

from audit.metrics.fairness import jain, jain_contention, jain_whole
from audit.metrics.fallback import fallback_stats
from audit.metrics.health import device_health
from audit.metrics.lifecycle import Lifecycle, PodLife, UnhealthySpan
from audit.metrics.ranks import nearest_rank
from audit.metrics.starving import starving_pods
from audit.metrics.usage import entitlements, tenant_usage
from audit.metrics.waits import tenant_waits
from audit.metrics.window import Window
from audit.policy import parse_policy
from tests.metrics.eventlog import MIN, policy_doc

H = 60 * MIN
DAY = Window(0, 24 * H)


def pod(tenant: str, created: float, bound: float | None = None, failed: float | None = None, *,
        track: str = "dra", tiers: tuple[int, ...] = (), alternatives: bool = True, devices: int = 0,
        eq: float = 0.0, released: float | None = None, regretted: bool = False, preferred: str = "H100",
        allocated: str = "") -> PodLife:
    """Times in minutes from the window start."""
    def ms(m: float | None) -> int | None:
        return None if m is None else int(m * MIN)
    return PodLife("c1", tenant, f"p{created}-{bound}", "u", tenant, track, int(created * MIN), ms(bound), ms(failed),
                   ms(bound) if devices else None, ms(released), alternatives, tiers, preferred, allocated, devices, eq,
                   regretted)


def policy(version: str, weights: dict[str, float], **spec: object) -> object:
    return parse_policy(policy_doc(version, weights, **spec))


@pytest.mark.parametrize(("values", "q", "expected"), [
    ([], 0.5, 0.0),
    ([7], 0.99, 7.0),
    ([1, 2, 3, 4], 0.5, 2.0),  # ⌈0.5·4⌉ = 2nd smallest, not the interpolated 2.5
    ([float(x) for x in range(1, 21)], 0.95, 19.0),  # 0.95·20 is 19 exactly, not 19.000000000000004
    ([float(x) for x in range(1, 101)], 0.99, 99.0),
    ([1, 2, 3], 0.0, 1.0),
])
def test_percentiles_are_nearest_rank(values: list[float], q: float, expected: float) -> None:
    assert nearest_rank(values, q) == expected


def test_waits_count_pods_not_records_and_keep_pending_and_failed_apart() -> None:
    pods = [pod("a", 0, 0), pod("a", 10, 12), pod("a", 20, 50), pod("a", 30, 31),
            pod("a", 1380, None),  # pending at the end: waited 60 min so far
            pod("a", 100, None, failed=190),  # failed after 90 min
            pod("b", -30, -10),  # bound before the window: not started in it
            pod("b", 1430, 1450)]  # bound after the window end: pending at its end (10 min so far)
    w = tenant_waits(pods, DAY)
    a, b = w["a"], w["b"]
    assert (a.waits_ms, a.p(0.5), a.p(0.95), a.pending_at_end, a.failed, a.longest_wait_ms) == (
        [0, 1 * MIN, 2 * MIN, 30 * MIN], 1 * MIN, 30 * MIN, 1, 1, 90 * MIN)
    # b started no pod in the window: no wait to rank, so no percentile (not a wait of 0)
    assert (b.pods_started, b.p(0.5), b.p(0.95), b.p(0.99), b.pending_at_end, b.longest_wait_ms) == (
        0, None, None, None, 1, 10 * MIN)


def test_starving_counts_bound_and_still_pending_pods_over_the_timeout_but_not_failed_ones() -> None:
    pods = [pod("a", 0, 61), pod("a", 0, 60),  # 61 min > 1 h; exactly 1 h is not over it
            pod("a", 1370, None),  # still pending, 70 min at the window end: starving
            pod("a", 0, None, failed=200),  # failed after 200 min: counted as failed, never starving
            pod("b", 1400, None)]  # pending 40 min: not yet
    assert starving_pods(pods, DAY, 60 * MIN) == {"a": 2}


def test_usage_is_clipped_to_the_window_and_weighs_devices_by_model() -> None:
    w = Window(60 * MIN, 180 * MIN)
    pods = [pod("a", 0, 0, devices=2, eq=2.0, released=120),  # 60 min inside: 2 device-hours
            pod("a", 90, 90, devices=1, eq=0.5),  # never released: 90 min inside
            pod("b", 0, 30, devices=2, eq=1.5, released=240, track="device-plugin"),  # H100 + A100, 120 min inside
            pod("b", 0, 10, devices=8, eq=8.0, released=50)]  # released before the window
    u = tenant_usage(pods, w)
    assert {t: (x.device_hours, x.h100_eq_hours) for t, x in u.items()} == {"a": (2.0 + 1.5, 2.0 + 0.75),
                                                                            "b": (4.0, 3.0)}


def _life(pods: list[PodLife], policies: list[tuple[int, object]], capacity: list[tuple[int, float]]) -> Lifecycle:
    return Lifecycle("c1", pods, policies, capacity, [], 24 * H)  # type: ignore[arg-type]


def test_entitlement_integrates_capacity_and_the_weights_in_force_at_each_moment() -> None:
    # inference's weight goes 1 -> 2 at 12 h; capacity 12 H100-eq, then 16 from 18 h
    life = _life([], [(0, policy("1", {"inference": 1, "training": 1})),
                      (12 * H, policy("2", {"inference": 2, "training": 1}))], [(0, 12.0), (18 * H, 16.0)])
    e = entitlements(life, DAY)
    # inference: 12·12·½ + 12·6·⅔ + 16·6·⅔ = 72 + 48 + 64; training: 72 + 24 + 32
    assert e == pytest.approx({"inference": 184.0, "training": 128.0}, rel=1e-12)
    assert sum(e.values()) == pytest.approx(12 * 18 + 16 * 6, rel=1e-12)


@pytest.mark.parametrize(("xs", "expected"), [
    ([], 1.0), ([0.0, 0.0], 1.0), ([1.0, 1.0, 1.0], 1.0), ([1.0, 0.0], 0.5), ([3.0, 1.0], 16 / 20),
])
def test_jain_index(xs: list[float], expected: float) -> None:
    assert jain(xs) == expected


def test_jain_over_the_whole_window_normalises_by_entitlement_not_device_counts() -> None:
    # b used twice a's H100-eq-hours on twice the entitlement: perfectly fair
    assert jain_whole({"a": 10.0, "b": 20.0}, {"a": 50.0, "b": 100.0}) == 1.0
    # a tenant without entitlement is outside; one with entitlement and no use is in (x = 0)
    assert jain_whole({"a": 10.0}, {"a": 10.0, "b": 10.0, "c": 0.0}) == 0.5


def test_jain_under_contention_compares_backlogged_tenants_per_hour() -> None:
    pods = [
        # hour 0: a and b both backlogged (pending 45 and 30 min); a used 2 H100-eq-h, b 1
        pod("a", 0, 45, devices=4, eq=4.0, released=75),  # 15 min in hour 0 (1 eq-h), 15 min in hour 1
        pod("a", 0, 30, devices=2, eq=2.0, released=60),  # 30 min in hour 0 (1 eq-h)
        pod("b", 0, 30, devices=2, eq=2.0, released=60),  # 1 eq-h
        # hour 1: only c backlogged (a pending 10 min only): not contended
        pod("c", 60, None), pod("a", 70, 80),
    ]
    life = _life(pods, [(0, policy("1", {"a": 1, "b": 1, "c": 1}))], [(0, 8.0)])
    value, windows = jain_contention(life, Window(0, 2 * H))
    assert (value, windows) == (jain([2.0, 1.0]), 1)
    # with b weighing 0.5 the same use is fair: x = 2/1 and 1/0.5
    life = _life(pods, [(0, policy("1", {"a": 1, "b": 0.5, "c": 1}))], [(0, 8.0)])
    assert jain_contention(life, Window(0, 2 * H)) == (1.0, 1)
    # no hour with two backlogged tenants: no figure, and that is said
    assert jain_contention(_life([pod("c", 0, None)], [(0, policy("1", {}))], [(0, 8.0)]), DAY) == (None, 0)


def test_first_choice_fallback_and_regret_count_dra_pods_with_alternatives_only() -> None:
    pods = [pod("a", 0, 1, tiers=(0,), allocated="H100"),
            pod("a", 0, 1, tiers=(0, 0), allocated="H100"),
            pod("a", 0, 1, tiers=(0, 1), allocated="A100|H100", regretted=True),  # fell back on its 2nd request
            pod("a", 0, 1, tiers=(2,), allocated="L40S"),
            pod("a", 0, 1, tiers=(0,), alternatives=False, allocated="A100"),  # no alternatives: outside
            pod("a", 0, 1, track="device-plugin", allocated="L4"),  # device plugin: outside
            pod("a", 0, None, tiers=(), allocated="")]  # not bound: outside
    s = fallback_stats(pods, DAY)
    assert (s.pods_with_preference, s.first_choice, s.fallbacks, s.regretted, s.first_choice_rate,
            s.regret_rate) == (4, 2, 2, 1, 0.5, 0.5)
    assert s.paths == {("H100", "H100"): 2, ("H100", "A100|H100"): 1, ("H100", "L40S"): 1}
    assert fallback_stats([], DAY).first_choice_rate is None


def test_health_counts_distinct_devices_and_device_hours() -> None:
    spans = [UnhealthySpan("d1", "H100", 0, 30 * MIN), UnhealthySpan("d1", "H100", 60 * MIN, 90 * MIN),
             UnhealthySpan("d2", "A100", 23 * H, None), UnhealthySpan("d3", "A100", -H, 0)]
    h = device_health(spans, DAY)
    assert (h.unhealthy_devices, h.device_hours, h.by_model) == (2, 2.0, {"A100": (1, 1.0), "H100": (1, 1.0)})
