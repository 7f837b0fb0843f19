"""Normalising benchmark figures by the machine's speed, and comparing two runs on them."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from benchmarks import calibrate, compare, markdown
from benchmarks.interleaved import interleaved, of_samples, paced
from benchmarks.run import annotate, median_rows

REFERENCE = {"cpu_seconds": 0.10, "scan_seconds": 1.0}


@pytest.mark.parametrize(("unit", "kind", "scale"), [
    ("µs", "time", "cpu"), ("us", "time", "cpu"), ("ms", "time", "cpu"), ("s", "time", "cpu"),
    ("rec/s", "rate", "cpu"), ("decisions/s", "rate", "cpu"),
    ("ratio", "other", "none"), ("%", "other", "none"), ("B", "other", "none"), ("allocateOne calls", "other", "none"),
])
def test_units_decide_direction_and_default_scale(unit: str, kind: str, scale: str) -> None:
    assert calibrate.kind(unit) == kind
    assert calibrate.default_scale(unit) == scale


def test_a_machine_half_as_fast_has_factor_one_half() -> None:
    assert calibrate.factor(REFERENCE, "cpu", 0.20) == pytest.approx(0.5)
    assert calibrate.factor(REFERENCE, "scan", 0.5) == pytest.approx(2.0)


@pytest.mark.parametrize(("value", "unit", "factor", "expected"), [
    (30.0, "µs", 0.5, 15.0),          # twice as slow a machine: the time it would have taken is half
    (1000.0, "rec/s", 0.5, 2000.0),   # and the rate twice as high
    (0.72, "ratio", 0.5, 0.72),       # ratios within one run need no normalising
    (229.0, "B", 3.0, 229.0),
])
def test_normalise_scales_times_and_rates_only(value: float, unit: str, factor: float, expected: float) -> None:
    assert calibrate.normalise(value, unit, factor) == pytest.approx(expected)


def test_annotate_uses_the_rows_own_scale_and_leaves_ratios_alone() -> None:
    factors = {"cpu": 0.5, "scan": 0.25}
    insert_row = annotate({"name": "insert", "value": 20_000, "unit": "rec/s", "scale": "scan"}, factors)
    assert (insert_row["factor"], insert_row["normalised"]) == (0.25, 80_000.0)
    cpu_row = annotate({"name": "eval", "value": 8.0, "unit": "µs"}, factors)
    assert (cpu_row["scale"], cpu_row["factor"], cpu_row["normalised"]) == ("cpu", 0.5, 4.0)
    ratio = annotate({"name": "writer / raw", "value": 0.7, "unit": "ratio", "scale": "scan"}, factors)
    assert (ratio["scale"], ratio["factor"], ratio["normalised"]) == ("none", None, None)


def _row(name: str, value: float, normalised: float | None, note: str = "") -> dict[str, object]:
    return {"name": name, "unit": "ms", "value": value, "normalised": normalised, "factor": 1.0, "note": note}


def test_median_rows_keeps_each_benchmark_from_the_run_with_the_median_normalised_figure() -> None:
    runs = [[_row("page", 120.0, 100.0, "20 pages"), _row("ratio", 0.70, None)],
            [_row("page", 90.0, 140.0, "20 pages"), _row("ratio", 0.90, None)],
            [_row("page", 100.0, 110.0, "20 pages"), _row("ratio", 0.80, None)]]
    page, ratio = median_rows(runs)
    # the median normalised figure is 110 (third run): its measured value comes with it, not 100 or 120
    assert (page["value"], page["normalised"]) == (100.0, 110.0)
    assert page["note"] == "20 pages; median of 3 runs (100.000, 140.000, 110.000)"
    assert (ratio["value"], ratio["note"]) == (0.80, "median of 3 runs (0.700, 0.900, 0.800)")


def test_median_rows_takes_the_lower_middle_of_an_even_count_and_leaves_single_runs_alone() -> None:
    two = median_rows([[_row("t", 5.0, 5.0)], [_row("t", 3.0, 3.0)]])
    assert two[0]["value"] == 3.0
    one = [_row("t", 5.0, 5.0, "as measured")]
    assert median_rows([one]) == one


def test_median_rows_keeps_a_row_that_only_one_run_has() -> None:
    rows = median_rows([[_row("a", 1.0, 1.0), _row("only first", 7.0, 7.0)], [_row("a", 2.0, 2.0)], [_row("a", 3.0, 3.0)]])
    assert [(r["name"], r["value"]) for r in rows] == [("a", 2.0), ("only first", 7.0)]


def _results(rows: list[dict[str, object]]) -> dict[str, object]:
    return {"machine": {"cpus": 2, "memory_gib": 23.5, "python": "3.11.7", "platform": "Linux"},
            "commit": "0123456789abcdef", "factor": {"cpu": 0.5, "scan": None}, "rows": rows}


def test_compare_signs_changes_as_improvements_and_flags_regressions() -> None:
    old = _results([{"name": "a time", "unit": "ms", "value": 200, "normalised": 100.0},
                    {"name": "a rate", "unit": "rec/s", "value": 50, "normalised": 100.0},
                    {"name": "a ratio", "unit": "ratio", "value": 0.70, "normalised": None},
                    {"name": "gone", "unit": "ms", "value": 1, "normalised": 1.0}])
    new = _results([{"name": "a time", "unit": "ms", "value": 150, "normalised": 130.0},   # 30 % slower
                    {"name": "a rate", "unit": "rec/s", "value": 60, "normalised": 110.0},  # 10 % better
                    {"name": "a ratio", "unit": "ratio", "value": 0.80, "normalised": None},
                    {"name": "new one", "unit": "ms", "value": 1, "normalised": 1.0}])
    lines, regressions = compare.compare(old, new, threshold=20)
    assert regressions == 1
    by_name = {line.split()[0] + " " + line.split()[1]: line for line in lines[1:-1]}
    assert by_name["a time"].endswith("-30.0%  REGRESSION")
    assert by_name["a rate"].endswith("+10.0%")
    assert "a ratio" in by_name and "%" not in by_name["a ratio"]
    assert not any("gone" in line or "new one" in line for line in lines)


def test_compare_either_way_also_counts_a_figure_that_got_better_by_itself() -> None:
    old = _results([{"name": "t", "unit": "ms", "value": 100, "normalised": 100.0},
                    {"name": "r", "unit": "rec/s", "value": 100, "normalised": 100.0}])
    new = _results([{"name": "t", "unit": "ms", "value": 70, "normalised": 70.0},    # 30 % better
                    {"name": "r", "unit": "rec/s", "value": 115, "normalised": 115.0}])  # within 20 %
    assert compare.compare(old, new, threshold=20)[1] == 0
    lines, moves = compare.compare(old, new, threshold=20, either_way=True)
    assert moves == 1
    assert lines[1].endswith("+30.0%  IMPROVED")
    assert lines[-1].startswith("1 move(s) beyond 20 %")


def test_compare_command_exits_one_on_a_regression(tmp_path) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(_results([{"name": "t", "unit": "s", "value": 1, "normalised": 1.0}])))
    new.write_text(json.dumps(_results([{"name": "t", "unit": "s", "value": 1, "normalised": 1.5}])))
    assert compare.main([str(old), str(new)]) == 1
    assert compare.main([str(old), str(old)]) == 0


def test_markdown_shows_measured_and_normalised_with_the_factor() -> None:
    text = markdown.render(_results([{"issue": "#3", "name": "eval", "unit": "µs", "value": 8.0,
                                      "normalised": 4.0, "target": "≤ 15 µs"},
                                     {"issue": "#5", "name": "ratio", "unit": "ratio", "value": 0.72,
                                      "normalised": None, "target": ">= 0.7"}]))
    assert "speed factor against the reference machine: CPU 0.5. Targets" in text
    assert "| #3 | eval | 8 µs | 4 µs | ≤ 15 µs |" in text
    assert "| #5 | ratio | 0.72 ratio |  | >= 0.7 |" in text


def test_markdown_writes_an_index_with_four_decimals_so_a_near_miss_does_not_read_as_a_pass() -> None:
    text = markdown.render(_results([{"issue": "#16", "name": "jain", "unit": "index", "value": 0.9497,
                                      "normalised": None, "target": ">= 0.95"},
                                     {"issue": "#16", "name": "jain whole", "unit": "index", "value": 1.0,
                                      "normalised": None, "target": ""}]))
    assert "| #16 | jain | 0.9497 index |  | >= 0.95 |" in text
    assert "| #16 | jain whole | 1.0000 index |  |  |" in text


def test_parallel_rows_take_the_all_cores_factor() -> None:
    factors = {"cpu": 1.0, "parallel": 0.6}
    row = annotate({"name": "p99 with 8 clients", "value": 50.0, "unit": "ms", "scale": "parallel"}, factors)
    assert (row["scale"], row["factor"], row["normalised"]) == ("parallel", 0.6, 30.0)


def test_parallel_calibration_takes_the_best_round_of_mean_process_times() -> None:
    # two processes, three rounds, reported round by round
    times = [0.10, 0.14, 0.09, 0.11, 0.30, 0.20]
    assert calibrate.best_round(times, processes=2) == pytest.approx(0.10)


def test_a_scale_the_reference_lacks_leaves_the_row_unnormalised() -> None:
    assert calibrate.factor({"cpu_seconds": 0.1}, "scan", 2.0) is None
    row = annotate({"name": "insert", "value": 20_000, "unit": "rec/s", "scale": "scan"}, {"cpu": 1.0, "scan": None})
    assert (row["factor"], row["normalised"]) == (None, None)


def test_scan_rows_take_the_store_scan_factor() -> None:
    row = annotate({"name": "newest page of 50, p95", "value": 120.0, "unit": "ms", "scale": "scan"},
                   {"cpu": 1.0, "parallel": 0.7, "scan": 0.6})
    assert (row["scale"], row["factor"], row["normalised"]) == ("scan", 0.6, 72.0)


def test_scan_calibration_runs_the_store_read_shapes_on_its_table(tmp_path) -> None:
    from audit.store import connection

    client = connection.connect(connection.resolve_dsn(f"chdb://{tmp_path}/db"))
    try:
        calibrate.scan_database(client, rows=7_000)  # a week: 1,000 rows a day
        page, lookup, by_tenant = (client.query(sql).result_rows for sql in calibrate.SCAN_QUERIES)
    finally:
        client.close()
    assert len(page) == 51
    assert [ms for ms, _ in page] == sorted((ms for ms, _ in page), reverse=True)
    assert page[0][0] == 1_793_491_200_000 + 6_999 * 604_800_000 // 7_000  # the week's last row
    assert len(lookup) == 1  # pod-4321 is row 4321 alone among 7,000, and 4321 % 4 == 1
    assert sorted((t, n, f) for t, n, f in by_tenant) == [
        ("tenant-0", 250, 50), ("tenant-1", 250, 50), ("tenant-2", 250, 50), ("tenant-3", 250, 50)]


def test_awake_spinners_run_one_per_core_at_idle_priority_and_end_with_the_run() -> None:
    import os
    import time

    from benchmarks.run import Awake

    with Awake(True) as awake:
        assert len(awake.procs) == len(os.sched_getaffinity(0))
        deadline = time.monotonic() + 30
        while any(os.sched_getscheduler(p.pid) != os.SCHED_IDLE for p in awake.procs):
            assert time.monotonic() < deadline, "a spinner never switched to SCHED_IDLE"
            time.sleep(0.05)
    assert all(p.poll() is not None for p in awake.procs)
    assert Awake(False).procs == []


@pytest.mark.parametrize(("cputime", "memory", "expected"), [
    (1.0, 1.0, 1.0),          # the reference machine
    (1.0, 0.5, 1 / 1.5),      # memory twice as slow: half the time doubles, the row takes 1.5 times as long
    (0.5, 1.0, 1 / 1.5),      # the same for the cache-resident half: equal shares
    (0.8, 0.5, 1 / 1.625),    # 0.5 / 0.8 + 0.5 / 0.5
    (2.0, 1.0, 1 / 0.75),     # 0.5 / 2 + 0.5 / 1
    (1.0, 1.68, 1 / (0.5 + 0.5 / 1.68)),
    (None, 0.5, None),        # either factor unknown: the row is left unnormalised
    (0.8, None, None),
])
def test_memory_rows_stretch_half_like_the_cpu_workload_and_half_like_the_memory_one(
        cputime: float | None, memory: float | None, expected: float | None) -> None:
    assert calibrate.memory_factor(cputime, memory) == (pytest.approx(expected) if expected is not None else None)


def test_memory_rows_take_the_blend_of_the_cpu_time_and_memory_factors_not_the_wall_clock_cpu_one() -> None:
    row = annotate({"name": "engine decisions/s", "value": 1_000.0, "unit": "decisions/s", "scale": "memory"},
                   {"cpu": 0.13, "cputime": 0.8, "memory": 0.5})
    # 1 / factor = 0.5 / 0.8 + 0.5 / 0.5 = 1.625: the rate it would have had on the reference is 1,625
    assert (row["scale"], row["factor"], row["normalised"]) == ("memory", round(1 / 1.625, 3), 1_625.0)


def _stored(name: str, value: float, normalised: float, scale: str, **extra: object) -> dict[str, object]:
    return {"name": name, "unit": "decisions/s", "value": value, "normalised": normalised, "scale": scale, **extra}


def _run(rows: list[dict[str, object]], **seconds: list[float]) -> dict[str, object]:
    """Results whose run measured these calibrations (seconds per workload, one per module run)."""
    return {**_results(rows), "calibration": {f"{scale}_seconds": figures for scale, figures in seconds.items()},
            "reference": {"cpu_seconds": 0.1, "cputime_seconds": 0.1, "memory_seconds": 1.0, "parallel_seconds": 1.0}}


@pytest.mark.parametrize(("results", "expected"), [
    # written when a memory row took the memory factor alone (0.5): 2,000; by the blend of 0.8 and 0.5: 1,625
    (_run([_stored("engine", 1_000.0, 2_000.0, "memory")], cpu=[0.125], cputime=[0.125], memory=[2.0]), 1_625.0),
    # written before the cputime calibration existed: today's rule cannot apply, the figure as written
    (_run([_stored("engine", 1_000.0, 2_000.0, "memory")], cpu=[0.125], memory=[2.0]), 2_000.0),
    (_run([_stored("replay", 1_000.0, 1_000.0, "cpu")], cpu=[0.2]), 2_000.0),
    # the run's median, not the figure beside the row's own module: median 0.2 s, factor 0.5
    (_run([_stored("replay", 1_000.0, 1_000.0, "cpu", calibration={"cpu": 0.1})], cpu=[0.1, 0.2, 0.3]), 2_000.0),
    # mixed rows weigh their cores by the results' machine (2 cores), not the comparing one
    (_run([_stored("stats", 1_000.0, 0.0, "mixed", cores=1.5)], cpu=[0.1], parallel=[2.0]), 1_000.0 * 1.5),
    # no stored calibrations: the figure as written
    ({**_results([{"name": "old", "unit": "decisions/s", "value": 1_000.0, "normalised": 1_234.0, "scale": "memory"}]),
      "reference": {"cpu_seconds": 0.1}}, 1_234.0),
])
def test_compare_normalises_stored_rows_again_by_todays_rules(results: dict[str, object], expected: float) -> None:
    (again,) = compare.renormalised(results)
    assert again["normalised"] == pytest.approx(expected)


def test_compare_judges_old_memory_rows_by_the_blend_not_by_the_figure_they_were_written_with() -> None:
    old = _run([_stored("engine", 1_000.0, 2_000.0, "memory")], cpu=[0.125], cputime=[0.125], memory=[2.0])
    new = _run([_stored("engine", 1_500.0, 1_500.0, "memory")], cpu=[0.1], cputime=[0.1], memory=[1.0])
    lines, moves = compare.compare(old, new, threshold=20, either_way=True)
    # as written, 2,000 -> 1,500 would be a 25 % regression; both by the blend, 1,625 -> 1,500
    assert moves == 0
    assert lines[1].endswith("-7.7%")


def test_memory_is_measured_after_a_module_like_the_other_shared_scales() -> None:
    from benchmarks.run import SHARED_SCALES

    assert "memory" in SHARED_SCALES
    assert markdown.SCALE_NAMES["memory"] == "memory"


def test_memory_is_the_median_of_an_odd_number_of_fresh_processes_and_the_others_one() -> None:
    # odd, so the median is the figure one real process measured, not a mean of two
    assert calibrate.processes("memory") == calibrate.MEMORY_PROCESSES == 3
    assert [calibrate.processes(s) for s in ("cpu", "cputime", "parallel", "scan")] == [1, 1, 1, 1]


def test_a_calibration_of_several_processes_is_the_median_of_their_figures(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks.run import _calibration_seconds

    seconds = _calibration_seconds("cpu", processes=3)  # the cheapest workload, each in a real fresh process
    line = capsys.readouterr().err.strip().splitlines()[-1]
    figures = [float(f) for f in line.removeprefix("# cpu calibration: ").split(" s, ")[0].split(", ")]
    assert len(figures) == 3
    assert seconds == pytest.approx(sorted(figures)[1], abs=0.0005)  # shown to the millisecond
    assert line.endswith(f"median {seconds:.3f}")


@pytest.mark.parametrize(("only", "module", "picked"), [
    ("", "bench_engine", True),                   # no filter: every module
    ("engine", "bench_engine", True),
    ("engine", "bench_replay", False),
    ("engine,replay", "bench_replay", True),      # several, comma-separated
    ("engine,replay", "bench_replay_api", True),  # substrings, as a single one always was
    ("engine,replay", "bench_trace", False),
])
def test_only_picks_modules_by_any_of_its_comma_separated_substrings(only: str, module: str, picked: bool) -> None:
    from benchmarks.run import selected

    assert selected(module, only) is picked


def test_every_row_takes_the_runs_factor_and_keeps_the_calibrations_beside_its_own_run() -> None:
    from benchmarks.run import normalised_rows

    row = {"name": "engine decisions/s", "value": 1_000.0, "unit": "decisions/s", "scale": "memory"}
    runs = [[({**row, "value": 900.0}, {"cputime": 0.1, "memory": 3.0})], [(row, {"cputime": 0.2, "memory": 1.0})],
            [({**row, "value": 1_200.0}, {"cputime": 0.1, "memory": 1.0})]]
    # the run's factors: cputime 0.5, memory 0.5, so 1 / (1 + 1) = 0.5 for every run; the median
    # run is the 1,000 decisions/s one, normalised 2,000, with the calibrations taken beside it
    (chosen,) = normalised_rows([runs], {"cputime": 0.5, "memory": 0.5})
    assert (chosen["normalised"], chosen["factor"]) == (2_000.0, 0.5)
    assert chosen["calibration"] == {"cputime": 0.2, "memory": 1.0}


def test_a_runs_factor_is_the_median_of_each_workloads_figures_over_every_module_run() -> None:
    from benchmarks.run import run_calibrations, run_factors

    def run(**seconds: float) -> list[tuple[dict[str, object], dict[str, float]]]:
        return [({"name": "a", "unit": "ms", "value": 1.0}, seconds), ({"name": "b", "unit": "ms", "value": 2.0}, seconds)]

    module_runs = [[run(cpu=0.2), run(cpu=0.1)], [run(cpu=0.4, scan=0.5)], [[]]]
    # one figure per module run, however many rows it has; a run without rows adds none
    calibrations = run_calibrations(module_runs)
    assert calibrations["cpu"] == [0.1, 0.2, 0.4]
    assert calibrations["scan"] == [0.5]
    assert calibrations["memory"] == []
    factors = run_factors(calibrations, {"cpu_seconds": 0.1, "scan_seconds": 0.25, "memory_seconds": 1.0})
    assert (factors["cpu"], factors["scan"], factors["memory"]) == (0.5, 0.5, None)


@pytest.mark.parametrize(("cores", "expected"), [
    (1.0, 1.0),        # one core: the single-core workload's stretch, none beside one burned core
    (1.5, 1 / 1.25),   # wants 1.5 cores, gets 2 x 1.5 / 2.5 = 1.2 of them: 1.25 times as long
    (2.0, 1 / 1.5),    # every core: the all-cores workload's stretch
    (0.8, 1.0),        # waiting on I/O counts as one core
    (3.0, 1 / 1.5),    # more than the machine has counts as all of them
])
def test_mixed_rows_stretch_like_fair_sharing_beside_a_burned_core(cores: float, expected: float) -> None:
    # two cores, one burned: the single-core workload keeps a core (factor 1), the all-cores one
    # gets 2 of the 3 processes' worth of cores (factor 1 / 1.5)
    assert calibrate.mixed_factor(1.0, 1 / 1.5, cores, cpus=2) == pytest.approx(expected)


def test_mixed_factor_is_unknown_without_both_workloads_and_single_core_on_one_cpu() -> None:
    assert calibrate.mixed_factor(None, 0.5, 1.5, cpus=2) is None
    assert calibrate.mixed_factor(0.8, None, 1.5, cpus=2) is None
    assert calibrate.mixed_factor(0.8, 0.5, 1.5, cpus=1) == pytest.approx(0.8)


def test_mixed_rows_take_the_factor_of_their_declared_cores() -> None:
    row = annotate({"name": "page render", "value": 1.2, "unit": "s", "scale": "mixed", "cores": 1.5},
                   {"cpu": 1.0, "parallel": 0.5}, cpus=2)
    # half its time stretches like the single-core workload (1x), half like all cores (2x): 1.5x
    assert (row["scale"], row["factor"], row["normalised"]) == ("mixed", round(1 / 1.5, 3), 0.8)


@pytest.mark.parametrize(("scales", "measured"), [
    (["cpu"], []),
    (["mixed"], ["parallel"]),                       # the cpu one is measured in the module's process
    (["scan", "mixed", "cpu"], ["parallel", "scan"]),
    (["parallel", "mixed"], ["parallel"]),           # once, however many rows take it
    (["none", "memory"], ["cputime", "memory"]),     # and the cpu one, measured around every module
])
def test_a_module_is_followed_by_the_calibrations_its_rows_take(scales: list[str], measured: list[str]) -> None:
    from benchmarks.run import shared_calibrations

    rows = [{"name": s, "value": 1.0, "unit": "ms", "scale": s} for s in scales]
    assert shared_calibrations(rows) == measured


def test_every_dashboard_page_declares_the_cores_its_render_keeps_busy() -> None:
    from benchmarks.bench_dashboards import CORES
    from dashboards.navigation import PAGES

    assert set(CORES) == {page.title for page in PAGES}
    assert all(1.0 <= cores <= 2.0 for cores in CORES.values())


def test_the_cpu_time_calibration_times_the_cpu_workload_on_the_process_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = iter(range(100))
    monkeypatch.setattr(calibrate, "cpu_workload", lambda: lambda: None)
    monkeypatch.setattr(calibrate.time, "process_time", lambda: float(next(ticks)) * 0.01)
    # the wall clock is never read: every round is one tick of the process clock
    assert calibrate.cputime_seconds() == pytest.approx(0.01)


def _scripted(passes: list[float]) -> tuple[Callable[[], Callable[[], None]], Callable[[], float]]:
    """A workload whose timed passes take ``passes`` seconds in turn on the clock returned with it
    (the untimed warm-up pass takes none)."""
    now = [0.0]
    left = list(passes)
    warmed = [False]

    def work() -> None:
        if warmed[0]:
            now[0] += left.pop(0)
        warmed[0] = True

    return (lambda: work), (lambda: now[0])


@pytest.mark.parametrize(("unit", "values", "normalised", "factor"), [
    # speeds 1.0, 1.0, 0.5 (reference 0.5 s over the faster pass of 1.0/0.5, 0.5/2.0, 2.0/1.0)
    ("ms", [10.0, 20.0, 30.0], 15.0, 0.75),  # rounds 10, 20, 15: a slow round's time shrinks
    ("decisions/s", [10.0, 20.0, 30.0], 20.0, 1.0),  # rounds 10, 20, 60: a slow round's rate grows
])
def test_interleaved_normalises_each_round_by_the_faster_pass_around_it(
        unit: str, values: list[float], normalised: float, factor: float) -> None:
    workload, clock = _scripted([1.0, 0.5, 2.0, 1.0])
    rounds = iter(values)
    figure = interleaved(lambda: next(rounds), 3, unit, workload=workload, reference_seconds=0.5, clock=clock)
    assert (figure.measured, figure.normalised, figure.speed) == (20.0, normalised, 1.0)
    assert figure.factor_of(unit) == pytest.approx(factor)


def test_an_inline_row_is_normalised_by_its_own_factor_not_the_runs() -> None:
    workload, clock = _scripted([1.0, 0.5, 2.0, 1.0])
    rounds = iter([10.0, 20.0, 30.0])
    figure = interleaved(lambda: next(rounds), 3, "ms", workload=workload, reference_seconds=0.5, clock=clock)
    row = annotate({"name": "lookup", "target": "", **figure.row("ms", 1)}, {"cpu": 0.4, "parallel": 0.3})
    assert (row["scale"], row["value"], row["factor"], row["normalised"]) == ("inline", 20.0, 0.75, 15.0)


def test_a_reading_of_several_passes_takes_the_fastest_of_them() -> None:
    # readings of two passes each: 2.0/0.5 -> 1.0, 4.0/1.0 -> 0.5, 4.0/2.0 -> 0.25 (reference 0.5 s);
    # one pass each would have read 0.25, 1.0 and 0.125 from the same script, and paced both rounds at 1.0
    workload, clock = _scripted([2.0, 0.5, 4.0, 1.0, 4.0, 2.0])
    rounds = paced([lambda: "a", lambda: "b"], workload=workload, reference_seconds=0.5, clock=clock, passes=2)
    assert rounds == [("a", 1.0), ("b", 0.5)]


def test_each_sample_takes_the_speed_of_the_round_it_was_taken_in() -> None:
    workload, clock = _scripted([1.0, 0.5, 2.0, 1.0])
    rounds = paced([lambda: [10.0, 12.0], lambda: [20.0], lambda: [30.0, 40.0]], workload=workload,
                   reference_seconds=0.5, clock=clock)
    assert rounds == [([10.0, 12.0], 1.0), ([20.0], 1.0), ([30.0, 40.0], 0.5)]
    figure = of_samples([(us, speed) for samples, speed in rounds for us in samples], "us")
    # normalised samples 10, 12, 20, 15, 20: median 15 where the measured median is 20
    assert (figure.measured, figure.normalised, figure.speed) == (20.0, 15.0, 1.0)
