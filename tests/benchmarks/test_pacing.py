"""Figures paced by calibrations measured around each round: the helpers and how samples combine."""

from __future__ import annotations

import os

import pytest

from benchmarks import calibrate
from benchmarks.interleaved import best_of, faster_each, nearest_rank_of, of_samples, paced_with
from benchmarks.pacers import MemoryPacer, MixedPacer, ParallelPacer, ScanPacer


@pytest.mark.parametrize(("unit", "samples", "expected"), [
    # times: the 10 s round, though 16 s at speed 0.5 would be 8 s normalised: a low speed reading
    # must not pick a round that measured worse
    ("s", [(10.0, 1.0), (16.0, 0.5), (30.0, 0.4)], (10.0, 10.0)),
    # rates: 100/s at speed 0.8 is 125/s; 60/s at 0.4 (150/s normalised) is not chosen
    ("rec/s", [(60.0, 0.4), (100.0, 0.8)], (100.0, 125.0)),
])
def test_the_best_of_rounds_is_the_best_as_measured_normalised_by_its_own_speed(
        unit: str, samples: list[tuple[float, float]], expected: tuple[float, float]) -> None:
    figure = best_of(samples, unit)
    assert (figure.measured, figure.normalised) == expected


def test_a_percentile_of_samples_normalises_each_sample_before_taking_it() -> None:
    samples = [(10.0, 1.0), (20.0, 0.25), (12.0, 1.0), (11.0, 1.0)]  # the slow 20 ms came at a quarter speed: 5
    figure = of_samples(samples, "ms", max)
    assert (figure.measured, figure.normalised) == (20.0, 12.0)


def test_a_nearest_rank_percentile_of_samples_is_taken_over_them_in_ascending_order() -> None:
    # 20 samples taken in this order, each at full speed: the p95 by nearest rank is the 19th
    # smallest (ceil(0.95 * 20) = 19), 190 ms, whatever order the replays ran in
    times = [50.0, 190.0, 10.0, 200.0, 30.0, 20.0, 40.0, 60.0, 70.0, 80.0,
             90.0, 100.0, 110.0, 120.0, 130.0, 140.0, 150.0, 160.0, 170.0, 180.0]
    assert len(times) == 20 and sorted(times)[18] == 190.0
    figure = of_samples([(t, 1.0) for t in times], "ms", nearest_rank_of(0.95))
    assert (figure.measured, figure.normalised) == (190.0, 190.0)


@pytest.mark.parametrize(("q", "n", "rank"), [
    (0.95, 20, 19),  # 0.95 × 20 is 19.000000000000004 in floating point, not a reason for the 20th
    (0.95, 40, 38),  # the replay and metrics rows' 40 runs: the third slowest
    (0.95, 1500, 1425),  # the why summary's requests
    (0.99, 5000, 4950),
    (0.9, 8000, 7200),  # the allocator's cold nodes
    (0.99, 7, 7),
])
def test_a_bench_tail_is_the_nearest_rank_every_metric_takes(q: float, n: int, rank: int) -> None:
    # the k-th smallest sample is k ms, given largest first and at half speed (normalised: k / 2)
    figure = of_samples([(float(k), 0.5) for k in range(n, 0, -1)], "ms", nearest_rank_of(q))
    assert (figure.measured, figure.normalised) == (rank, rank / 2)


def test_passes_of_several_calibrations_take_the_faster_of_each_around_a_round() -> None:
    passes = iter([(1.0, 0.2), (0.5, 0.4), (0.8, 0.1)])
    rounds = paced_with([lambda: "a", lambda: "b"], lambda: next(passes), faster_each)
    assert rounds == [("a", (1.0, 0.4)), ("b", (0.8, 0.4))]


def test_the_memory_pacer_blends_its_two_workloads_as_a_memory_row_is_normalised() -> None:
    reference = {"cputime_seconds": 0.03, "memory_seconds": 0.9}
    with MemoryPacer(reference) as pacer:
        speeds = [(pacer.speed(), pacer.last) for _ in range(2)]
    for speed, (cputime, memory) in speeds:
        assert 0 < cputime < memory  # the cpu workload's best round is far shorter than a memory round
        assert speed == calibrate.memory_factor(0.03 / cputime, 0.9 / memory)


def test_the_parallel_scan_and_mixed_pacers_measure_a_speed_each_pass() -> None:
    # a reference of a thousand seconds: any machine is far faster than that
    reference = {"cpu_seconds": 1000.0, "parallel_seconds": 1000.0, "scan_seconds": 1000.0}
    with ParallelPacer(reference, workers=2) as parallel, ScanPacer(reference) as scan, MixedPacer(reference) as mixed:
        figures = [parallel.speed(), scan.speed(), *mixed.speed()]
    assert all(f > 100 for f in figures), figures
    # a row of one core takes the cpu factor alone, one of every core the all-cores one
    assert MixedPacer.factor((2.0, 0.5), 1.0) == 2.0
    cpus = os.cpu_count() or 1
    assert MixedPacer.factor((2.0, 0.5), float(cpus)) == (0.5 if cpus > 1 else 2.0)


def test_the_parallel_pacer_takes_the_mean_helper_or_the_slowest_one() -> None:
    with ParallelPacer({"parallel_seconds": 1000.0}, workers=2) as pacer:
        mean = pacer.speed()
        assert len(pacer.last) == 2 and mean == 1000.0 / (sum(pacer.last) / 2)
        slowest = pacer.slowest_speed()
        assert len(pacer.last) == 2 and slowest == 1000.0 / max(pacer.last)
