"""Migration verdicts from cohort statistics: a worse DRA cohort rolls back, an equal one promotes."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.migration import (
    CohortKey,
    MetricState,
    MigrationError,
    Thresholds,
    Verdict,
    build_cohorts,
    mean_difference,
    rate_difference,
    report,
    wilson,
    z_for,
)
from tests.migration.cohorts import cohort_records

THRESHOLDS_FILE = Path(__file__).resolve().parents[2] / "deploy" / "migration" / "thresholds.yaml"


def thresholds() -> Thresholds:
    return Thresholds.from_dict(yaml.safe_load(THRESHOLDS_FILE.read_text()))


def canary(seed: int, pods: int, **dra: float) -> tuple[list, dict]:
    rng = random.Random(seed)
    base, base_rel = cohort_records(rng, track="device-plugin", template_version="", pods=pods, success=0.97)
    params = {"success": 0.97, "latency_ms": 4000.0, "fallback": 0.2, **dra}
    cand, cand_rel = cohort_records(rng, track="dra", template_version="v2", pods=pods, **params)  # type: ignore[arg-type]
    return base + cand, {**base_rel, **cand_rel}


CASES = {
    "equal_cohorts_promote": ({}, 3000, Verdict.PROMOTE),
    "fewer_successes_rollback": ({"success": 0.85}, 1500, Verdict.ROLLBACK),
    "slower_binding_rollback": ({"latency_ms": 12000.0}, 1500, Verdict.ROLLBACK),
    "too_few_pods_hold": ({}, 40, Verdict.HOLD),
    "slightly_slower_inconclusive_hold": ({"latency_ms": 5800.0}, 1500, Verdict.HOLD),
}


@pytest.mark.parametrize(("dra", "pods", "expected"), list(CASES.values()), ids=list(CASES))
def test_verdict_follows_the_declared_thresholds(dra: dict, pods: int, expected: Verdict) -> None:
    records, releases = canary(7, pods, **dra)
    result = report(records, thresholds(), releases=releases)
    assert result.verdict is expected, result.reasons


def test_worse_cohort_names_the_metric_that_regressed() -> None:
    records, releases = canary(11, 1500, success=0.85)
    result = report(records, thresholds(), releases=releases)
    states = {c.metric: c.state for c in result.comparisons}
    assert states["success_rate"] is MetricState.WORSE
    assert any(r.startswith("success_rate: candidate is worse") for r in result.reasons)


def test_report_is_deterministic_for_the_same_records() -> None:
    records, releases = canary(3, 300)
    a = report(records, thresholds(), releases=releases).to_dict()
    b = report(list(reversed(records)), thresholds(), releases=releases).to_dict()
    assert a == b


def test_cohorts_split_by_track_and_template_version() -> None:
    rng = random.Random(5)
    v1, _ = cohort_records(rng, track="dra", template_version="v1", pods=10, success=1.0)
    v2, _ = cohort_records(rng, track="dra", template_version="v2", pods=7, success=1.0)
    dp, _ = cohort_records(rng, track="device-plugin", template_version="", pods=4, success=1.0)
    cohorts = build_cohorts(v1 + v2 + dp)
    assert {str(k): len(c.pods) for k, c in cohorts.items()} == {"device-plugin": 4, "dra/v1": 10, "dra/v2": 7}


def test_gpu_utilisation_comes_from_allocation_lifetimes() -> None:
    rng = random.Random(1)
    records, releases = cohort_records(rng, track="dra", template_version="v2", pods=1, success=1.0, latency_ms=1000)
    bound = next(r for r in records if r.outcome == "allocated")
    key = ("canary", "team-a", bound.pod_uid)
    # held exactly 3 times as long as it waited -> 0.75
    from datetime import datetime, timedelta

    t = datetime.fromisoformat(bound.time.replace("Z", "+00:00")) + timedelta(milliseconds=3 * bound.wait_ms)
    cohort = build_cohorts(records, {key: t.isoformat()})[CohortKey("dra", "v2")]
    assert cohort.samples("gpu_utilisation") == [pytest.approx(0.75)]
    assert cohort.samples("time_pending_ms") == [float(bound.wait_ms)]


def test_wilson_interval_matches_published_values() -> None:
    z = z_for(0.95)
    assert z == pytest.approx(1.959964, abs=1e-6)
    w = wilson(5, 10, z)
    assert (round(w.low, 4), round(w.high, 4)) == (0.2366, 0.7634)
    w0 = wilson(0, 10, z)
    assert (w0.low, round(w0.high, 4)) == (0.0, 0.2775)


def test_rate_difference_matches_newcombe_1998_example() -> None:
    # Newcombe (1998), Stat Med 17:873, example (a): 56/70 vs 48/80 -> 0.2000 (0.0524, 0.3339)
    d = rate_difference([1.0] * 56 + [0.0] * 14, [1.0] * 48 + [0.0] * 32, z_for(0.95))
    assert (round(d.estimate, 4), round(d.low, 4), round(d.high, 4)) == (0.2, 0.0524, 0.3339)


def test_bootstrap_interval_is_deterministic_for_a_seed() -> None:
    rng = random.Random(2)
    a = [rng.gauss(10, 2) for _ in range(200)]
    b = [rng.gauss(11, 2) for _ in range(200)]
    z = z_for(0.95)
    one = mean_difference(a, b, z, rng=random.Random(42), resamples=300)
    two = mean_difference(a, b, z, rng=random.Random(42), resamples=300)
    normal = mean_difference(a, b, z)
    assert one == two
    assert one.estimate == normal.estimate
    # both methods agree on the interval to within a tenth of a unit here
    assert abs(one.low - normal.low) < 0.1 and abs(one.high - normal.high) < 0.1


BAD = {
    "unknown_metric": ({"metrics": {"speed": {"max_regression": 1}}}, "thresholds.metrics.speed: unknown metric"),
    "missing_limit": ({"metrics": {"success_rate": {}}}, "thresholds.metrics.success_rate.max_regression"),
    "unknown_track": ({"candidate": {"track": "gpu"}}, "thresholds.candidate.track: unknown track 'gpu'"),
    "bad_confidence": ({"confidence": 1.5}, "confidence: must be in (0.5, 1)"),
    "unknown_field": ({"verdict": "promote"}, "thresholds.verdict: unknown field"),
}


@pytest.mark.parametrize(("change", "message"), list(BAD.values()), ids=list(BAD))
def test_bad_thresholds_name_the_field(change: dict, message: str) -> None:
    doc = {**yaml.safe_load(THRESHOLDS_FILE.read_text()), **change}
    with pytest.raises(MigrationError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Thresholds.from_dict(doc)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(min_value=1, max_value=500), data=st.data())
def test_wilson_interval_is_within_0_1_and_holds_the_estimate(n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(min_value=0, max_value=n))
    w = wilson(k, n, z_for(0.95))
    assert 0.0 <= w.low <= w.estimate <= w.high <= 1.0
    assert not math.isnan(w.high)


def test_release_is_matched_by_name_and_is_the_first_after_the_allocation() -> None:
    from datetime import datetime, timedelta

    from audit.migration import releases_from_events

    rng = random.Random(4)
    records, _ = cohort_records(rng, track="dra", template_version="v2", pods=1, success=1.0, latency_ms=1000)
    bound = next(r for r in records if r.outcome == "allocated")
    at = datetime.fromisoformat(bound.time.replace("Z", "+00:00"))
    events = [
        # an earlier pod of the same name went away before this one was bound: not its release
        {"cluster": "canary", "seq": 1, "time": (at - timedelta(hours=1)).isoformat(), "type": "delete",
         "object_kind": "Pod", "namespace": "team-a", "name": bound.pod, "payload": {}},
        {"cluster": "canary", "seq": 9, "time": (at + timedelta(milliseconds=bound.wait_ms)).isoformat(),
         "type": "delete", "object_kind": "Pod", "namespace": "team-a", "name": bound.pod, "payload": {}},
    ]
    releases = releases_from_events(events)
    assert list(releases) == [("canary", "team-a", bound.pod)]
    cohort = build_cohorts(records, releases)[CohortKey("dra", "v2")]
    assert cohort.samples("gpu_utilisation") == [pytest.approx(0.5)]  # held as long as it waited
