"""Device plugin → DRA migration: cohorts, their statistics with confidence intervals, a verdict,
and the ordered plan that follows from it.

Pure: records (and optional release times) in, a report out; no clock, and randomness only
through a seeded ``random.Random`` the caller passes for bootstrap intervals.

A cohort is the set of pods sharing a ``track`` (``device-plugin`` or ``dra``) and a claim
template version (the ``claimtrail.io/template-version`` label). Per pod, the latest record
decides its cohort; the pod succeeded if any attempt allocated; its scheduling latency is the
bound record's ``wait_ms`` (creation → bound) and its time pending the largest ``wait_ms`` of
any attempt (so pods that never bound count too). GPU utilisation comes from allocation
lifetimes: of the time from a pod's creation until its devices were released, the share it held
them, ``lifetime / (wait + lifetime)``.

Candidate and baseline are compared like with like: within strata of model × tenant × hour (of
the pod's first attempt), the model being the one the pod *asked for*, never the one it got (a pod
stratified by what it got is compared only with pods that found the same model free, which
hides the waiting that asking for a busy model costs). A DRA pod asks for the first choice of its
first claim's first request (its record's ``preferred_model``); a device-plugin pod's
``nvidia.com/gpu`` limit names no model (its record none, unless its producer knew it), so what
it asked for is read from the world: the models of the device-plugin nodes its nodeSelector and
required node affinity admit (``PodLife.asked`` of ``audit.metrics.lifecycle``, passed in as
``Asked``); without it the pod's stratum is ``UNKNOWN_ASK`` and it matches no pod of the other
cohort. A stratum holding pods of both cohorts
is matched; pods in a stratum of one cohort only are counted as unmatched and left out of the
comparison (they have nothing to be compared with). The effect is the stratified difference:
the per-stratum differences (of means for durations and utilisation, of proportions for rates)
combined with Cochran–Mantel–Haenszel weights, with a normal-approximation interval (or a
seeded stratified bootstrap for means). The crude, unstratified difference (Newcombe's hybrid
score interval for rates, Welch's normal approximation for means) is reported beside it. Every
figure but a bootstrap needs of a stratum's samples only their count, sum and sum of squares
(``Moments``, kept exact), so a cohort may hold its pods one by one or as those sums per stratum,
as the audit store hands them over. Per metric, with ``r`` the regression (oriented so
positive is worse) and ``t`` its declared tolerance: ``low(r) > t`` → worse (rollback),
``high(r) <= t`` → acceptable, otherwise inconclusive (hold).
"""

from __future__ import annotations

import math
import posixpath
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from fractions import Fraction
from typing import Any

from audit.metrics.lifecycle import PodLife
from audit.records import DecisionRecord, Outcome, Track
from audit.timestamps import parse_rfc3339


class Verdict(StrEnum):
    PROMOTE = "promote"
    HOLD = "hold"
    ROLLBACK = "rollback"


class MetricState(StrEnum):
    ACCEPTABLE = "acceptable"
    WORSE = "worse"
    INCONCLUSIVE = "inconclusive"
    NOT_MEASURED = "not_measured"


METRICS = ("success_rate", "fallback_rate", "scheduling_latency_ms", "time_pending_ms", "gpu_utilisation")
HIGHER_IS_BETTER = frozenset({"success_rate", "gpu_utilisation"})
RATE_METRICS = frozenset({"success_rate", "fallback_rate"})


class MigrationError(ValueError):
    """A threshold document or input that cannot be used; the message names the field."""


# -- cohorts ----------------------------------------------------------------------------------------
@dataclass(frozen=True, order=True)
class CohortKey:
    track: str
    template_version: str = ""

    def matches(self, other: CohortKey) -> bool:
        """A selector with an empty template version matches every version of its track."""
        return self.track == other.track and (not self.template_version or self.template_version == other.template_version)

    def __str__(self) -> str:
        return f"{self.track}/{self.template_version}" if self.template_version else self.track


# (model asked for, tenant, hour of the first attempt): pods compared with each other share one.
Stratum = tuple[str, str, str]
STRATIFIED_BY = ("model", "tenant", "hour")
# What each device-plugin pod asked for, keyed by (cluster, namespace, pod uid) and by (cluster,
# namespace, pod name): the models of the device-plugin nodes its node constraints admit, "|"-joined.
Asked = Mapping[tuple[str, str, str], str]
UNKNOWN_ASK = "(asked model not known)"  # a device-plugin pod the world says nothing about


def asked_from_lifecycle(pods: Iterable[PodLife]) -> dict[tuple[str, str, str], str]:
    """``Asked`` from the pod lifecycle fold: each device-plugin pod's ``asked``, by uid and by name
    (a name re-used by a later pod keeps the later pod's)."""
    out: dict[tuple[str, str, str], str] = {}
    for life in pods:
        if life.track == Track.DEVICE_PLUGIN.value:
            if life.uid:
                out[(life.cluster, life.namespace, life.uid)] = life.asked
            out[(life.cluster, life.namespace, life.pod)] = life.asked
    return out


