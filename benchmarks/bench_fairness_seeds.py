"""Whether the fairness figures of ``bench_fairness`` hold beyond the one seed it measures.

``bench_fairness`` runs the default scenario on seed 1. A figure that meets its target there may
owe it to that seed's draw of arrivals, sizes and runtimes, so this module runs the same scenario
and policies for each seed of ``SEEDS``: the default policies (immediate fallback, then a 5-minute
wait for the preferred model from the noon change; best-effort queueing), adaptive fallback
(``bench_fairness.ADAPTIVE``) and immediate fallback all day (``bench_fairness.IMMEDIATE``, which
the adaptive run's p99 waits are held against), then all three again with reclaim of
fair shares (``FAIR_SHARE_RECLAIM``: a tenant below its DRF entitlement preempts pods of tenants
above theirs, ``audit.scheduler.reclaim``). For each target of #16 that does not measure speed it
reports the worst value over the seeds, with every seed's value in the note. The default policy is
also judged against the baseline on every seed, FIFO with backfill (``bench_fairness.FIFO_BACKFILL``):
by how much its Jain under contention exceeds the baseline's, and how much longer its worst-off
tenant waits at p99 than under the baseline.
The figures are computed by ``audit.metrics`` with the same definitions as ``bench_fairness``.
The days are simulated without pacing, because this module measures no rate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from audit.metrics import Window, fairness_report, fallback_report, fold_lifecycle
from benchmarks.bench_fairness import (
    ADAPTIVE,
    BASELINE,
    FIFO_BACKFILL,
    HOURS,
    IMMEDIATE,
    day_scenario,
    p99_ratios,
    tenant_p99,
    worst_best,
    worst_ratio,
)
from ingest.simulate.loop import simulate

SEEDS = (1, 2, 3, 4)
FAIR_SHARE_RECLAIM = {"enabled": True, "minRuntime": "10m", "basis": "fairShare"}


@dataclass(frozen=True)
class SeedFigures:
    seed: int
    jain: float | None  # Jain under contention, default policies
    worst_best: float  # worst/best tenant p99 wait, default policies
    regret_pct: float | None  # fallback regret, adaptive fallback
    adaptive_ratio: float  # worst tenant's p99 wait, adaptive / immediate fallback all day
    adaptive_worst: str  # that tenant
    adaptive_jain: float | None = None  # Jain under contention, adaptive fallback
    # the default policy against FIFO with backfill: the baseline's Jain under contention, and the
    # worst tenant's p99 wait over its p99 wait under the baseline (and who that tenant is)
    baseline_jain: float | None = None
    baseline_ratio: float | None = None
    baseline_worst: str = ""

    @property
    def jain_gain(self) -> float | None:
        """Jain under contention less the baseline's, when both days had a contended hour."""
        return None if self.jain is None or self.baseline_jain is None else self.jain - self.baseline_jain


@dataclass(frozen=True)
class Target:
    name: str
    unit: str
    target: str
    value: Callable[[SeedFigures], float | None]
    worse: Callable[[list[float]], float]  # of the seeds' values, the one the target is judged on
    digits: int
    who: Callable[[SeedFigures], str] = lambda f: ""  # whom a seed's value is of, when one tenant's


# ``{base}`` names the policies without adaptive fallback: the default ones, or a variant of them
TARGETS = (
    Target("Jain under contention, {base}, lowest", "index", ">= 0.95", lambda f: f.jain, min, 4),
    Target("Jain under contention, adaptive fallback (maxWait 10m), lowest", "index", ">= 0.95",
           lambda f: f.adaptive_jain, min, 4),
    Target("worst/best tenant p99 wait, {base}, highest", "x", "<= 3", lambda f: f.worst_best, max, 1),
    Target("fallback regret, adaptive fallback (maxWait 10m), highest", "%", "<= 10", lambda f: f.regret_pct, max, 1),
    Target("worst tenant p99 wait, adaptive / immediate fallback, highest", "x", "<= 1.2",
           lambda f: f.adaptive_ratio, max, 2, lambda f: f" ({f.adaptive_worst})"),
)
# Measured for the default policy only: a fair engine should beat the baseline's Jain on every
# seed; the tenant it makes wait longer than the baseline does is named, and carries no target.
AGAINST_BASELINE = (
    Target(f"Jain under contention, {{base}} less {BASELINE}, lowest", "index", "> 0", lambda f: f.jain_gain, min, 4,
           lambda f: "" if f.jain_gain is None else f" ({f.jain:.4f} vs {f.baseline_jain:.4f})"),
    Target(f"worst tenant p99 wait, {{base}} / {BASELINE}, highest", "x", "", lambda f: f.baseline_ratio, max, 2,
           lambda f: f" ({f.baseline_worst})" if f.baseline_worst else ""),
)


