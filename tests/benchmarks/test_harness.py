"""The ``make bench`` harness around the modules: the pinned ``--noise`` burner and idle-priority
spinners, the passes that spread a module's runs over the whole run, the spread of a row's runs,
the extra runs of the modules whose runs spread widest, the CPU speed taken on either side of a
run, and ``compare``'s report of rows whose own runs disagree by more than the band; and that a
killed run leaves none of its processes behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.run import Noise, burner_core, keep_previous, previous_results


@pytest.mark.parametrize(("available", "core"), [
    ({0, 1}, 1),          # two cores: the burner takes the second, single-process work the first
    ({0, 1, 2, 3}, 3),
    ({2, 5, 7}, 7),       # a restricted affinity (taskset, a container's cpuset): one of those
    ({0}, None),          # one core: pinning would change nothing
    ({3}, None),
])
def test_the_burner_is_pinned_to_the_highest_core_only_when_there_are_two(available: set[int], core: int | None) -> None:
    assert burner_core(available) == core


def test_the_noise_burner_runs_on_its_core_alone_and_ends_with_the_run() -> None:
    available = os.sched_getaffinity(0)
    with Noise(True) as noise:
        assert noise.proc is not None
        if len(available) < 2:
            assert noise.core is None
        else:
            assert noise.core == max(available)
            deadline = time.monotonic() + 30
            while os.sched_getaffinity(noise.proc.pid) != {noise.core}:
                assert noise.proc.poll() is None, "the burner exited"
                assert time.monotonic() < deadline, "the burner never pinned itself"
                time.sleep(0.05)
    assert noise.proc.poll() is not None
    assert Noise(False).proc is None


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (an exited child nobody has reaped yet is not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def test_the_burner_and_the_spinners_stop_when_the_run_is_killed() -> None:
    # SIGKILL, like a SIGTERM the run does not handle, skips the exits that would kill them
    program = ("import time\nfrom benchmarks.run import Awake, Noise\n"
               "with Awake(True) as awake, Noise(True) as noise:\n"
               "    print(*(p.pid for p in [*awake.procs, noise.proc]), flush=True)\n"
               "    time.sleep(600)\n")
    repo = Path(__file__).resolve().parents[2]
    run = subprocess.Popen([sys.executable, "-c", program], cwd=repo, stdout=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONPATH": str(repo)})
    assert run.stdout is not None
    helpers = [int(pid) for pid in run.stdout.readline().split()]
    assert len(helpers) == len(os.sched_getaffinity(0)) + 1 and all(_running(pid) for pid in helpers)
    run.kill()
    run.wait()
    _all_end_within(helpers, 30)


def _all_end_within(pids: list[int], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while any(_running(pid) for pid in pids):
        assert time.monotonic() < deadline, [pid for pid in pids if _running(pid)]
        time.sleep(0.05)


def test_a_killed_run_takes_its_module_and_the_server_the_module_started_with_it(tmp_path: Path) -> None:
    # run -> module -> claimtrail serve, as make bench starts bench_api's server; only the run is killed
    module = ("import time\nfrom pathlib import Path\n"
              "from benchmarks.serving import start_serve, wait_ready\nfrom tests.api.conftest import free_port\n"
              f"store, port = Path({str(tmp_path)!r}), free_port()\n"
              "serve = start_serve(['--create', '--dsn', f'chdb://{store}/db', '--port', str(port), '--insecure-local'],"
              " store / 'serve.log')\n"
              "wait_ready(serve, f'http://127.0.0.1:{port}', store / 'serve.log', 120)\n"
              "print(serve.pid, flush=True)\ntime.sleep(600)\n")
    program = ("import subprocess, sys, time\nfrom benchmarks.lifetime import ending_with_this_process\n"
               f"module = subprocess.Popen([sys.executable, '-c', {module!r}], preexec_fn=ending_with_this_process())\n"
               "print(module.pid, flush=True)\ntime.sleep(600)\n")
    repo = Path(__file__).resolve().parents[2]
    run = subprocess.Popen([sys.executable, "-c", program], cwd=repo, stdout=subprocess.PIPE, text=True,
                           env={**os.environ, "PYTHONPATH": str(repo)})
    assert run.stdout is not None
    started = [int(run.stdout.readline()), int(run.stdout.readline() or 0)]
    assert all(_running(pid) for pid in started), (tmp_path / "serve.log").read_text()
    run.kill()
    run.wait()
    try:
        _all_end_within(started, 60)
    finally:  # a failure must not leave a server behind either
        for pid in filter(_running, started):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize(("wanted", "passes"), [
    ({"bench_api": 3, "bench_engine": 1, "bench_otel": 3}, [["bench_api", "bench_otel"], ["bench_api", "bench_otel"]]),
    ({"bench_engine": 1, "bench_replay": 1}, []),                         # no module asks for more: one pass
    ({"bench_cel": 2, "bench_store": 3}, [["bench_cel", "bench_store"], ["bench_store"]]),
    ({"bench_store": 3, "bench_cel": 2}, [["bench_store", "bench_cel"], ["bench_store"]]),  # in the order given
    ({}, []),                                                             # every module failed
])
def test_later_passes_run_each_module_again_until_it_has_the_runs_it_asks_for(
        wanted: dict[str, int], passes: list[list[str]]) -> None:
    from benchmarks.run import later_passes

    assert later_passes(wanted) == passes
    # with the first pass, every module runs exactly as often as it asks
    runs = {name: 1 + sum(name in p for p in passes) for name in wanted}
    assert runs == wanted


@pytest.mark.parametrize(("figures", "spread"), [
    ([10.0, 10.0, 10.0], 1.0),            # runs that agree
    ([8.891, 11.338, 9.950], 1.275),      # three runs of a p95 in ms: the slowest over the fastest
    ([1_531.1, 1_169.6, 1_360.7], 1.309),  # and of a rate: the same ratio, higher over lower
    ([12.0, 15.0], 1.25),
    ([7.0], None),                        # one run has no spread
    ([], None),
    ([0.0, 3.0], None),                   # no ratio to a zero
])
def test_spread_is_the_largest_of_a_rows_runs_over_the_smallest(figures: list[float], spread: float | None) -> None:
    from benchmarks.run import spread_of

    assert spread_of(figures) == spread


def _row(name: str, normalised: float | None, value: float) -> dict[str, object]:
    return {"name": name, "unit": "ms", "value": value, "normalised": normalised, "factor": 1.0, "note": ""}


def test_the_row_of_several_runs_carries_the_spread_of_their_figures_and_a_single_run_none() -> None:
    from benchmarks.run import median_rows

    runs = [[_row("p95", 9.95, 11.4), _row("ratio", None, 0.78)],
            [_row("p95", 8.891, 10.2), _row("ratio", None, 0.80)],
            [_row("p95", 11.338, 13.0), _row("ratio", None, 0.79)]]
    p95, ratio = median_rows(runs)
    assert (p95["normalised"], p95["spread"]) == (9.95, 1.275)  # on the normalised figures
    assert (ratio["value"], ratio["spread"]) == (0.79, 1.026)    # and on the measured ones where none is
    (single,) = median_rows([[_row("p95", 9.95, 11.4)]])
    assert "spread" not in single


def _result(rows: list[dict[str, object]]) -> dict[str, object]:
    return {"factor": {"cpu": 1.0}, "rows": rows}


def _timed(name: str, normalised: float, spread: float | None = None) -> dict[str, object]:
    row: dict[str, object] = {"name": name, "unit": "ms", "value": normalised, "normalised": normalised}
    if spread is not None:
        row["spread"] = spread
    return row


@pytest.mark.parametrize(("old_spread", "new_spread", "widest"), [
    (1.27, 1.18, 1.27),   # the old result's runs lay 27 % apart: wider than a 20 % band
    (None, 1.46, 1.46),   # a result from before spreads were kept has none: the other's decides
    (1.2, 1.2, None),     # exactly the band is within it
    (1.05, 1.1, None),
    (None, None, None),   # single-run rows
])
def test_wider_spread_is_the_wider_of_the_two_rows_own_spreads_beyond_the_band(
        old_spread: float | None, new_spread: float | None, widest: float | None) -> None:
    from benchmarks import compare

    assert compare.wider_spread(_timed("t", 1.0, old_spread), _timed("t", 1.0, new_spread), threshold=20) == widest


def test_compare_marks_and_lists_moves_in_rows_whose_own_runs_spread_wider_but_still_counts_them() -> None:
    from benchmarks import compare

    ratio_old = {"name": "p99 16 / p99 1", "unit": "ratio", "value": 9.26, "normalised": None, "spread": 4.38}
    old = _result([_timed("why p95", 9.95, 1.27), _timed("pod sql p95", 55.6), _timed("steady", 10.0, 1.05),
                   _timed("wide but unmoved", 20.0, 1.5), ratio_old])
    new = _result([_timed("why p95", 12.205, 1.18), _timed("pod sql p95", 38.6), _timed("steady", 10.5, 1.04),
                   _timed("wide but unmoved", 21.0, 1.1), {**ratio_old, "value": 11.66, "spread": 3.31}])
    lines, moves = compare.compare(old, new, threshold=20, either_way=True)
    assert moves == 2  # the wide row's move is not hidden
    rows = {line[:70].rstrip(): line for line in lines[1:6]}
    assert rows["why p95"].endswith("-22.7%  REGRESSION  (own runs spread 1.27)")
    assert rows["pod sql p95"].endswith("+30.6%  IMPROVED")
    assert rows["steady"].endswith("-5.0%")
    assert rows["wide but unmoved"].endswith("-5.0%  (own runs spread 1.50)")
    assert rows["p99 16 / p99 1"].rstrip().endswith("11.660")  # a ratio is not judged, so neither is its spread
    assert lines[6].startswith("2 row(s) whose own runs spread wider than 20 %")
    assert [line.split(" old ")[0].strip() for line in lines[7:9]] == ["why p95", "wide but unmoved"]
    assert lines[7].endswith("old 1.27 new 1.18")
    assert lines[-1].startswith("2 move(s) beyond 20 % (1 of them in rows whose own runs spread wider); ")


def test_compare_adds_nothing_when_no_row_spreads_wider_than_the_band() -> None:
    from benchmarks import compare

    lines, moves = compare.compare(_result([_timed("t", 10.0, 1.1)]), _result([_timed("t", 13.0, 1.02)]), threshold=20)
    assert moves == 1
    assert len(lines) == 3
    assert lines[-1].startswith("1 regression(s) beyond 20 %; factors")


def test_each_awake_spinner_is_pinned_to_a_core_of_its_own_and_together_they_cover_every_core() -> None:
    from benchmarks.run import Awake

    available = os.sched_getaffinity(0)
    with Awake(True) as awake:
        assert sorted(awake.cores) == sorted(available)
        deadline = time.monotonic() + 30
        pinned = []
        while pinned != [{core} for core in awake.cores]:
            assert time.monotonic() < deadline, f"the spinners never pinned themselves: {pinned}"
            time.sleep(0.05)
            pinned = [os.sched_getaffinity(p.pid) for p in awake.procs]
            assert all(p.poll() is None for p in awake.procs), "a spinner exited"
    assert all(p.poll() is not None for p in awake.procs)


@pytest.mark.parametrize(("modules", "budget", "chosen"), [
    # widest first, each while two more runs fit: api (2 x 60 s) then cel (2 x 4 s), not store (2 x 50 s)
    ({"bench_cel": (1.3, 4.0), "bench_api": (1.35, 60.0), "bench_store": (1.31, 50.0)}, 150.0, ["bench_api", "bench_cel"]),
    ({"bench_cel": (1.3, 4.0), "bench_api": (1.35, 60.0)}, 100.0, ["bench_cel"]),       # api no longer fits
    ({"bench_cel": (1.2, 4.0), "bench_cli": (1.05, 30.0)}, 150.0, []),                  # within the band
    ({"bench_cel": (1.21, 4.0)}, 0.0, []),                                             # no budget, no extra runs
    ({}, 150.0, []),
])
def test_widened_gives_more_runs_to_the_widest_spread_modules_that_fit_in_the_budget(
        modules: dict[str, tuple[float, float]], budget: float, chosen: list[str]) -> None:
    from benchmarks.run import widened

    assert widened(modules, budget) == chosen


def test_a_modules_widest_spread_counts_its_times_and_rates_not_its_ratios() -> None:
    from benchmarks.run import widest_spread

    def run(p95: float, rps: float, ratio: float) -> list[tuple[dict[str, object], dict[str, float]]]:
        rows = [{"name": "p95", "unit": "ms", "value": p95}, {"name": "rps", "unit": "req/s", "value": rps},
                {"name": "p99 16 / p99 1", "unit": "ratio", "value": ratio}]
        return [(row, {"cpu": 0.1}) for row in rows]

    # the ratio's runs lie 4x apart, the rate's 1.3x, the time's 1.1x: the rate sets the module's
    assert widest_spread([run(10.0, 1_000.0, 2.0), run(11.0, 1_300.0, 8.0), run(10.5, 1_100.0, 3.0)]) == 1.3
    assert widest_spread([run(10.0, 1_000.0, 2.0)]) == 1.0  # one run has no spread


def test_a_modules_spread_is_of_its_measured_figures_whatever_was_calibrated_beside_each_run() -> None:
    from benchmarks.run import widest_spread

    # the same figure three times: no spread, though the calibrations beside the runs were 2x apart
    runs = [[({"name": "p95", "unit": "ms", "value": 10.0}, {"cpu": seconds})] for seconds in (0.1, 0.2, 0.15)]
    assert widest_spread(runs) == 1.0


class _Modules:
    """Stands in for the modules' own processes in ``run_modules``: each module's runs give the
    figures listed for it, in turn, and take the seconds given; a figure of None is a failed run.
    The calls are recorded in the order made."""

    def __init__(self, modules: dict[str, tuple[int, float, list[float | None]]]) -> None:
        self.modules = modules
        self.calls: list[tuple[str, int, int]] = []

    def __call__(self, name: str, number: int, of: int) -> tuple[list[tuple[dict[str, object], dict[str, float]]], int, float] | None:
        self.calls.append((name, number, of))
        runs, seconds, figures = self.modules[name]
        figure = figures[number - 1]
        if figure is None:
            return None
        return [({"name": f"{name} p95", "unit": "ms", "value": figure}, {"cpu": 0.1})], runs, seconds


def test_modules_run_pass_by_pass_and_the_widest_spread_ones_twice_more_within_the_budget() -> None:
    from benchmarks.run import run_modules

    modules = _Modules({
        "bench_api": (3, 60.0, [10.0, 13.0, 10.5, 10.2, 10.4]),  # spread 1.3: two more runs fit (120 s)
        "bench_engine": (1, 300.0, [5.0]),                      # one run asked, none more
        "bench_otel": (3, 20.0, [4.0, 5.0, 4.1]),               # spread 1.25, but the budget is spent
        "bench_cel": (3, 2.0, [3.0, 3.1, 3.05]),                # within the band
    })
    runs = run_modules(list(modules.modules), modules, extra_seconds=150.0)
    assert modules.calls == [
        ("bench_api", 1, 0), ("bench_engine", 1, 0), ("bench_otel", 1, 0), ("bench_cel", 1, 0),
        ("bench_api", 2, 3), ("bench_otel", 2, 3), ("bench_cel", 2, 3),
        ("bench_api", 3, 3), ("bench_otel", 3, 3), ("bench_cel", 3, 3),
        ("bench_api", 4, 5), ("bench_api", 5, 5),
    ]
    assert {name: len(r) for name, r in runs.items()} == {"bench_api": 5, "bench_engine": 1, "bench_otel": 3, "bench_cel": 3}


def test_a_module_that_fails_in_a_later_pass_runs_no_more_and_keeps_no_runs() -> None:
    from benchmarks.run import run_modules

    modules = _Modules({"bench_store": (3, 30.0, [10.0, None, 10.0]), "bench_cli": (3, 10.0, [1.0, 1.0, 1.0]),
                        "bench_history": (3, 10.0, [None])})
    runs = run_modules(list(modules.modules), modules, extra_seconds=150.0)
    assert modules.calls == [("bench_store", 1, 0), ("bench_cli", 1, 0), ("bench_history", 1, 0),
                             ("bench_store", 2, 3), ("bench_cli", 2, 3), ("bench_cli", 3, 3)]
    assert list(runs) == ["bench_cli"]


@pytest.mark.parametrize(("before", "after", "seconds"), [
    (0.030, 0.030, 0.030),   # a steady machine: the figure it always was
    (0.030, 0.060, 0.045),   # busier after the run than before: half of each
    (0.090, 0.030, 0.060),   # a busy moment just before the run counts for half, not all
])
def test_a_runs_cpu_figure_is_the_mean_of_the_figures_on_either_side_of_it(before: float, after: float,
                                                                          seconds: float) -> None:
    from benchmarks.run import around

    assert around(before, after) == pytest.approx(seconds)


_MODULES = st.dictionaries(st.sampled_from([f"bench_{n}" for n in "abcdefgh"]),
                           st.tuples(st.floats(1.0, 5.0), st.floats(0.5, 400.0)), max_size=8)


@given(_MODULES, st.floats(0.0, 600.0))
def test_widened_never_exceeds_its_budget_and_picks_only_modules_beyond_the_band(
        modules: dict[str, tuple[float, float]], budget: float) -> None:
    from benchmarks.run import EXTRA_RUNS, SPREAD_BAND, widened

    chosen = widened(modules, budget)
    assert len(set(chosen)) == len(chosen)
    assert sum(EXTRA_RUNS * modules[name][1] for name in chosen) <= budget
    assert all(modules[name][0] > SPREAD_BAND for name in chosen)
    # widest first
    assert [modules[name][0] for name in chosen] == sorted((modules[name][0] for name in chosen), reverse=True)


@given(st.dictionaries(st.sampled_from([f"bench_{n}" for n in "abcdefgh"]), st.integers(1, 7)))
def test_with_the_first_pass_every_module_runs_exactly_as_often_as_it_asks(wanted: dict[str, int]) -> None:
    from benchmarks.run import later_passes

    passes = later_passes(wanted)
    assert {name: 1 + sum(group.count(name) for group in passes) for name in wanted} == wanted
    assert all(group for group in passes)  # no empty pass


@given(st.lists(st.floats(0.001, 1e6), min_size=2, max_size=9))
def test_a_spread_is_at_least_one_and_the_same_in_any_order(figures: list[float]) -> None:
    from benchmarks.run import spread_of

    spread = spread_of(figures)
    assert spread is not None and spread >= 1.0
    assert spread_of(list(reversed(figures))) == spread


@pytest.mark.parametrize(("path", "previous"), [
    ("benchmarks/results.json", "benchmarks/results.previous.json"),
    ("out/run", "out/run.previous.json"),
])
def test_the_previous_results_sit_beside_the_new_ones(path: str, previous: str) -> None:
    assert previous_results(path) == previous


def test_a_run_keeps_the_results_it_replaces_and_starts_clean_with_none(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    keep_previous(str(results))  # no earlier run: nothing to keep
    assert list(tmp_path.iterdir()) == []
    results.write_text('{"commit": "a"}')
    keep_previous(str(results))
    assert not results.exists() and (tmp_path / "results.previous.json").read_text() == '{"commit": "a"}'
    results.write_text('{"commit": "b"}')
    keep_previous(str(results))  # the one before that goes: only the last run is kept
    assert (tmp_path / "results.previous.json").read_text() == '{"commit": "b"}'