def asked_model(record: DecisionRecord, asked: Asked | None) -> str:
    """The model the record's pod asked for: its ``preferred_model`` when the record carries one (a
    DRA pod's first choice); else, for a device-plugin pod, from ``asked`` (by uid, else by name),
    ``UNKNOWN_ASK`` when not there or when no device-plugin node admitted it."""
    return model_asked(record.track, record.preferred_model, (record.cluster, record.namespace),
                       (record.pod_uid, record.pod), asked)


def model_asked(track: str, preferred_model: str, where: tuple[str, str], names: tuple[str, str],
                asked: Asked | None) -> str:
    """``asked_model`` from a pod's fields: its track and preferred model, (cluster, namespace) and
    (uid, name) as its latest record names them."""
    if preferred_model or track != Track.DEVICE_PLUGIN.value:
        return preferred_model
    for name in names:
        found = (asked or {}).get((*where, name)) if name else None
        if found is not None:
            return found or UNKNOWN_ASK
    return UNKNOWN_ASK


def stratum_hour(t: datetime) -> str:
    """The hour a time falls in, in UTC, as the stratum's hour label (e.g. ``2026-11-01T09Z``)."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%HZ")


@dataclass
class PodOutcome:
    key: CohortKey
    succeeded: bool
    fallback: bool
    latency_ms: float | None  # None when the pod never bound
    pending_ms: float
    utilisation: float | None  # None when no release was observed
    stratum: Stratum = ("", "", "")


def _duration(ms: float) -> str:
    """Milliseconds in the unit a person reads them in: ms, s, min or h."""
    size = abs(ms)
    if size < 1000:
        return f"{ms:.0f} ms"
    if size < 120_000:
        return f"{ms / 1000:.1f} s"
    if size < 7_200_000:
        return f"{ms / 60_000:.1f} min"
    return f"{ms / 3_600_000:.1f} h"


def human_value(metric: str, value: float) -> str:
    """A cohort's figure for ``metric`` with its unit: a share as %, a time as ms/s/min/h."""
    if math.isnan(value):
        return "-"
    if metric.endswith("_ms"):
        return _duration(value)
    return f"{value * 100 + 0.0:.1f} %"  # + 0.0 turns -0.0 into 0.0


def human_difference(metric: str, value: float) -> str:
    """A difference between cohorts (or a limit on it): times as ms/s/min/h, shares in
    percentage points (pp), since 2 % against 5 % is 3 points, not 3 %."""
    if math.isnan(value):
        return "-"
    if metric.endswith("_ms"):
        return _duration(value)
    return f"{value * 100 + 0.0:.1f} pp"


@dataclass
class Moments:
    """What a mean, a proportion and a variance need of some samples: their count, sum and sum of
    squares, kept exact (integers, or fractions for non-integer samples) so that sums gathered in
    any order, in ClickHouse or here, are equal, and a mean over integers equals the plain
    ``sum(values) / len(values)``."""

    n: int = 0
    total: int | Fraction = 0
    squares: int | Fraction = 0

    @classmethod
    def of(cls, values: Iterable[float]) -> Moments:
        out = cls()
        for v in values:
            out.add(v)
        return out

    def add(self, value: float) -> None:
        x: int | Fraction = int(value) if float(value).is_integer() else Fraction(value)
        self.n += 1
        self.total += x
        self.squares += x * x

    def __add__(self, other: Moments) -> Moments:
        return Moments(self.n + other.n, self.total + other.total, self.squares + other.squares)

    def mean(self) -> float:
        return float(Fraction(self.total) / self.n)

    def variance(self) -> float:
        """The sample variance (n − 1 in the denominator); 0 for fewer than two samples."""
        if self.n < 2:
            return 0.0
        return float((Fraction(self.squares) - Fraction(self.total) ** 2 / self.n) / (self.n - 1))


Samples = Sequence[float] | Moments


def _moments(values: Samples) -> Moments:
    return values if isinstance(values, Moments) else Moments.of(values)


def _pod_samples(pod: PodOutcome) -> dict[str, float | None]:
    """One pod's sample of each metric; None where the metric does not count the pod."""
    return {
        "success_rate": 1.0 if pod.succeeded else 0.0,
        "fallback_rate": (1.0 if pod.fallback else 0.0) if pod.succeeded else None,
        "scheduling_latency_ms": pod.latency_ms,
        "time_pending_ms": pod.pending_ms,
        "gpu_utilisation": pod.utilisation,
    }


def tally(pods: Iterable[PodOutcome]) -> dict[str, Moments]:
    """Per metric, the moments of the pods' samples."""
    out = {m: Moments() for m in METRICS}
    for pod in pods:
        for metric, value in _pod_samples(pod).items():
            if value is not None:
                out[metric].add(value)
    return out


def _sum_tallies(tallies: Iterable[Mapping[str, Moments]]) -> dict[str, Moments]:
    out = {m: Moments() for m in METRICS}
    for t in tallies:
        for m in METRICS:
            out[m] = out[m] + t[m]
    return out


