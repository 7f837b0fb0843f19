"""The rows of ``benchmarks.bench_adaptive_frontier``: per maxWait its regret and p99 guard ratio,
then the lowest regret among the maxWaits that keep the guard, judged against the regret target."""

from __future__ import annotations

import pytest

from benchmarks.bench_adaptive_frontier import NAME, Point, rows

# the default day's figures (seed 1) as the module measured them
DAY = [Point("30s", 57.0, 1.0684, "team-b"), Point("1m", 54.9, 1.4907, "inference"),
       Point("10m", 11.3, 8.08, "inference")]


@pytest.mark.parametrize(("points", "value", "note_head"), [
    pytest.param(DAY, 57.0, "at maxWait 30s", id="only-the-shortest-wait-keeps-the-guard-and-its-regret-is-high"),
    pytest.param([Point("1m", 54.9, 1.49, "inference")], None, "no maxWait keeps the guard",
                 id="no-maxwait-keeps-the-guard"),
    pytest.param([Point("30s", 20.0, 1.2, "a"), Point("1m", 9.0, 1.1, "b"), Point("2m", 9.0, 1.0, "c")], 9.0,
                 "at maxWait 1m", id="the-guard-is-inclusive-and-a-tie-takes-the-shorter-wait"),
    pytest.param([Point("30s", None, 1.0, "a"), Point("1m", 30.0, 1.3, "b")], None, "no maxWait keeps the guard",
                 id="a-day-without-fallbacks-has-no-regret-to-offer"),
])
def test_the_summary_row_takes_the_lowest_regret_within_the_guard(points, value, note_head):
    summary = rows(points)[-1]
    assert (summary["name"], summary["value"], summary["unit"], summary["target"]) == (
        f"{NAME}: lowest fallback regret within the 1.2x p99 guard", value, "%", "<= 10")
    assert summary["note"].startswith(note_head + "; regret and worst p99 ratio per maxWait: ")


def test_each_maxwait_row_gives_its_regret_and_names_the_worst_tenant():
    got = rows(DAY)[:-1]
    assert [(r["name"].removeprefix(f"{NAME}: "), r["value"], r["target"], r["note"]) for r in got] == [
        ("maxWait 30s: fallback regret", 57.0, "", "worst tenant p99 wait 1.07x immediate fallback's (team-b)"),
        ("maxWait 1m: fallback regret", 54.9, "", "worst tenant p99 wait 1.49x immediate fallback's (inference)"),
        ("maxWait 10m: fallback regret", 11.3, "", "worst tenant p99 wait 8.08x immediate fallback's (inference)")]
    assert rows(DAY)[-1]["note"] == ("at maxWait 30s; regret and worst p99 ratio per maxWait: 30s: 57.0 %, 1.07x; "
                                     "1m: 54.9 %, 1.49x; 10m: 11.3 %, 8.08x")
