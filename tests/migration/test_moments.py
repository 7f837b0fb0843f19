"""The comparison works on exact moments (count, sum, sum of squares) per stratum, so the store can
hand over a million pods as a few hundred sums. It gives the figures the per-pod computation gave:
the same means, proportions and verdicts, intervals equal to rounding, and pods handed over as
moments judge exactly as the same pods handed over one by one."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit import migration
from audit.migration import Cohort, CohortKey, Interval, PodOutcome, wilson

THRESHOLDS = migration.Thresholds.from_dict({
    "baseline": {"track": "device-plugin"},
    "candidate": {"track": "dra"},
    "min_pods": 2,
    "metrics": {
        "success_rate": {"max_regression": 0.02, "required": True},
        "fallback_rate": {"max_regression": 0.05},
        "scheduling_latency_ms": {"max_regression": 2000, "required": True},
        "time_pending_ms": {"max_regression": 5000},
        "gpu_utilisation": {"max_regression": 0.03},
    },
})


# -- the per-pod computation the moments replaced: two-pass float mean and variance over samples ----
def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _variance(values: Sequence[float]) -> float:
    if len(values) < 2:
        return 0.0
    m = _mean(values)
    return sum((v - m) ** 2 for v in values) / (len(values) - 1)


def _mean_interval(values: Sequence[float], z: float) -> Interval:
    if not values:
        return Interval(math.nan, math.nan, math.nan, 0)
    m = _mean(values)
    half = z * math.sqrt(_variance(values) / len(values))
    return Interval(m, m - half, m + half, len(values))


def _crude(cand: Sequence[float], base: Sequence[float], z: float, rate: bool) -> Interval:
    if not cand or not base:
        return Interval(math.nan, math.nan, math.nan, 0)
    if rate:
        a, b = wilson(int(sum(cand)), len(cand), z), wilson(int(sum(base)), len(base), z)
        d = a.estimate - b.estimate
        return Interval(d, d - math.sqrt((a.estimate - a.low) ** 2 + (b.high - b.estimate) ** 2),
                        d + math.sqrt((a.high - a.estimate) ** 2 + (b.estimate - b.low) ** 2), min(len(cand), len(base)))
    d = _mean(cand) - _mean(base)
    half = z * math.sqrt(_variance(cand) / len(cand) + _variance(base) / len(base))
    return Interval(d, d - half, d + half, min(len(cand), len(base)))


def _pooled(groups: list[list[float]]) -> float:
    df = sum(len(g) - 1 for g in groups if len(g) >= 2)
    ss = sum(_variance(g) * (len(g) - 1) for g in groups if len(g) >= 2)
    return ss / df if df else _variance([v for g in groups for v in g])


def _stratified(cand: dict, base: dict, z: float, rate: bool) -> tuple[Interval, int]:
    strata = sorted(s for s in cand if cand[s] and base.get(s))
    if not strata:
        return Interval(math.nan, math.nan, math.nan, 0), 0
    weights = [len(cand[s]) * len(base[s]) / (len(cand[s]) + len(base[s])) for s in strata]
    shares = [w / sum(weights) for w in weights]
    estimate = sum(a * (_mean(cand[s]) - _mean(base[s])) for a, s in zip(shares, strata, strict=True))
    n = min(sum(len(cand[s]) for s in strata), sum(len(base[s]) for s in strata))
    if rate:
        def var(values: list[float]) -> float:
            p = (sum(values) + 1) / (len(values) + 2)
            return p * (1 - p) / (len(values) + 2)

        variances = [var(cand[s]) + var(base[s]) for s in strata]
    else:
        pc, pb = _pooled([cand[s] for s in strata]), _pooled([base[s] for s in strata])
        variances = [(_variance(cand[s]) if len(cand[s]) >= 2 else pc) / len(cand[s])
                     + (_variance(base[s]) if len(base[s]) >= 2 else pb) / len(base[s]) for s in strata]
    half = z * math.sqrt(sum(a * a * v for a, v in zip(shares, variances, strict=True)))
    return Interval(estimate, estimate - half, estimate + half, n), len(strata)


def _by_stratum(cohort: Cohort, metric: str) -> dict:
    out: dict = {}
    for p in cohort.pods:
        out.setdefault(p.stratum, Cohort(cohort.key, [])).pods.append(p)
    return {s: c.samples(metric) for s, c in out.items()}


def _close(a: Interval, b: Interval) -> bool:
    return a.n == b.n and all((math.isnan(x) and math.isnan(y)) or x == pytest.approx(y, rel=1e-9, abs=1e-9)
                              for x, y in ((a.estimate, b.estimate), (a.low, b.low), (a.high, b.high)))


# -- random cohorts ----------------------------------------------------------------------------------
pod_outcomes = st.builds(
    lambda track, model, tenant, hour, bound, fallback, wait, extra, used: PodOutcome(
        key=CohortKey(track, ""), succeeded=bound, fallback=bound and fallback,
        latency_ms=float(wait) if bound else None, pending_ms=float(wait + extra),
        utilisation=used if bound else None, stratum=(model, tenant, f"2026-11-02T0{hour}Z")),
    st.sampled_from(["device-plugin", "dra"]), st.sampled_from(["H100", "L4"]), st.sampled_from(["a", "b"]),
    st.integers(0, 1), st.booleans(), st.booleans(), st.integers(0, 600_000), st.integers(0, 60_000),
    st.none() | st.floats(0.0, 1.0, allow_nan=False),
)


def _cohorts(pods: list[PodOutcome]) -> dict[CohortKey, Cohort]:
    out: dict[CohortKey, Cohort] = {}
    for p in pods:
        out.setdefault(p.key, Cohort(p.key)).pods.append(p)
    return out


@given(st.lists(st.integers(-10**7, 10**7), min_size=1, max_size=40))
def test_moments_of_whole_numbers_give_the_plain_mean_and_the_two_pass_variance(values: list[int]) -> None:
    samples = [float(v) for v in values]
    m = migration.Moments.of(samples)
    assert m.mean() == _mean(samples)  # exactly: a sum of whole numbers below 2**53 is exact in floats
    assert m.variance() == pytest.approx(_variance(samples), rel=1e-9, abs=1e-6)


@settings(max_examples=150, deadline=None)
@given(st.lists(pod_outcomes, max_size=60))
def test_the_report_from_moments_equals_the_per_pod_computation(pods: list[PodOutcome]) -> None:
    cohorts = _cohorts(pods)
    rep = migration.compare(cohorts, THRESHOLDS)
    z = migration.z_for(THRESHOLDS.confidence)
    base = Cohort(THRESHOLDS.baseline, [p for p in pods if p.key.track == "device-plugin"])
    cand = Cohort(THRESHOLDS.candidate, [p for p in pods if p.key.track == "dra"])
    for c in rep.comparisons:
        rate = c.metric in migration.RATE_METRICS
        sign = -1 if c.metric in migration.HIGHER_IS_BETTER else 1
        diff, used = _stratified(_by_stratum(cand, c.metric), _by_stratum(base, c.metric), z, rate)
        crude = _crude(cand.samples(c.metric), base.samples(c.metric), z, rate)
        oriented = [Interval(sign * d.estimate, *sorted((sign * d.low, sign * d.high)), d.n) for d in (diff, crude)]
        assert c.strata == used
        assert _close(c.regression, oriented[0]) and _close(c.crude, oriented[1]), c.metric
        for got, cohort in ((c.baseline, base), (c.candidate, cand)):
            values = cohort.samples(c.metric)
            expected = wilson(int(sum(values)), len(values), z) if rate else _mean_interval(values, z)
            assert _close(got, expected), c.metric
    assert (rep.baseline_pods, rep.candidate_pods) == (len(base.pods), len(cand.pods))


@settings(max_examples=100, deadline=None)
@given(st.lists(pod_outcomes, max_size=60))
def test_pods_counted_as_moments_judge_exactly_as_the_same_pods_one_by_one(pods: list[PodOutcome]) -> None:
    one_by_one = _cohorts(pods)
    counted: dict[CohortKey, Cohort] = {}
    for key, cohort in one_by_one.items():
        for stratum, moments in cohort.strata().items():
            counted.setdefault(key, Cohort(key)).count(stratum, moments)
    got, expected = migration.compare(counted, THRESHOLDS).to_dict(), migration.compare(one_by_one, THRESHOLDS).to_dict()
    assert repr(got) == repr(expected)  # repr: NaN figures compare equal too


def test_a_bootstrap_asks_for_per_pod_samples() -> None:
    key = CohortKey("dra", "")
    cohort = Cohort(key)
    cohort.count(("H100", "a", "h"), migration.tally([PodOutcome(key, True, False, 10.0, 10.0, None)]))
    with pytest.raises(migration.MigrationError, match="bootstrap interval needs every pod's sample"):
        migration.compare({key: cohort}, migration.Thresholds(THRESHOLDS.baseline, THRESHOLDS.candidate, 0.95, 1,
                                                               THRESHOLDS.metrics, bootstrap_resamples=50),
                          rng=random.Random(1))