@dataclass
class Cohort:
    """A cohort's pods: one by one (``pods``), and per stratum as moments only (``counted``, the
    way the audit store hands over a million pods without a million Python objects)."""

    key: CohortKey
    pods: list[PodOutcome] = field(default_factory=list)
    counted: dict[Stratum, dict[str, Moments]] = field(default_factory=dict)

    def samples(self, metric: str) -> list[float]:
        """The per-pod samples of ``metric`` (of ``pods`` only: counted pods have none)."""
        if metric not in METRICS:
            raise MigrationError(f"unknown metric {metric!r}")
        return [v for v in (_pod_samples(p)[metric] for p in self.pods) if v is not None]

    def count(self, stratum: Stratum, moments: Mapping[str, Moments]) -> None:
        """Add pods known by their moments in ``stratum``."""
        held = self.counted.get(stratum)
        self.counted[stratum] = _sum_tallies([held, moments]) if held else dict(moments)

    def strata(self) -> dict[Stratum, dict[str, Moments]]:
        """Per stratum, the moments of every pod of the cohort."""
        grouped: dict[Stratum, list[PodOutcome]] = {}
        for pod in self.pods:
            grouped.setdefault(pod.stratum, []).append(pod)
        out = {s: tally(ps) for s, ps in grouped.items()}
        for s, moments in self.counted.items():
            out[s] = _sum_tallies([out[s], moments]) if s in out else dict(moments)
        return out

    def size(self) -> int:
        return len(self.pods) + sum(m["success_rate"].n for m in self.counted.values())


def _parse_time(text: str, what: str) -> datetime:
    try:
        return parse_rfc3339(text)
    except ValueError:
        raise MigrationError(f"{what}: not an RFC 3339 time: {text!r}") from None


def pod_key(record: DecisionRecord) -> tuple[str, str, str]:
    return (record.cluster, record.namespace, record.pod_uid or record.pod)


Releases = Mapping[tuple[str, str, str], "str | Sequence[str]"]


def _release_for(
    releases: Releases | None, by_uid: tuple[str, str, str], by_name: tuple[str, str, str], bound: DecisionRecord
) -> str | None:
    """The first release at or after the allocation, looked up by pod uid, else by pod name
    (names are reused over time, hence "first after", and a release before it never counts)."""
    if not releases:
        return None
    start = _parse_time(bound.time, f"record {bound.decision_id}: time")
    for key in (by_uid, by_name):
        found = releases.get(key)
        times = [found] if isinstance(found, str) else list(found or [])
        after = sorted(t for t in times if _parse_time(t, f"release of {key[1]}/{key[2]}") >= start)
        if after:
            return after[0]
    return None


def build_cohorts(records: Iterable[DecisionRecord], releases: Releases | None = None,
                  asked: Asked | None = None) -> dict[CohortKey, Cohort]:
    """Group records per pod, then pods per cohort. ``releases`` maps a pod (cluster, namespace,
    uid or name) to the time(s) its devices were released (pod deleted or finished); ``asked``
    what each device-plugin pod asked for (``asked_from_lifecycle``)."""
    by_pod: dict[tuple[str, str, str], list[DecisionRecord]] = defaultdict(list)
    for rec in records:
        by_pod[pod_key(rec)].append(rec)
    cohorts: dict[CohortKey, Cohort] = {}
    for pkey in sorted(by_pod):
        attempts = sorted(by_pod[pkey], key=lambda r: (r.seq, r.time, r.attempt, r.decision_id))
        last = attempts[-1]
        key = CohortKey(last.track, last.template_version)
        bound = next((r for r in attempts if r.outcome == Outcome.ALLOCATED.value), None)
        pending = float(max(r.wait_ms for r in attempts))
        first = min(_parse_time(r.time, f"record {r.decision_id}: time") for r in attempts)
        stratum = (asked_model(last, asked), last.tenant, stratum_hour(first))
        utilisation = None
        released = _release_for(releases, pkey, (last.cluster, last.namespace, last.pod), bound) if bound else None
        if bound is not None and released is not None:
            held = (
                _parse_time(released, f"release of {pkey[1]}/{pkey[2]}")
                - _parse_time(bound.time, f"record {bound.decision_id}: time")
            ).total_seconds() * 1000.0
            total = held + bound.wait_ms
            utilisation = held / total if total > 0 else 1.0
        cohorts.setdefault(key, Cohort(key)).pods.append(
            PodOutcome(
                key=key,
                succeeded=bound is not None,
                fallback=bool(bound and bound.fallback),
                latency_ms=float(bound.wait_ms) if bound is not None else None,
                pending_ms=pending,
                utilisation=utilisation,
                stratum=stratum,
            )
        )
    return dict(sorted(cohorts.items()))


# -- intervals --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Interval:
    estimate: float
    low: float
    high: float
    n: int

    def to_dict(self) -> dict[str, Any]:
        # an unmeasured interval is NaN in memory and null in JSON
        def num(x: float) -> float | None:
            return None if math.isnan(x) else x

        return {"estimate": num(self.estimate), "low": num(self.low), "high": num(self.high), "n": self.n}


