"""The canary is judged within strata of model asked for × tenant × hour: cohorts that differ only in which
strata they fill compare as equal, a difference inside every stratum is found, pods without a
counterpart are counted, and the effect does not depend on how strata are named."""

from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from audit import migration
from tests.migration.strata import CONFOUNDED, ONE_SIDED_STRATA, Pod, asked, pods, records

Z95 = migration.z_for(0.95)
# what a user writes to judge DRA template v2 against the device plugin on scheduling latency
LATENCY_ONLY = yaml.safe_load("""
baseline: {track: device-plugin}
candidate: {track: dra, template_version: v2}
confidence: 0.95
min_pods: 8
metrics:
  scheduling_latency_ms: {max_regression: 2000, required: true}
""")
# the confounded cohorts by hand: weights 6·2/8 = 1.5 in both strata, shares 1/2 each;
# L4: Var(d) = 48000/6 + 80000/2 = 48000; H100: Var(d) = 2e6/2 + 1.2e6/6 = 1.2e6
HALF = Z95 * math.sqrt(0.25 * 48_000 + 0.25 * 1_200_000)


def _shifted(group: list[Pod], by_ms: int) -> list[Pod]:
    return [Pod(p.track, p.model, p.tenant, p.hour, p.wait_ms + by_ms, p.bound) for p in group]


WORSE_IN_EVERY_STRATUM = [p for p in CONFOUNDED if p.track == "device-plugin"] + _shifted(
    [p for p in CONFOUNDED if p.track == "dra"], 5000)


@pytest.mark.parametrize(
    ("cohort_pods", "verdict", "estimate", "crude_estimate", "crude_state_worse", "matched", "unmatched"),
    [
        # unstratified, DRA waits 59.5 s longer (90 250 − 30 750 ms) and its interval clears 2 s: rollback;
        # within each stratum the tracks wait alike
        (CONFOUNDED, "promote", 0.0, 59_500.0, True, (8, 8), (0, 0)),
        (WORSE_IN_EVERY_STRATUM, "rollback", 5000.0, 64_500.0, True, (8, 8), (0, 0)),
        # the one-sided strata change nothing but the unmatched counts
        (ONE_SIDED_STRATA, "promote", 0.0, None, None, (8, 8), (1, 3)),
    ],
    ids=["confounded-cohorts-equal-within-strata", "worse-in-every-stratum", "one-cohort-strata-are-unmatched"],
)
def test_the_verdict_follows_the_stratified_effect(
    cohort_pods: list[Pod], verdict: str, estimate: float, crude_estimate: float | None,
    crude_state_worse: bool | None, matched: tuple[int, int], unmatched: tuple[int, int],
) -> None:
    rep = migration.report(records(cohort_pods), migration.Thresholds.from_dict(LATENCY_ONLY), asked=asked(cohort_pods))
    (latency,) = rep.comparisons
    assert rep.verdict.value == verdict
    assert latency.strata == 2 and rep.matching.strata == 2
    assert latency.regression.estimate == pytest.approx(estimate, abs=1e-9)
    assert latency.regression.low == pytest.approx(estimate - HALF)
    assert latency.regression.high == pytest.approx(estimate + HALF)
    if crude_estimate is not None:
        assert latency.crude.estimate == pytest.approx(crude_estimate)
        assert (latency.crude.low > 2000) is crude_state_worse
    out = rep.to_dict()
    assert (out["matched_pods"]["baseline"], out["matched_pods"]["candidate"]) == matched
    assert (out["unmatched_pods"]["baseline"], out["unmatched_pods"]["candidate"]) == unmatched
    assert out["strata"] == 2 and out["stratified_by"] == ["model", "tenant", "hour"]
    # the existing fields keep their meaning: every pod of each cohort, the unstratified descriptions
    assert (out["baseline_pods"], out["candidate_pods"]) == (matched[0] + unmatched[0], matched[1] + unmatched[1])


def test_unmatched_pods_are_named_in_the_reasons_and_per_cohort() -> None:
    rep = migration.report(records(ONE_SIDED_STRATA), migration.Thresholds.from_dict(LATENCY_ONLY),
                           asked=asked(ONE_SIDED_STRATA))
    assert rep.reasons == ["unmatched (no pod of the other cohort with the same model × tenant × hour, left out): "
                           "baseline 1, candidate 3 pods"]
    assert {str(k): v for k, v in rep.matching.by_cohort.items()} == {"device-plugin": (8, 1), "dra/v2": (8, 3)}


