"""``--load``: the arithmetic that sets a trace's pressure, and a contended trace day on the real trace.

The arithmetic rows are worked by hand; the trace rows read the public Alibaba traces through the
``trace_dir`` fixture (skipped, naming ``make traces``, when they are absent)."""

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.cli.cmd_simulate import summary_table
from audit.cli.main import main
from audit.metrics import fold_lifecycle
from audit.metrics.busy import cluster_gpus, peak_busy
from audit.metrics.window import Window
from ingest.simulate.load import (
    DEFAULT_LOAD,
    LoadError,
    arrival_scale,
    check_load,
    compress,
    compression_factor,
    lognormal_mean_clipped,
    mix_gpu_ms_per_hour,
    offered_gpu_ms,
)
from ingest.simulate.loop import Job, simulate
from ingest.simulate.traces import openb_scenario, spot_scenario
from tests.simulate.runs import replay_every_decision

HOUR = 3_600_000
MIN = 60_000


def _job(name, at, size=1, duration=MIN):
    return Job(name, "qos-ls", at, size, duration)


@pytest.mark.parametrize(("jobs", "horizon", "gpu_ms"), [
    # 2 GPUs × 30 min + 1 GPU × 3 h counted up to 1 h = 2 GPU-hours
    pytest.param([_job("a", 0, 2, 30 * MIN), _job("b", 0, 1, 3 * HOUR)], HOUR, 2 * HOUR, id="long-run-clipped"),
    pytest.param([_job("a", 0, 8, 10 * MIN)], HOUR, 80 * MIN, id="short-run-whole"),
    pytest.param([], HOUR, 0, id="nothing"),
])
def test_offered_gpu_time_counts_each_run_up_to_the_window(jobs, horizon, gpu_ms):
    assert offered_gpu_ms(jobs, horizon) == gpu_ms


@pytest.mark.parametrize(("load", "gpus", "carried", "span", "offered", "k"), [
    # k × offered / span + carried = load × gpus
    pytest.param(0.8, 4, 0, 10 * HOUR, 2 * HOUR, 16.0, id="no-running-pods"),   # 0.8·4·10/2
    pytest.param(1.0, 10, 2, 100, 40, 20.0, id="running-pods-count-as-load"),   # (10−2)·100/40
    pytest.param(0.5, 100, 0, 50, 100, 25.0, id="half-load"),                   # 50·50/100
])
def test_compression_factor_hits_the_load(load, gpus, carried, span, offered, k):
    assert compression_factor(load, gpus, carried, span, offered) == pytest.approx(k)


def test_running_pods_above_the_load_are_refused():
    with pytest.raises(LoadError, match=r"--load 0.1: the trace's running pods alone hold 2 of 10 GPUs"):
        compression_factor(0.1, 10, 2, 100, 40)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_load_must_be_a_positive_number(bad):
    with pytest.raises(LoadError, match="must be a number > 0"):
        check_load(bad)


def test_compression_keeps_order_and_cycles_the_trace_until_the_window_is_full():
    # span 10 ms, k = 2: a trace cycle lasts 5 ms; window [100, 108)
    jobs = [_job("a", 100), _job("b", 106)]
    carried = [_job("c", 100)]
    out = compress(jobs, carried, 2.0, 10, 100, 108)
    # cycle 0: a at 0/2, b at 6/2; cycle 1: a at (10+0)/2, b at (10+6)/2 = 8 is past the window
    assert [(j.name, j.arrival_ms) for j in out] == [("a", 100), ("c", 100), ("b", 103), ("a-r1", 105)]
    assert all(j.duration_ms == MIN and j.size == 1 for j in out)  # runtimes are never compressed


@pytest.mark.parametrize(("median", "sigma", "horizon", "mean"), [
    pytest.param(60, 0, 30, 30.0, id="fixed-run-longer-than-window"),
    pytest.param(60, 0, 120, 60.0, id="fixed-run-shorter-than-window"),
    # 60·e^0.5·Φ(−1) + 60·(1 − Φ(0)) = 98.9233·0.158655 + 30
    pytest.param(60, 1, 60, 45.6946, id="window-at-the-median"),
    pytest.param(60, 1, 1e12, 98.9233, id="unclipped-lognormal-mean"),  # 60·e^0.5
])
def test_lognormal_runtime_clipped_to_the_window(median, sigma, horizon, mean):
    assert lognormal_mean_clipped(median, sigma, horizon) == pytest.approx(mean, abs=1e-4)


def test_arrival_scale_hits_the_load():
    # 10 pods/h of 1 or 3 GPUs (mean 2) for 30 min each: 10 GPU-hours per hour of arrivals
    per_hour = mix_gpu_ms_per_hour([(10.0, ((1, 0.5), (3, 0.5)), 30.0, 0.0)], HOUR)
    assert per_hour == 10 * HOUR
    # half of 100 GPUs: 50 pods/h × 2 GPUs × 0.5 h, so 5 times the rate
    assert arrival_scale(0.5, 100, per_hour) == pytest.approx(5.0)


# ---- the real traces ----------------------------------------------------------------------------

