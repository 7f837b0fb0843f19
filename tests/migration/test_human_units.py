"""Migration figures read in units: times in ms/s/min/h, shares in % and differences in points."""

from __future__ import annotations

import math

import pytest

from audit.migration import human_difference, human_value


@pytest.mark.parametrize(("metric", "value", "text"), [
    pytest.param("scheduling_latency_ms", 318_800.0, "5.3 min", id="minutes-not-3.188e+05"),
    pytest.param("time_pending_ms", 999.0, "999 ms", id="under-a-second"),
    pytest.param("time_pending_ms", 2000.0, "2.0 s", id="seconds"),
    pytest.param("time_pending_ms", 7_200_000.0, "2.0 h", id="hours"),
    pytest.param("time_pending_ms", -2031.0, "-2.0 s", id="negative-time"),
    pytest.param("success_rate", 0.0701, "7.0 pp", id="share-difference-in-points"),
    pytest.param("gpu_utilisation", -0.0, "0.0 pp", id="no-negative-zero"),
    pytest.param("fallback_rate", math.nan, "-", id="not-measured"),
])
def test_differences_carry_their_unit(metric: str, value: float, text: str) -> None:
    assert human_difference(metric, value) == text


@pytest.mark.parametrize(("metric", "value", "text"), [
    pytest.param("success_rate", 0.4174, "41.7 %", id="share"),
    pytest.param("gpu_utilisation", 0.9958, "99.6 %", id="utilisation"),
    pytest.param("scheduling_latency_ms", 46_346.0, "46.3 s", id="time"),
])
def test_cohort_figures_carry_their_unit(metric: str, value: float, text: str) -> None:
    assert human_value(metric, value) == text