def test_cohorts_without_a_common_stratum_are_not_measured_and_held() -> None:
    # the shipped demo's situation: device-plugin pods all on L4, DRA pods all preferring H100
    apart = pods("device-plugin", "L4", "team-a", 9, [800] * 10) + pods("dra", "H100", "team-a", 9, [60_000] * 10)
    rep = migration.report(records(apart), migration.Thresholds.from_dict(LATENCY_ONLY), asked=asked(apart))
    (latency,) = rep.comparisons
    assert (rep.verdict.value, latency.state.value, latency.strata) == ("hold", "not_measured", 0)
    assert latency.crude.estimate == pytest.approx(59_200.0)
    assert rep.reasons[0] == ("scheduling_latency_ms: required but not measured in both cohorts within a common "
                              "model × tenant × hour")
    assert (rep.matching.unmatched_baseline, rep.matching.unmatched_candidate) == (10, 10)


@pytest.mark.parametrize(
    ("pod", "world", "stratum_model"),
    [
        (Pod("device-plugin", "H100", "team-a", 23, 100), True, "H100"),
        # pins no model: it asked for any device-plugin GPU, though it got an H100 (by the model it
        # got, it would be compared with DRA pods that asked for H100 and waited for one)
        (Pod("device-plugin", "H100", "team-a", 23, 100, pinned=False), True, "H100|L4"),
        (Pod("device-plugin", "L4", "team-a", 23, 100), True, "L4"),
        # never bound: it got nothing, yet asked for H100
        (Pod("device-plugin", "H100", "team-a", 23, 100, bound=False), True, "H100"),
        # no event log: its record does not say what it asked for, and nothing is guessed
        (Pod("device-plugin", "H100", "team-a", 23, 100), False, migration.UNKNOWN_ASK),
        # a DRA pod that fell back from H100 to A100 asked for H100 (its record's first choice)
        (Pod("dra", "H100", "team-a", 23, 100, got="A100"), False, "H100"),
    ],
    ids=["dp-pinned-h100", "dp-unpinned-got-h100", "dp-pinned-l4", "dp-pinned-h100-never-bound",
         "dp-without-world", "dra-fell-back-to-a100"],
)
def test_a_pod_is_stratified_by_the_model_it_asked_for(pod: Pod, world: bool, stratum_model: str) -> None:
    cohorts = migration.build_cohorts(records([pod]), asked=asked([pod]) if world else None)
    [(_, cohort)] = cohorts.items()
    assert [p.stratum for p in cohort.pods] == [(stratum_model, "team-a", "2026-11-02T23Z")]


@pytest.mark.parametrize(
    ("pinned", "verdict", "strata", "matched", "estimate"),
    [
        # asked for H100 like the DRA pods: compared with them, DRA waits 29.9 s longer
        (True, "rollback", 1, (4, 4), 29_900.0),
        # asked for any GPU and got a free H100: by the model it got it would be compared with the
        # DRA pods that waited for an H100 (the same rollback); it asked for something else
        (False, "hold", 0, (0, 0), math.nan),
    ],
    ids=["asked-for-h100", "asked-for-any-got-h100"],
)
def test_device_plugin_pods_meet_the_dra_pods_that_asked_for_the_same_model(
    pinned: bool, verdict: str, strata: int, matched: tuple[int, int], estimate: float,
) -> None:
    group = [Pod("device-plugin", "H100", "team-a", 9, 100, pinned=pinned) for _ in range(4)] + pods(
        "dra", "H100", "team-a", 9, [30_000] * 4)
    rep = migration.report(records(group), migration.Thresholds.from_dict(LATENCY_ONLY), asked=asked(group))
    (latency,) = rep.comparisons
    assert (rep.verdict.value, latency.strata, rep.matching.matched_baseline, rep.matching.matched_candidate) == (
        verdict, strata, *matched)
    assert latency.regression.estimate == pytest.approx(estimate, nan_ok=True)


