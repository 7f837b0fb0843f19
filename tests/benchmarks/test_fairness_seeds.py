"""The across-seeds rows of ``benchmarks.bench_fairness_seeds``: each target judged on its worst seed."""

from __future__ import annotations

import pytest

from benchmarks.bench_fairness import HOURS, p99_ratios, worst_best, worst_ratio
from benchmarks.bench_fairness_seeds import WITH_FAIR_SHARE_RECLAIM, SeedFigures, rows

SEED_1 = SeedFigures(1, jain=0.94968, worst_best=9.7, regret_pct=11.94, adaptive_ratio=1.144, adaptive_worst="team-a",
                     adaptive_jain=0.96, baseline_jain=0.9118, baseline_ratio=1.7754, baseline_worst="team-b")
SEED_2 = SeedFigures(2, jain=0.953, worst_best=20.9, regret_pct=9.43, adaptive_ratio=2.266, adaptive_worst="research",
                     adaptive_jain=0.95831, baseline_jain=0.9015, baseline_ratio=1.7375, baseline_worst="team-b")
NO_CONTENTION = SeedFigures(3, jain=None, worst_best=2.0, regret_pct=None, adaptive_ratio=1.0, adaptive_worst="team-b",
                            baseline_jain=0.9091, baseline_ratio=0.5, baseline_worst="research")


@pytest.mark.parametrize(
    ("figures", "seeds", "want"),
    [
        pytest.param(
            [SEED_1, SEED_2], "seeds 1-2",
            [("Jain", 0.9497, "seed 1 0.9497, seed 2 0.9530"),
             ("Jain", 0.9583, "seed 1 0.9600, seed 2 0.9583"),
             ("worst/best", 20.9, "seed 1 9.7, seed 2 20.9"),
             ("regret", 11.9, "seed 1 11.9, seed 2 9.4"),
             ("adaptive / immediate", 2.27, "seed 1 1.14 (team-a), seed 2 2.27 (research)"),
             ("less FIFO with backfill", 0.0379, "seed 1 0.0379 (0.9497 vs 0.9118), seed 2 0.0515 (0.9530 vs 0.9015)"),
             ("/ FIFO with backfill", 1.78, "seed 1 1.78 (team-b), seed 2 1.74 (team-b)")],
            id="each-target-takes-its-worst-seed-lowest-jain-to-four-decimals-highest-of-the-rest"),
        pytest.param(
            [SEED_1, NO_CONTENTION], "seeds 1, 3",
            [("Jain", 0.9497, "seed 1 0.9497, seed 3 -"),
             ("Jain", 0.96, "seed 1 0.9600, seed 3 -"),
             ("worst/best", 9.7, "seed 1 9.7, seed 3 2.0"),
             ("regret", 11.9, "seed 1 11.9, seed 3 -"),
             ("adaptive / immediate", 1.14, "seed 1 1.14 (team-a), seed 3 1.00 (team-b)"),
             ("less FIFO with backfill", 0.0379, "seed 1 0.0379 (0.9497 vs 0.9118), seed 3 -"),
             ("/ FIFO with backfill", 1.78, "seed 1 1.78 (team-b), seed 3 0.50 (research)")],
            id="a-seed-without-a-value-is-named-and-left-out"),
        pytest.param(
            [NO_CONTENTION], "seed 3",
            [("Jain", None, "seed 3 -"), ("Jain", None, "seed 3 -"), ("worst/best", 2.0, "seed 3 2.0"), ("regret", None, "seed 3 -"),
             ("adaptive / immediate", 1.0, "seed 3 1.00 (team-b)"), ("less FIFO with backfill", None, "seed 3 -"),
             ("/ FIFO with backfill", 0.5, "seed 3 0.50 (research)")],
            id="no-seed-with-a-value-gives-none"),
    ],
)
def test_each_target_is_judged_on_its_worst_seed_with_every_seed_in_the_note(figures, seeds, want):
    got = rows(figures)
    assert [(w[0] in r["name"], r["value"], r["note"]) for r, w in zip(got, want, strict=True)] == [
        (True, value, note) for _, value, note in want]
    assert [r["target"] for r in got] == [">= 0.95", ">= 0.95", "<= 3", "<= 10", "<= 1.2", "> 0", ""]
    assert all(f"fairness across {seeds}, " in r["name"] for r in got)