def z_for(confidence: float) -> float:
    """Two-sided normal quantile, by bisection on erf (no SciPy in the pure core)."""
    if not 0.5 < confidence < 1.0:
        raise MigrationError(f"confidence: must be in (0.5, 1), got {confidence}")
    target = confidence
    lo, hi = 0.0, 10.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if math.erf(mid / math.sqrt(2)) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def wilson(successes: int, n: int, z: float) -> Interval:
    """Wilson score interval: well-behaved near 0 and 1 and for small n, unlike the Wald interval."""
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at k = 0 and k = n the bound is exactly 0 or 1; do not let rounding move it
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(p, low, high, n)


def mean_interval(values: Samples, z: float) -> Interval:
    m = _moments(values)
    if not m.n:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = m.mean()
    half = z * math.sqrt(m.variance() / m.n)
    return Interval(mean, mean - half, mean + half, m.n)


def rate_difference(cand: Samples, base: Samples, z: float) -> Interval:
    """Newcombe's hybrid score interval for p_cand − p_base (method 10, Newcombe 1998)."""
    mc, mb = _moments(cand), _moments(base)
    a = wilson(int(mc.total), mc.n, z)
    b = wilson(int(mb.total), mb.n, z)
    d = a.estimate - b.estimate
    low = d - math.sqrt((a.estimate - a.low) ** 2 + (b.high - b.estimate) ** 2)
    high = d + math.sqrt((a.high - a.estimate) ** 2 + (b.estimate - b.low) ** 2)
    return Interval(d, low, high, min(mc.n, mb.n))


def _bootstrap_bounds(diffs: list[float], z: float, resamples: int) -> tuple[float, float]:
    """The percentile interval of sorted bootstrap differences."""
    alpha = 1 - math.erf(z / math.sqrt(2))
    lo_i = max(0, int(math.floor(alpha / 2 * resamples)))
    hi_i = min(resamples - 1, int(math.ceil((1 - alpha / 2) * resamples)) - 1)
    return diffs[lo_i], diffs[hi_i]


def _values(samples: Samples) -> Sequence[float]:
    if isinstance(samples, Moments):
        raise MigrationError("bootstrap intervals need every pod's sample, not only their moments")
    return samples


def mean_difference(
    cand: Samples, base: Samples, z: float, *, rng: random.Random | None = None, resamples: int = 1000
) -> Interval:
    """mean_cand − mean_base: Welch's normal approximation, or a percentile bootstrap when
    ``rng`` is given (deterministic for a seeded generator)."""
    mc, mb = _moments(cand), _moments(base)
    d = mc.mean() - mb.mean()
    if rng is None:
        half = z * math.sqrt(mc.variance() / mc.n + mb.variance() / mb.n)
        return Interval(d, d - half, d + half, min(mc.n, mb.n))
    c, b = _values(cand), _values(base)
    nc, nb = len(c), len(b)
    diffs = sorted(sum(rng.choices(c, k=nc)) / nc - sum(rng.choices(b, k=nb)) / nb for _ in range(resamples))
    low, high = _bootstrap_bounds(diffs, z, resamples)
    return Interval(d, low, high, min(nc, nb))


# -- stratified difference -------------------------------------------------------------------------
def _pooled_variance(groups: Iterable[Moments]) -> float:
    """Within-stratum variance pooled over the strata with two or more samples; when none has,
    the variance of all samples together (which includes the between-strata spread, so errs wide)."""
    df = 0
    ss = 0.0
    together = Moments()
    for g in groups:
        together = together + g
        if g.n >= 2:
            df += g.n - 1
            ss += g.variance() * (g.n - 1)
    return ss / df if df else together.variance()


