"""A simulated day timed slice by slice: the same day as an uncut run, its rate normalised per slice."""

from __future__ import annotations

import itertools

import pytest

from audit.records import to_jsonl
from benchmarks.interleaved import of_work
from benchmarks.paced_day import SLICES, paced_day
from ingest.simulate.loop import Simulator
from ingest.simulate.scenario import load_scenario_text
from tests.simulate.runs import SCENARIO, cluster_day


def _scenario():  # type: ignore[no-untyped-def]
    with open(SCENARIO, encoding="utf-8") as fh:
        return load_scenario_text(fh.read(), "cluster-day.yaml")


def test_a_day_cut_into_slices_makes_the_records_and_events_of_an_uncut_one() -> None:
    speeds = itertools.cycle([1.0, 0.5, 2.0])
    paced = paced_day(Simulator(_scenario(), seed=5, hours=5.0), lambda: next(speeds))
    whole = cluster_day(5, 5.0)
    assert len(whole.records) > 1000
    assert to_jsonl(paced.result.records) == to_jsonl(whole.records)
    assert [e.to_dict() for e in paced.result.events] == [e.to_dict() for e in whole.events]
    assert (paced.result.jobs, paced.result.finished, paced.result.failed) == (whole.jobs, whole.finished, whole.failed)


def test_each_slice_takes_the_faster_pass_around_it() -> None:
    speeds = iter([1.0, 0.5] * (SLICES + 1))  # passes alternate: every round has a 1.0 beside it
    paced = paced_day(Simulator(_scenario(), seed=5, hours=1.0), lambda: next(speeds))
    assert paced.rate.speed == 1.0
    assert paced.rate.measured == pytest.approx(paced.rate.normalised)
    assert paced.row()["scale"] == "inline"


@pytest.mark.parametrize(("slices", "measured", "normalised"), [
    # 100 items in 1 s at speed 1.0, 100 in 2 s at 0.5 (1 s on the reference machine): 200 in 3 s, 200 in 2 s
    ([(100.0, 1.0, 1.0), (100.0, 2.0, 0.5)], 200 / 3, 100.0),
    # a slice that made nothing still counts its time
    ([(0.0, 1.0, 2.0), (60.0, 1.0, 1.0)], 30.0, 20.0),
])
def test_a_rate_over_slices_is_items_over_each_slices_reference_time(
        slices: list[tuple[float, float, float]], measured: float, normalised: float) -> None:
    figure = of_work(slices, "decisions/s")
    assert (figure.measured, figure.normalised) == (pytest.approx(measured), pytest.approx(normalised))
    assert figure.factor_of("decisions/s") == pytest.approx(measured / normalised)


def test_a_rate_over_slices_refuses_times_and_nothing() -> None:
    with pytest.raises(ValueError, match="a rate"):
        of_work([(1.0, 1.0, 1.0)], "ms")
    with pytest.raises(ValueError, match="at least one slice"):
        of_work([], "decisions/s")