def test_the_fair_share_reclaim_rows_name_their_policies():
    got = rows([SEED_1], WITH_FAIR_SHARE_RECLAIM)
    head = f"fairness across seed 1, cluster-day {HOURS:g} h, DRF, reclaim of fair shares (minRuntime 10m): "
    assert [r["name"] for r in got] == [
        head + "Jain under contention, default policies, lowest",
        head + "Jain under contention, adaptive fallback (maxWait 10m), lowest",
        head + "worst/best tenant p99 wait, default policies, highest",
        head + "fallback regret, adaptive fallback (maxWait 10m), highest",
        head + "worst tenant p99 wait, adaptive / immediate fallback, highest"]
    assert [r["value"] for r in got] == [0.9497, 0.96, 9.7, 11.9, 1.14]


def test_the_default_rows_name_the_default_policies_and_hold_adaptive_against_immediate_fallback():
    head = f"fairness across seed 1, cluster-day {HOURS:g} h, DRF: "
    assert [r["name"] for r in rows([SEED_1])] == [
        head + "Jain under contention, default policies, lowest",
        head + "Jain under contention, adaptive fallback (maxWait 10m), lowest",
        head + "worst/best tenant p99 wait, default policies, highest",
        head + "fallback regret, adaptive fallback (maxWait 10m), highest",
        head + "worst tenant p99 wait, adaptive / immediate fallback, highest",
        head + "Jain under contention, default policies less FIFO with backfill (fairness off), lowest",
        head + "worst tenant p99 wait, default policies / FIFO with backfill (fairness off), highest"]


@pytest.mark.parametrize(
    ("mine", "base", "want"),
    [
        pytest.param({"a": 120.0, "b": 30.0}, {"a": 100.0, "b": 60.0}, {"a": 1.2, "b": 0.5}, id="each-over-its-own"),
        # a tenant served at once has p99 0 s: both sides floor at one second
        pytest.param({"a": 0.0, "b": 5.0}, {"a": 0.0, "b": 0.0}, {"a": 1.0, "b": 5.0}, id="zero-waits-floor-at-1s"),
        pytest.param({"a": 30.0}, {}, {"a": 30.0}, id="a-tenant-the-base-never-started-counts-as-served-at-once"),
    ],
)
def test_p99_ratios_are_each_tenants_wait_over_its_base_floored_at_a_second(mine, base, want):
    assert p99_ratios(mine, base) == pytest.approx(want)


@pytest.mark.parametrize(
    ("p99", "want"),
    [
        pytest.param({"a": 900.0, "b": 300.0, "c": 600.0}, 3.0, id="highest-over-lowest"),
        pytest.param({"a": 45.0, "b": 0.0}, 45.0, id="a-tenant-served-at-once-counts-as-one-second"),
        pytest.param({"a": 120.0}, 1.0, id="one-tenant-is-even-with-itself"),
        pytest.param({"a": 0.0, "b": 0.0}, 1.0, id="every-tenant-served-at-once-is-even"),
    ],
)
def test_worst_best_is_the_highest_p99_over_the_lowest_floored_at_a_second(p99, want):
    assert worst_best(p99) == pytest.approx(want)


@pytest.mark.parametrize(
    ("ratios", "want"),
    [
        pytest.param({"a": 1.1, "b": 2.3, "c": 0.4}, ("b", 2.3), id="the-highest"),
        pytest.param({"a": 2.0, "b": 2.0}, ("b", 2.0), id="a-tie-goes-to-the-last-name"),
    ],
)
def test_worst_ratio_names_the_tenant_with_the_highest(ratios, want):
    assert worst_ratio(ratios) == want