def stratified_difference(
    cand: Mapping[Stratum, Samples],
    base: Mapping[Stratum, Samples],
    z: float,
    *,
    rate: bool,
    rng: random.Random | None = None,
    resamples: int = 1000,
) -> tuple[Interval, int]:
    """candidate − baseline within strata: per stratum ``s`` with samples of both cohorts,
    ``d_s`` (difference of means, or of proportions when ``rate``), combined as
    ``Σ w_s d_s / Σ w_s`` with ``w_s = n_c n_b / (n_c + n_b)`` — the Cochran–Mantel–Haenszel
    weights (Mantel and Haenszel 1959; for a difference of proportions see Greenland and Robins
    1985), which favour strata where both cohorts are well represented. The interval is normal:
    ``Var = Σ (w_s / Σ w)² Var(d_s)``, the strata being independent. For a rate ``Var(d_s)`` uses
    the adjusted proportions ``(x + 1) / (n + 2)`` of Agresti and Caffo (2000) so that a stratum at 0 % or
    100 % does not claim zero variance; for a mean each cohort's sample variance in the stratum,
    or its pooled within-stratum variance when the stratum has a single sample. With ``rng``
    (means only, and per-pod samples rather than moments) the interval is a percentile bootstrap
    resampling within every stratum and cohort. Returns the interval (``n``: the smaller cohort's
    matched samples) and the number of strata used; no common stratum gives NaN and 0."""
    mc = {s: _moments(v) for s, v in cand.items()}
    mb = {s: _moments(v) for s, v in base.items()}
    strata = sorted(s for s in mc if mc[s].n and s in mb and mb[s].n)
    if not strata:
        return Interval(math.nan, math.nan, math.nan, 0), 0
    weights = [mc[s].n * mb[s].n / (mc[s].n + mb[s].n) for s in strata]
    total = sum(weights)
    shares = [w / total for w in weights]
    diffs = [mc[s].mean() - mb[s].mean() for s in strata]
    estimate = sum(a * d for a, d in zip(shares, diffs, strict=True))
    n = min(sum(mc[s].n for s in strata), sum(mb[s].n for s in strata))
    if rng is not None and not rate:
        cv = {s: _values(cand[s]) for s in strata}
        bv = {s: _values(base[s]) for s in strata}
        boot = sorted(
            sum(a * (sum(rng.choices(cv[s], k=len(cv[s]))) / len(cv[s])
                     - sum(rng.choices(bv[s], k=len(bv[s]))) / len(bv[s]))
                for a, s in zip(shares, strata, strict=True))
            for _ in range(resamples)
        )
        low, high = _bootstrap_bounds(boot, z, resamples)
        return Interval(estimate, low, high, n), len(strata)
    if rate:
        def var(m: Moments) -> float:
            p = (m.total + 1) / (m.n + 2)
            return float(p * (1 - p) / (m.n + 2))

        variances = [var(mc[s]) + var(mb[s]) for s in strata]
    else:
        pooled_c = _pooled_variance(mc[s] for s in strata)
        pooled_b = _pooled_variance(mb[s] for s in strata)
        variances = [
            (mc[s].variance() if mc[s].n >= 2 else pooled_c) / mc[s].n
            + (mb[s].variance() if mb[s].n >= 2 else pooled_b) / mb[s].n
            for s in strata
        ]
    half = z * math.sqrt(sum(a * a * v for a, v in zip(shares, variances, strict=True)))
    return Interval(estimate, estimate - half, estimate + half, n), len(strata)


# -- thresholds and verdict -------------------------------------------------------------------------
@dataclass(frozen=True)
class MetricThreshold:
    max_regression: float  # in the metric's unit, oriented so positive is worse
    required: bool = False  # a required metric must be measured to promote


@dataclass(frozen=True)
class Thresholds:
    baseline: CohortKey
    candidate: CohortKey
    confidence: float = 0.95
    min_pods: int = 30
    metrics: Mapping[str, MetricThreshold] = field(default_factory=dict)
    bootstrap_resamples: int = 0  # 0: normal approximation for means

    @classmethod
    def from_dict(cls, doc: Any) -> Thresholds:
        if not isinstance(doc, dict):
            raise MigrationError("thresholds: expected a mapping")
        known = {"baseline", "candidate", "confidence", "min_pods", "metrics", "bootstrap_resamples"}
        for k in sorted(set(doc) - known):
            raise MigrationError(f"thresholds.{k}: unknown field")

        def cohort(name: str) -> CohortKey:
            sel = doc.get(name)
            if not isinstance(sel, dict) or not isinstance(sel.get("track"), str):
                raise MigrationError(f"thresholds.{name}.track: required (dra or device-plugin)")
            if sel["track"] not in {t.value for t in Track}:
                raise MigrationError(f"thresholds.{name}.track: unknown track {sel['track']!r}")
            return CohortKey(sel["track"], str(sel.get("template_version", "") or ""))

        metrics: dict[str, MetricThreshold] = {}
        raw_metrics = doc.get("metrics") or {}
        if not isinstance(raw_metrics, dict) or not raw_metrics:
            raise MigrationError("thresholds.metrics: declare at least one metric")
        for name in sorted(raw_metrics):
            if name not in METRICS:
                raise MigrationError(f"thresholds.metrics.{name}: unknown metric (known: {', '.join(METRICS)})")
            m = raw_metrics[name]
            if not isinstance(m, dict) or not isinstance(m.get("max_regression"), int | float):
                raise MigrationError(f"thresholds.metrics.{name}.max_regression: required number")
            metrics[name] = MetricThreshold(float(m["max_regression"]), bool(m.get("required", False)))
        confidence = doc.get("confidence", 0.95)
        min_pods = doc.get("min_pods", 30)
        resamples = doc.get("bootstrap_resamples", 0)
        if not isinstance(confidence, float):
            raise MigrationError("thresholds.confidence: expected a number like 0.95")
        if not isinstance(min_pods, int) or min_pods < 1:
            raise MigrationError("thresholds.min_pods: expected a positive integer")
        if not isinstance(resamples, int) or resamples < 0:
            raise MigrationError("thresholds.bootstrap_resamples: expected a non-negative integer")
        z_for(confidence)
        baseline, candidate = cohort("baseline"), cohort("candidate")
        if baseline.matches(candidate) or candidate.matches(baseline):
            # a pod in both cohorts is compared with itself: every regression reads zero
            raise MigrationError(f"thresholds.candidate: {candidate} shares pods with the baseline {baseline}; "
                                 "compare two cohorts no pod is in both of")
        return cls(baseline, candidate, confidence, min_pods, metrics, resamples)


