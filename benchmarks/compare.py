"""Compare two ``make bench`` results benchmark by benchmark, on normalised figures.

``python -m benchmarks.compare OLD.json NEW.json`` prints, for every benchmark both runs have,
the two normalised values (the measured value where a row needs no normalising: ratios, sizes)
and the change in percent, signed so that a positive change is always an improvement (a shorter
time, a higher rate). Rows that moved the wrong way by more than ``--threshold`` percent are
marked as regressions, and the exit code is 1 when there is any, so the comparison can gate a
change. A time or rate whose own runs within one of the two results (the ``spread`` ``make bench``
gives a row of several runs: slowest over fastest) lie further apart than the band is marked with
that spread and listed after the rows: a move there may be measurement, not code. It still
counts. ``--either-way`` marks moves beyond the threshold in both directions: two runs of one
commit should agree, and a figure that got better by itself says as much about the normalising
as one that got worse. Because both sides are normalised by the speed the machine had at the time, a regression
shows as one whatever the machine did that hour. Each row is normalised again from the calibrations
the run measured, kept in the results, against the reference the results were made with, by the
rules of the code doing the comparing (``renormalised``): results written before a scale's rule
changed then compare with ones written after it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from benchmarks.calibrate import kind
from benchmarks.run import annotate, run_factors


def comparable(row: dict[str, Any]) -> float | None:
    value = row.get("normalised")
    if value is None:
        value = row.get("value")
    return float(value) if isinstance(value, int | float) else None


def renormalised(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The results' rows normalised again by today's rules (``benchmarks.run.annotate``) from the
    run's factors (``benchmarks.run.run_factors``) over the calibrations the results kept, against
    the reference stored with them and on the results' machine's cores. Results without those
    calibrations or a reference, and a row today's rule for it needs a calibration the run lacks,
    keep the figure they were written with."""
    reference = results.get("reference") or {}
    calibrations = {key.removesuffix("_seconds"): figures for key, figures in (results.get("calibration") or {}).items()
                    if isinstance(figures, list)}
    if not reference or not calibrations:
        return list(results["rows"])
    factors = run_factors(calibrations, reference)
    cpus = int((results.get("machine") or {}).get("cpus") or 1)
    rows = []
    for row in results["rows"]:
        again = annotate(row, factors, cpus)
        # results from before a calibration existed lack what today's rule for the row takes
        rows.append(again if again["normalised"] is not None or row.get("normalised") is None else row)
    return rows


def improvement_percent(old: float, new: float, unit: str) -> float | None:
    """Positive when ``new`` is better; ``None`` when the unit has no better direction or old is 0."""
    if old == 0:
        return None
    k = kind(unit)
    if k == "time":
        return (old - new) / old * 100
    if k == "rate":
        return (new - old) / old * 100
    return None


def wider_spread(old: dict[str, Any], new: dict[str, Any], threshold: float) -> float | None:
    """The wider of the two rows' own spreads when it exceeds the band of ``threshold`` percent
    (runs 20 % apart are a spread of 1.2); None when neither does or neither has one."""
    spreads = [float(r["spread"]) for r in (old, new) if isinstance(r.get("spread"), int | float)]
    widest = max(spreads, default=None)
    return widest if widest is not None and widest > 1 + threshold / 100 else None


def compare(old: dict[str, Any], new: dict[str, Any], threshold: float,
            either_way: bool = False) -> tuple[list[str], int]:
    before = {r["name"]: r for r in renormalised(old)}
    lines = [f"{'benchmark':<70} {'old':>12} {'new':>12} {'change':>8}"]
    regressions = 0
    wide: list[str] = []  # rows whose own runs spread wider than the band
    wide_moves = 0
    for row in renormalised(new):
        prior = before.get(row["name"])
        if prior is None:
            continue
        a, b = comparable(prior), comparable(row)
        if a is None or b is None:
            continue
        change = improvement_percent(a, b, row["unit"])
        mark = ""
        if change is not None and change < -threshold:
            regressions += 1
            mark = "  REGRESSION"
        elif either_way and change is not None and change > threshold:
            regressions += 1
            mark = "  IMPROVED"
        spread = wider_spread(prior, row, threshold) if change is not None else None
        if spread is not None:
            wide.append(f"  {row['name'][:70]:<70} old {_spread(prior)} new {_spread(row)}")
            wide_moves += bool(mark)
            mark += f"  (own runs spread {spread:.2f})"
        shown = f"{change:+.1f}%" if change is not None else ""
        lines.append(f"{row['name'][:70]:<70} {a:>12,.3f} {b:>12,.3f} {shown:>8}{mark}")
    if wide:
        lines.append(f"{len(wide)} row(s) whose own runs spread wider than {threshold:g} % in either result "
                     "(slowest run over fastest); a move there may be measurement, not code:")
        lines += wide
    factors = f"factors old {old.get('factor')} new {new.get('factor')}"
    what = "move(s)" if either_way else "regression(s)"
    among = f" ({wide_moves} of them in rows whose own runs spread wider)" if wide_moves else ""
    lines.append(f"{regressions} {what} beyond {threshold:g} %{among}; {factors}")
    return lines, regressions


def _spread(row: dict[str, Any]) -> str:
    spread = row.get("spread")
    return f"{spread:.2f}" if isinstance(spread, int | float) else "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__.split("\n")[0])
    parser.add_argument("old")
    parser.add_argument("new")
    parser.add_argument("--threshold", type=float, default=20.0, help="percent (default 20)")
    parser.add_argument("--either-way", action="store_true",
                        help="also count improvements beyond the threshold (two runs of one commit)")
    args = parser.parse_args(argv)
    with open(args.old) as fh:
        old = json.load(fh)
    with open(args.new) as fh:
        new = json.load(fh)
    lines, regressions = compare(old, new, args.threshold, args.either_way)
    print("\n".join(lines))
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
