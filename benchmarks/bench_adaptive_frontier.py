"""What adaptive fallback's ``maxWait`` trades: fallback regret against the waits it adds.

Adaptive fallback has two targets in #16 that pull against each other: a fallback regret of at
most 10 %, and every tenant's p99 wait within 1.2 times its p99 wait under immediate fallback in
the same run. Waiting longer for the first choice lowers regret and lengthens waits. This module
runs the default scenario (seed 1, 24 h, DRF, best-effort queueing) with immediate fallback all
day and with adaptive fallback at each ``maxWait`` of ``MAX_WAITS``, and reports per ``maxWait``
the regret and the worst tenant's p99 ratio, then the lowest regret among the ``maxWait`` values
that keep the guard: whether, on this day, some ``maxWait`` meets both targets. The figures are
computed by ``audit.metrics`` (``fairness_report``, ``fallback_report``) as in ``bench_fairness``;
the days are simulated without pacing, because this module measures no rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.bench_fairness import HOURS, IMMEDIATE, p99_ratios, tenant_p99, worst_ratio
from benchmarks.bench_fairness_seeds import day_reports

SEED = 1
MAX_WAITS = ("30s", "1m", "2m", "5m", "10m")
REGRET_TARGET_PCT = 10.0
GUARD = 1.2  # every tenant's p99 wait at most this many times its immediate-fallback p99
NAME = f"adaptive fallback frontier, cluster-day {HOURS:g} h seed {SEED}, DRF, best-effort queueing"


@dataclass(frozen=True)
class Point:
    """One adaptive day: its ``maxWait``, regret (% of fallbacks; None without a fallback) and
    worst tenant's p99 wait over its immediate-fallback p99, with that tenant."""

    max_wait: str
    regret_pct: float | None
    ratio: float
    worst: str

    @property
    def guarded(self) -> bool:
        return self.ratio <= GUARD


def point(max_wait: str, immediate_p99: dict[str, float]) -> Point:
    fairness, fallback = day_reports(SEED, {"mode": "adaptive", "maxWait": max_wait})
    worst, ratio = worst_ratio(p99_ratios(tenant_p99(fairness), immediate_p99))
    regret = fallback["regret_rate"]
    return Point(max_wait, None if regret is None else 100 * regret, ratio, worst)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} %"


def rows(points: list[Point]) -> list[dict[str, Any]]:
    """Per ``maxWait`` its regret and guard ratio, then the lowest regret within the guard (None
    when no ``maxWait`` keeps it), with the target regret's."""
    out: list[dict[str, Any]] = []
    for p in points:
        out.append({"issue": "#16", "name": f"{NAME}: maxWait {p.max_wait}: fallback regret",
                    "value": None if p.regret_pct is None else round(p.regret_pct, 1), "unit": "%", "target": "",
                    "note": f"worst tenant p99 wait {p.ratio:.2f}x immediate fallback's ({p.worst})"})
    within = [(p.regret_pct, i, p) for i, p in enumerate(points) if p.guarded and p.regret_pct is not None]
    best = min(within)[2] if within else None  # on a tie, the shorter maxWait (the earlier one)
    each = "; ".join(f"{p.max_wait}: {_pct(p.regret_pct)}, {p.ratio:.2f}x" for p in points)
    out.append({"issue": "#16", "name": f"{NAME}: lowest fallback regret within the {GUARD:g}x p99 guard",
                "value": None if best is None or best.regret_pct is None else round(best.regret_pct, 1),
                "unit": "%", "target": f"<= {REGRET_TARGET_PCT:g}",
                "note": ("no maxWait keeps the guard" if best is None else f"at maxWait {best.max_wait}")
                        + f"; regret and worst p99 ratio per maxWait: {each}"})
    return out


def run() -> list[dict[str, Any]]:
    immediate, _ = day_reports(SEED, IMMEDIATE)
    return rows([point(m, tenant_p99(immediate)) for m in MAX_WAITS])


if __name__ == "__main__":
    for row in run():
        print(row)
