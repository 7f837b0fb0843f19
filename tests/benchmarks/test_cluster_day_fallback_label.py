"""Row names of the fairness benchmarks state the fallback each day's policies use, read from the
policies: the default scenario's noon change brings a wait for the preferred model, so its day is
not an immediate-fallback day."""

from __future__ import annotations

import pytest

from benchmarks.cluster_day import cluster_day, fallback_label


def _fallback(spec_fallback):
    def edit(spec):
        spec["fallback"] = dict(spec_fallback)
    return edit


@pytest.mark.parametrize(("edit", "hours", "want"), [
    pytest.param(None, 24.0, "immediate fallback, then wait-for-preferred fallback (wait 5m) from 12h00m",
                 id="the-default-policies-change-mode-at-noon"),
    pytest.param(None, 12.0, "immediate fallback", id="a-day-that-ends-at-the-change-never-sees-it"),
    pytest.param(_fallback({"mode": "immediate"}), 24.0, "immediate fallback", id="the-immediate-variant-all-day"),
    pytest.param(_fallback({"mode": "adaptive", "maxWait": "10m"}), 24.0, "adaptive fallback (maxWait 10m)",
                 id="the-adaptive-variant-all-day"),
    pytest.param(_fallback({"mode": "wait-for-preferred", "wait": "90s"}), 24.0,
                 "wait-for-preferred fallback (wait 1m30s)", id="a-wait-in-seconds"),
    pytest.param(_fallback({"mode": "strict"}), 24.0, "strict fallback", id="strict"),
])
def test_fallback_label_names_every_mode_the_days_policies_use(edit, hours, want):
    assert fallback_label(cluster_day(edit), hours) == want