@dataclass(frozen=True)
class MetricComparison:
    metric: str
    baseline: Interval
    candidate: Interval
    regression: Interval  # candidate vs baseline within strata, positive = worse; decides the state
    max_regression: float
    state: MetricState
    crude: Interval = Interval(math.nan, math.nan, math.nan, 0)  # the same, unstratified (for reading only)
    strata: int = 0  # strata with samples of this metric in both cohorts


@dataclass(frozen=True)
class Matching:
    """How the cohorts' pods fell into strata: matched pods share their stratum with the other
    cohort; unmatched pods are in a stratum of their own cohort only."""

    strata: int = 0  # strata holding pods of both cohorts
    matched_baseline: int = 0
    matched_candidate: int = 0
    unmatched_baseline: int = 0
    unmatched_candidate: int = 0
    by_cohort: Mapping[CohortKey, tuple[int, int]] = field(default_factory=dict)  # (matched, unmatched) per cohort

    def to_dict(self) -> dict[str, Any]:
        return {
            "stratified_by": list(STRATIFIED_BY),
            "strata": self.strata,
            "matched_pods": {"baseline": self.matched_baseline, "candidate": self.matched_candidate},
            "unmatched_pods": {"baseline": self.unmatched_baseline, "candidate": self.unmatched_candidate},
        }


@dataclass(frozen=True)
class Report:
    baseline: CohortKey
    candidate: CohortKey
    baseline_pods: int
    candidate_pods: int
    comparisons: list[MetricComparison]
    verdict: Verdict
    reasons: list[str]
    cohorts: dict[CohortKey, dict[str, Interval]]
    matching: Matching = Matching()

    def to_dict(self) -> dict[str, Any]:
        return {
            "baseline": str(self.baseline),
            "candidate": str(self.candidate),
            "baseline_pods": self.baseline_pods,
            "candidate_pods": self.candidate_pods,
            **self.matching.to_dict(),
            "verdict": self.verdict.value,
            "reasons": self.reasons,
            "comparisons": [
                {
                    "metric": c.metric,
                    "baseline": c.baseline.to_dict(),
                    "candidate": c.candidate.to_dict(),
                    "regression": c.regression.to_dict(),
                    "crude_regression": c.crude.to_dict(),
                    "strata": c.strata,
                    "max_regression": c.max_regression,
                    "state": c.state.value,
                }
                for c in self.comparisons
            ],
            "cohorts": {str(k): {m: i.to_dict() for m, i in v.items()} for k, v in self.cohorts.items()},
        }


def _describe(totals: Mapping[str, Moments], z: float) -> dict[str, Interval]:
    out: dict[str, Interval] = {}
    for metric in METRICS:
        m = totals[metric]
        out[metric] = wilson(int(m.total), m.n, z) if metric in RATE_METRICS else mean_interval(m, z)
    return out


def describe(cohort: Cohort, z: float) -> dict[str, Interval]:
    return _describe(_sum_tallies(cohort.strata().values()), z)


def _merge(strata: Mapping[CohortKey, Mapping[Stratum, Mapping[str, Moments]]],
           selector: CohortKey) -> dict[Stratum, dict[str, Moments]]:
    """The strata of every cohort the selector matches, added together."""
    merged: dict[Stratum, dict[str, Moments]] = {}
    for key, by_stratum in strata.items():
        if selector.matches(key):
            for s, moments in by_stratum.items():
                merged[s] = _sum_tallies([merged[s], moments]) if s in merged else dict(moments)
    return merged


def _pods(by_stratum: Mapping[Stratum, Mapping[str, Moments]], where: Callable[[Stratum], bool]) -> int:
    return sum(m["success_rate"].n for s, m in by_stratum.items() if where(s))


def _matching(strata: Mapping[CohortKey, Mapping[Stratum, Mapping[str, Moments]]],
              base: Mapping[Stratum, Mapping[str, Moments]], cand: Mapping[Stratum, Mapping[str, Moments]],
              thresholds: Thresholds) -> Matching:
    common = set(base) & set(cand)
    by_cohort: dict[CohortKey, tuple[int, int]] = {}
    for key, by_stratum in strata.items():
        if thresholds.baseline.matches(key) or thresholds.candidate.matches(key):
            by_cohort[key] = (_pods(by_stratum, lambda s: s in common), _pods(by_stratum, lambda s: s not in common))
    return Matching(len(common), _pods(base, lambda s: s in common), _pods(cand, lambda s: s in common),
                    _pods(base, lambda s: s not in common), _pods(cand, lambda s: s not in common), by_cohort)


def _crude(metric: str, c: Moments, b: Moments, z: float) -> Interval:
    if not c.n or not b.n:
        return Interval(math.nan, math.nan, math.nan, 0)
    return rate_difference(c, b, z) if metric in RATE_METRICS else mean_difference(c, b, z)