@dataclass(frozen=True)
class Variant:
    """The policies a set of rows measures: ``label`` goes in the row names after the scenario,
    ``base`` names the policy without adaptive fallback in the targets."""

    label: str = "DRF"
    base: str = "default policies"
    preemption: dict[str, Any] | None = None
    against_baseline: bool = False  # also run FIFO with backfill and add ``AGAINST_BASELINE``


DEFAULT = Variant(against_baseline=True)
WITH_FAIR_SHARE_RECLAIM = Variant("DRF, reclaim of fair shares (minRuntime 10m)", preemption=FAIR_SHARE_RECLAIM)


def day_reports(seed: int, fallback: dict[str, Any] | None, preemption: dict[str, Any] | None = None,
                fairness: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``fairness_report`` and ``fallback_report`` of the default scenario's day on ``seed``, with
    the variant's fallback, preemption and fairness settings (``bench_fairness.day_scenario``)."""
    result = simulate(day_scenario("", fallback, fairness, preemption), seed=seed, hours=HOURS)
    window = Window(result.start_ms, result.end_ms)
    life = fold_lifecycle(result.events, result.world.cluster)
    return fairness_report(life, window), fallback_report(life, window)


def seed_figures(seed: int, variant: Variant = DEFAULT) -> SeedFigures:
    fair, _ = day_reports(seed, None, variant.preemption)
    adaptive_fair, adaptive_fb = day_reports(seed, ADAPTIVE, variant.preemption)
    immediate, _ = day_reports(seed, IMMEDIATE, variant.preemption)
    p99 = tenant_p99(fair)
    worst, ratio = worst_ratio(p99_ratios(tenant_p99(adaptive_fair), tenant_p99(immediate)))
    regret = adaptive_fb["regret_rate"]
    figures = SeedFigures(seed, fair["jain_contention"], worst_best(p99),
                          None if regret is None else 100 * regret, ratio, worst, adaptive_fair["jain_contention"])
    if not variant.against_baseline:
        return figures
    baseline, _ = day_reports(seed, None, variant.preemption, FIFO_BACKFILL)
    base_worst, base_ratio = worst_ratio(p99_ratios(p99, tenant_p99(baseline)))
    return replace(figures, baseline_jain=baseline["jain_contention"], baseline_ratio=base_ratio,
                   baseline_worst=base_worst)


def rows(figures: list[SeedFigures], variant: Variant = DEFAULT) -> list[dict[str, Any]]:
    """One row per target: the worst value over the seeds (a seed with no value, such as a day with
    no contended hour, is named in the note and left out), each seed's value in the note."""
    seeds = _seeds_named([f.seed for f in figures])
    out = []
    for t in TARGETS + (AGAINST_BASELINE if variant.against_baseline else ()):
        values = [(f, t.value(f)) for f in figures]
        known = [v for _, v in values if v is not None]
        per_seed = ", ".join(
            f"seed {f.seed} {'-' if v is None else f'{v:,.{t.digits}f}'}"
            + t.who(f) for f, v in values)
        name = t.name.format(base=variant.base)
        out.append({"issue": "#16", "name": f"fairness across {seeds}, cluster-day {HOURS:g} h, {variant.label}: {name}",
                    "value": round(t.worse(known), t.digits) if known else None, "unit": t.unit,
                    "target": t.target, "note": per_seed})
    return out


def _seeds_named(seeds: list[int]) -> str:
    """``seed 3``, ``seeds 1-4`` when consecutive, else ``seeds 1, 3``."""
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    if seeds == list(range(seeds[0], seeds[-1] + 1)):
        return f"seeds {seeds[0]}-{seeds[-1]}"
    return "seeds " + ", ".join(str(s) for s in seeds)


def run() -> list[dict[str, Any]]:
    return [row for v in (DEFAULT, WITH_FAIR_SHARE_RECLAIM) for row in rows([seed_figures(s, v) for s in SEEDS], v)]


if __name__ == "__main__":
    for row in run():
        print(row)