@pytest.mark.slow
def test_openb_hour_at_the_default_load_is_contended_and_reports_fallback_and_fairness(trace_dir):
    # an hour: fairness under contention is judged per whole hour
    result = simulate(openb_scenario(trace_dir, seed=1, hours=1), seed=1)
    assert cluster_gpus(result.world) == 6212
    assert any(r.outcome == "unschedulable" for r in result.records)  # pods wait behind others
    text = summary_table(result)
    busy = re.search(r"peak busy GPUs: ([\d,]+) of 6,212 \((\d+\.\d)%\)", text)
    assert busy and float(busy.group(2)) >= 80.0
    first = re.search(r"first-choice rate: (\d+\.\d)% of ([\d,]+) DRA pods with alternatives; fallbacks ([\d,]+), "
                      r"regretted ([\d,]+)", text)
    assert first and 0 < float(first.group(1)) < 100 and int(first.group(3).replace(",", "")) > 0
    jain = re.search(r"Jain's index: whole window (\d\.\d+) .* under contention (\d\.\d+) over (\d+) contended", text)
    assert jain, text
    assert 0 < float(jain.group(1)) < 1 and 0 < float(jain.group(2)) <= 1 and int(jain.group(3)) >= 1
    assert "G3 -> G2" in text  # the few G3 GPUs are taken: pods fall back to G2


@pytest.mark.slow
def test_spot_half_hour_at_the_default_load_is_contended(trace_dir):
    result = simulate(spot_scenario(trace_dir, seed=1, hours=0.5, load=DEFAULT_LOAD), seed=1)
    life = fold_lifecycle(result.events, result.world.cluster)
    peak = peak_busy(life.pods, Window(result.start_ms, result.end_ms))
    assert cluster_gpus(result.world) == 10412
    assert peak.devices / 10412 >= 0.8
    assert any(r.outcome == "unschedulable" for r in result.records)


@pytest.mark.slow
def test_every_decision_of_a_trace_quarter_hour_with_queueing_and_fallback_replays(trace_dir):
    result = simulate(openb_scenario(trace_dir, seed=2, hours=0.25, load=0.5), seed=2)
    assert any(r.outcome == "unschedulable" for r in result.records)
    assert any(r.outcome == "allocated" and r.allocated_model != r.preferred_model for r in result.records)
    assert replay_every_decision(result) == len(result.records)


@pytest.mark.parametrize(("argv", "message"), [
    pytest.param(["--load", "0"], "--load 0: must be a number > 0", id="zero"),
    pytest.param(["--load", "0.001"], "--load 0.001: the trace's running pods alone hold 38 of 6,212 GPUs",
                 id="below-the-running-pods"),
])
def test_bad_load_gives_one_line(argv, message, trace_dir, capsys):
    assert main(["simulate", "--quiet", "--trace", "openb-2023", "--trace-dir", trace_dir, "--hours", "0.1", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(("trace", "pods"), [("openb-2023", "18,374,252,471,194"), ("spot-2026", "5,890,911,015,626")])
def test_a_load_that_would_bring_more_pods_than_a_run_simulates_is_refused_before_they_are_made(trace, pods,
                                                                                              trace_dir, capsys):
    assert main(["simulate", "--quiet", "--trace", trace, "--trace-dir", trace_dir, "--hours", "1",
                 "--load", "1e9"]) == 2
    assert capsys.readouterr().err == (f"claimtrail simulate: --load 1e+09: about {pods} pods would arrive in the "
                                       "window, more than the 2,000,000 a run simulates; give a smaller load or "
                                       "fewer hours\n")


def test_load_without_a_trace_is_refused(capsys):
    assert main(["simulate", "--quiet", "--hours", "0.1", "--load", "1.5"]) == 2
    err = capsys.readouterr().err
    assert "--load 1.5: only for trace-driven runs (--trace)" in err and "Traceback" not in err


@settings(max_examples=60, deadline=None)
@given(offsets=st.lists(st.integers(0, 999), min_size=1, max_size=20), k=st.floats(0.5, 50),
       window=st.integers(1, 5000))
def test_compressed_arrivals_stay_in_the_window_at_their_scaled_offsets_with_unique_names(offsets, k, window):
    span, start = 1000, 10_000
    jobs = [_job(f"p{i}", start + off) for i, off in enumerate(sorted(offsets))]
    out = compress(jobs, [], k, span, start, start + window)
    assert all(start <= j.arrival_ms < start + window for j in out)
    assert len({j.name for j in out}) == len(out)
    # a pod of cycle m arrives at (m·span + its offset) / k into the window
    by_cycle: dict[int, list[Job]] = {}
    for j in out:
        cycle = int(j.name.split("-r")[1]) if "-r" in j.name else 0
        by_cycle.setdefault(cycle, []).append(j)
        original = jobs[int(j.name.split("-")[0][1:])]
        assert j.arrival_ms == start + int((cycle * span + (original.arrival_ms - start)) / k)
    # nothing that fits the window is left out: cycle 0 holds every pod whose compressed time is inside
    assert len(by_cycle.get(0, [])) == sum(1 for j in jobs if start + int((j.arrival_ms - start) / k) < start + window)


def test_recorded_load_is_refused_for_the_synthetic_spot_mix(trace_dir, capsys):
    argv = ["simulate", "--quiet", "--trace", "spot-2026", "--trace-dir", trace_dir, "--hours", "0.1", "--load", "recorded"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--load recorded: spot-2026 has no recorded arrivals" in err and "Traceback" not in err


@pytest.mark.parametrize(("text", "parsed"), [("1.2", 1.2), ("recorded", "recorded"), ("0", 0.0)])
def test_load_takes_a_number_or_recorded(text, parsed):
    from audit.cli.cmd_simulate import _load_value

    assert _load_value(text) == parsed


def test_load_that_is_neither_a_number_nor_recorded_is_named():
    import argparse

    from audit.cli.cmd_simulate import _load_value

    with pytest.raises(argparse.ArgumentTypeError, match="'busy': a number such as 1.2, or 'recorded'"):
        _load_value("busy")