# success rate by hand: L4 stratum DRA 1/2 vs device plugin 2/2, H100 stratum DRA 4/4 vs 2/4.
# d = −1/2 and +1/2 with weights 2·2/4 = 1 and 4·4/8 = 2: (−1/2 + 2·1/2) / 3 = 1/6.
# Agresti–Caffo variances: L4 (2/4)(2/4)/4 + (3/4)(1/4)/4 = 0.109375; H100 (5/6)(1/6)/6 + (3/6)(3/6)/6.
RATE_CAND = {("L4", "a", "h"): [1.0, 0.0], ("H100", "a", "h"): [1.0] * 4}
RATE_BASE = {("L4", "a", "h"): [1.0, 1.0], ("H100", "a", "h"): [1.0, 1.0, 0.0, 0.0]}
RATE_VAR = (1 / 3) ** 2 * 0.109375 + (2 / 3) ** 2 * ((5 / 36) / 6 + 0.25 / 6)
# durations by hand: x: d = 11 − 10 = 1, w = 2·2/4 = 1; y: d = 20 − 20 = 0, w = 1·2/3 = 2/3, so
# shares 3/5 and 2/5. Var(d_x) = 2/2 + 0/2 = 1 from the stratum's own variances; y has a single
# candidate sample, which takes the candidate's pooled within-stratum variance (2, from x):
# Var(d_y) = 2/1 + 8/2 = 6.
MEAN_CAND = {"x": [10.0, 12.0], "y": [20.0]}
MEAN_BASE = {"x": [10.0, 10.0], "y": [18.0, 22.0]}
MEAN_VAR = (3 / 5) ** 2 * 1.0 + (2 / 5) ** 2 * 6.0


@pytest.mark.parametrize(
    ("cand", "base", "rate", "estimate", "variance", "n", "used"),
    [
        (RATE_CAND, RATE_BASE, True, 1 / 6, RATE_VAR, 6, 2),
        (MEAN_CAND, MEAN_BASE, False, 3 / 5, MEAN_VAR, 3, 2),
        ({"only-here": [1.0]}, {"elsewhere": [2.0]}, False, math.nan, math.nan, 0, 0),
    ],
    ids=["proportions-agresti-caffo", "means-with-a-single-sample-stratum", "no-common-stratum"],
)
def test_stratified_difference_by_hand(
    cand: dict, base: dict, rate: bool, estimate: float, variance: float, n: int, used: int,
) -> None:
    got, strata = migration.stratified_difference(cand, base, Z95, rate=rate)
    assert (got.n, strata) == (n, used)
    if math.isnan(estimate):
        assert math.isnan(got.estimate) and math.isnan(got.low) and math.isnan(got.high)
        return
    assert got.estimate == pytest.approx(estimate)
    assert got.high - got.estimate == pytest.approx(Z95 * math.sqrt(variance))
    assert got.estimate - got.low == pytest.approx(Z95 * math.sqrt(variance))


def test_the_stratified_bootstrap_is_seeded_and_brackets_the_estimate() -> None:
    import random

    cand = {s: [float(v) for v in range(k, k + 9)] for k, s in enumerate("abc")}
    base = {s: [float(v) + 1 for v in range(k, k + 9)] for k, s in enumerate("abc")}
    first, _ = migration.stratified_difference(cand, base, Z95, rate=False, rng=random.Random(7), resamples=400)
    again, _ = migration.stratified_difference(cand, base, Z95, rate=False, rng=random.Random(7), resamples=400)
    assert first == again
    assert first.estimate == pytest.approx(-1.0) and first.low < -1.0 < first.high


samples = st.lists(st.integers(min_value=0, max_value=10_000).map(float), min_size=1, max_size=6)
strata_maps = st.dictionaries(st.text(alphabet="abcdef", min_size=1, max_size=3), samples, min_size=1, max_size=6)


@given(strata_maps, st.booleans())
def test_identical_cohorts_have_a_zero_effect(cohort: dict[str, list[float]], rate: bool) -> None:
    values = {k: [1.0 if v > 5000 else 0.0 for v in vs] for k, vs in cohort.items()} if rate else cohort
    got, used = migration.stratified_difference(values, values, Z95, rate=rate)
    assert got.estimate == 0.0 and used == len(values)
    assert got.low <= 0.0 <= got.high


@given(strata_maps, strata_maps, st.randoms(use_true_random=False))
def test_relabelling_strata_does_not_change_the_effect(cand: dict[str, list[float]], base: dict[str, list[float]],
                                                      rnd: object) -> None:
    keys = sorted(set(cand) | set(base))
    shuffled = list(keys)
    rnd.shuffle(shuffled)  # type: ignore[attr-defined]
    rename = {k: f"stratum-{shuffled.index(k)}" for k in keys}  # a bijection onto new names
    got, used = migration.stratified_difference(cand, base, Z95, rate=False)
    moved, used_moved = migration.stratified_difference(
        {rename[k]: v for k, v in cand.items()}, {rename[k]: v for k, v in base.items()}, Z95, rate=False)
    assert used == used_moved
    for a, b in ((got.estimate, moved.estimate), (got.low, moved.low), (got.high, moved.high)):
        assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, rel=1e-9, abs=1e-9)