def _samples_by_stratum(cohorts: Mapping[CohortKey, Cohort], selector: CohortKey, metric: str) -> dict[Stratum, list[float]]:
    """Per stratum, the per-pod samples of the cohorts the selector matches (for a bootstrap)."""
    out: dict[Stratum, list[float]] = {}
    for key, cohort in cohorts.items():
        if selector.matches(key):
            if cohort.counted:
                raise MigrationError(f"cohort {key}: a bootstrap interval needs every pod's sample, "
                                     "not only their moments per stratum")
            for pod in cohort.pods:
                value = _pod_samples(pod)[metric]
                if value is not None:
                    out.setdefault(pod.stratum, []).append(value)
    return out


def _oriented(metric: str, diff: Interval) -> Interval:
    """A difference turned into a regression: positive is worse."""
    return Interval(-diff.estimate, -diff.high, -diff.low, diff.n) if metric in HIGHER_IS_BETTER else diff


def compare(
    cohorts: Mapping[CohortKey, Cohort], thresholds: Thresholds, rng: random.Random | None = None
) -> Report:
    z = z_for(thresholds.confidence)
    strata = {key: cohort.strata() for key, cohort in cohorts.items()}
    base_strata, cand_strata = _merge(strata, thresholds.baseline), _merge(strata, thresholds.candidate)
    base, cand = _sum_tallies(base_strata.values()), _sum_tallies(cand_strata.values())
    matching = _matching(strata, base_strata, cand_strata, thresholds)
    reasons: list[str] = []
    comparisons: list[MetricComparison] = []
    base_desc, cand_desc = _describe(base, z), _describe(cand, z)
    for metric in METRICS:
        if metric not in thresholds.metrics:
            continue
        limit = thresholds.metrics[metric]
        crude = _oriented(metric, _crude(metric, cand[metric], base[metric], z))
        boot = rng if thresholds.bootstrap_resamples and metric not in RATE_METRICS else None
        cand_samples: Mapping[Stratum, Samples] = {s: m[metric] for s, m in cand_strata.items()}
        base_samples: Mapping[Stratum, Samples] = {s: m[metric] for s, m in base_strata.items()}
        if boot is not None:
            cand_samples = _samples_by_stratum(cohorts, thresholds.candidate, metric)
            base_samples = _samples_by_stratum(cohorts, thresholds.baseline, metric)
        diff, used = stratified_difference(
            cand_samples, base_samples,
            z, rate=metric in RATE_METRICS, rng=boot, resamples=thresholds.bootstrap_resamples or 1000,
        )
        if not used:
            comparisons.append(
                MetricComparison(metric, base_desc[metric], cand_desc[metric], diff, limit.max_regression,
                                 MetricState.NOT_MEASURED, crude, 0)
            )
            if limit.required:
                reasons.append(f"{metric}: required but not measured in both cohorts within a common "
                               f"{' × '.join(STRATIFIED_BY)}")
            continue
        regression = _oriented(metric, diff)
        if regression.low > limit.max_regression:
            state = MetricState.WORSE
            reasons.append(
                f"{metric}: candidate is worse by {human_difference(metric, regression.estimate)} "
                f"(interval {human_difference(metric, regression.low)}..{human_difference(metric, regression.high)}) "
                f"within {used} strata, beyond the allowed {human_difference(metric, limit.max_regression)}"
            )
        elif regression.high <= limit.max_regression:
            state = MetricState.ACCEPTABLE
        else:
            state = MetricState.INCONCLUSIVE
            reasons.append(
                f"{metric}: interval {human_difference(metric, regression.low)}..{human_difference(metric, regression.high)} "
                f"within {used} strata straddles the allowed {human_difference(metric, limit.max_regression)}"
            )
        comparisons.append(MetricComparison(metric, base_desc[metric], cand_desc[metric], regression,
                                            limit.max_regression, state, crude, used))
    states = {c.state for c in comparisons}
    too_few = matching.matched_baseline < thresholds.min_pods or matching.matched_candidate < thresholds.min_pods
    if MetricState.WORSE in states:
        verdict = Verdict.ROLLBACK
    elif too_few:
        verdict = Verdict.HOLD
        reasons.append(
            f"need at least {thresholds.min_pods} matched pods per cohort "
            f"(baseline {matching.matched_baseline}, candidate {matching.matched_candidate})"
        )
    elif MetricState.INCONCLUSIVE in states or any(
        c.state is MetricState.NOT_MEASURED and thresholds.metrics[c.metric].required for c in comparisons
    ):
        verdict = Verdict.HOLD
    else:
        verdict = Verdict.PROMOTE
    if matching.unmatched_baseline or matching.unmatched_candidate:
        # never dropped silently: say how many pods had no counterpart
        reasons.append(
            f"unmatched (no pod of the other cohort with the same {' × '.join(STRATIFIED_BY)}, left out): "
            f"baseline {matching.unmatched_baseline}, candidate {matching.unmatched_candidate} pods"
        )
    return Report(
        baseline=thresholds.baseline,
        candidate=thresholds.candidate,
        baseline_pods=base["success_rate"].n,
        candidate_pods=cand["success_rate"].n,
        comparisons=comparisons,
        verdict=verdict,
        reasons=reasons,
        cohorts={k: _describe(_sum_tallies(v.values()), z) for k, v in strata.items()},
        matching=matching,
    )


