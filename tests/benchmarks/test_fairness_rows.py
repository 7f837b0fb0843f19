"""The rows of ``benchmarks.bench_fairness``: the engine's carry the targets of #16, the baseline's
(FIFO with backfill) none, and each tenant's p99 wait is set against another day's."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from benchmarks import bench_fairness as bf


def test_the_engine_rows_carry_the_targets_and_the_baseline_rows_none(monkeypatch):
    monkeypatch.setattr(bf, "HOURS", 2.0)  # a short day: the rows, not the figures, are under test
    day = bf._day("", None, SimpleNamespace(speed=lambda: 1.0), bf.FIFO_BACKFILL)
    engine = bf._rows("best-effort queueing", day)
    baseline = bf._rows("best-effort queueing", day, bf.BASELINE)
    assert [r["target"] for r in engine] == [">= 0.95", "<= 3", "<= 5", "", ""]
    assert [r["target"] for r in baseline] == ["", "", "", "", ""]
    assert [r["name"].split(": ")[-1] for r in baseline] == [
        "Jain under contention", "worst/best tenant p99 wait", "pending pod-minutes while an allowed tier fit",
        "fallback regret", "decisions/s"]
    starving = ", ".join(f"{t['tenant']} {t['starving_pods']}" for t in day["fairness"]["tenants"] if t["pods_started"])
    assert baseline[1]["note"].endswith(f"; pods past the starvation timeout: {starving}")
    # a 2-hour day ends before the noon change: one fallback all day
    assert baseline[0]["name"].startswith(
        f"{bf.DAY_NAME}, FIFO with backfill (fairness off), immediate fallback, best-effort queueing: ")


def _day_of(p99: dict[str, float | None]) -> dict[str, object]:
    """A day whose tenants have these p99 waits; None: the tenant started no pod."""
    return {"fairness": {"tenants": [{"tenant": t, "wait_p99_s": v, "pods_started": int(v is not None)}
                                     for t, v in p99.items()]}}


@pytest.mark.parametrize(("mine", "base", "value", "note"), [
    pytest.param({"a": 120.0, "b": 30.0}, {"a": 100.0, "b": 60.0}, 1.2, "a 120s vs 100s; b 30s vs 60s (worst: a)",
                 id="the-tenant-whose-wait-grew-most"),
    pytest.param({"a": 6230.0, "b": 645.0}, {"a": 3509.0, "b": 1638.0}, 1.78,
                 "a 6,230s vs 3,509s; b 645s vs 1,638s (worst: a)", id="default-day-team-b-against-the-baseline"),
    pytest.param({"a": 50.0, "b": 50.0}, {"a": 100.0, "b": 100.0}, 0.5, "a 50s vs 100s; b 50s vs 100s (worst: b)",
                 id="a-tie-names-the-last-tenant"),
    pytest.param({"a": 120.0, "b": 30.0, "c": None}, {"a": 100.0, "b": 60.0, "c": None}, 1.2,
                 "a 120s vs 100s; b 30s vs 60s (worst: a)", id="a-tenant-that-started-no-pod-is-left-out"),
])
def test_p99_against_gives_the_worst_tenants_ratio_and_every_tenants_waits(mine, base, value, note):
    row = bf.p99_against(_day_of(mine), _day_of(base), "what", "<= 9")
    assert (row["name"], row["value"], row["unit"], row["target"], row["note"]) == (
        f"{bf.DAY_NAME}, what", value, "x", "<= 9", note)