def report(
    records: Iterable[DecisionRecord],
    thresholds: Thresholds,
    *,
    releases: Releases | None = None,
    asked: Asked | None = None,
    rng: random.Random | None = None,
) -> Report:
    return compare(build_cohorts(records, releases, asked), thresholds, rng)


def releases_from_events(events: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], list[str]]:
    """When pods released their devices, from world events (dicts of WorldEvent): a pod's delete,
    or an upsert showing it Succeeded or Failed. Keyed by pod uid when the payload has one and
    always by pod name; each key lists its release times in log order."""
    out: dict[tuple[str, str, str], list[str]] = {}
    for ev in sorted(events, key=lambda e: (str(e.get("cluster", "")), int(e.get("seq", 0)))):
        if ev.get("object_kind") != "Pod":
            continue
        payload = ev.get("payload") or {}
        finished = (payload.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if ev.get("type") != "delete" and not finished:
            continue
        cluster, ns = str(ev.get("cluster", "")), str(ev.get("namespace", ""))
        uid = (payload.get("metadata") or {}).get("uid")
        for key in ([(cluster, ns, str(uid))] if uid else []) + [(cluster, ns, str(ev.get("name", "")))]:
            times = out.setdefault(key, [])
            if str(ev.get("time", "")) not in times:
                times.append(str(ev.get("time", "")))
    return out


# -- plan -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlanStep:
    action: str
    detail: str
    command: str = ""
    check: str = ""


@dataclass(frozen=True)
class Rollout:
    """What the plan acts on: the new template version and the namespaces in each stage."""

    template: str = "gpu-h100-first"
    template_version: str = "v2"
    device_class: str = "gpu.nvidia.com"
    canary_namespaces: tuple[str, ...] = ()
    expand_namespaces: tuple[str, ...] = ()
    overlay_dir: str = "deploy/overlays"


REPORT_FROM_API = "claimtrail migration report --thresholds deploy/migration/thresholds.yaml --server $CLAIMTRAIL_API"


def plan(verdict: Verdict, rollout: Rollout, report_cmd: str = REPORT_FROM_API) -> list[PlanStep]:
    """The ordered steps for a verdict. No step changes a running pod: a workload moves between
    the device plugin and a claim only when its pods are re-created, so a pod never holds a
    claim and a device-plugin GPU at once. ``report_cmd`` is what the watch and verify steps
    run: the report that reads the decisions the way the verdict was reached."""
    canary = ", ".join(rollout.canary_namespaces) or "(canary namespaces)"
    expand = ", ".join(rollout.expand_namespaces) or "(next namespaces)"
    tmpl = f"{rollout.template}-{rollout.template_version}"
    ov = rollout.overlay_dir
    if verdict is Verdict.ROLLBACK:
        return [
            PlanStep("freeze", f"stop publishing ResourceClaimTemplate {tmpl}: no new namespace gets it", f"kubectl apply -k {ov}/migration-rollback"),
            PlanStep(
                "switch-back",
                f"roll the canary workloads in {canary} back to `nvidia.com/gpu` limits; each new pod uses the "
                "device plugin only, pods still holding claims keep them",
                "kubectl rollout restart deployment -n <namespace>  # after reverting the pod template",
            ),
            PlanStep(
                "drain",
                "leave bound DRA pods to their termination policy (terminationGracePeriodSeconds, Job completion); "
                "do not delete their claims",
                check=f"no allocated ResourceClaim from {tmpl} remains in {canary}",
            ),
            PlanStep("remove-template", f"delete ResourceClaimTemplate {tmpl} from {canary}", f"kubectl delete resourceclaimtemplate {tmpl} -n <namespace>"),
            PlanStep("verify", "the DRA cohort is empty and the device-plugin cohort meets its baseline", report_cmd),
        ]
    if verdict is Verdict.HOLD:
        return [
            PlanStep("keep", f"keep {tmpl} in {canary} only; expand nothing"),
            PlanStep("watch", "collect more decisions until every metric is conclusive", report_cmd),
        ]
    return [
        PlanStep("enable-class", f"make sure DeviceClass {rollout.device_class} exists (cluster-scoped, idempotent)", f"kubectl apply -k {posixpath.normpath(f'{ov}/../dra')}"),
        PlanStep("publish-template", f"publish ResourceClaimTemplate {tmpl} in {expand}", f"kubectl apply -k {ov}/migration-expand"),
        PlanStep(
            "switch-workloads",
            f"move workloads in {expand} from `nvidia.com/gpu` limits to the claim template by re-creating their pods; "
            "running pods keep their device-plugin GPU until replaced",
        ),
        PlanStep("watch", "compare the cohorts again before the next stage", report_cmd),
        PlanStep("expand", "repeat for the next namespace set; make the template the default last"),
    ]
