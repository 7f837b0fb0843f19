"""`claimtrail simulate --start` moves the simulated window; `now` ends it at the current time."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from audit.cli.main import main


def _times(out: Path) -> list[datetime]:
    return [datetime.fromisoformat(json.loads(line)["time"]) for line in out.read_text().splitlines()]


def test_start_at_a_given_time(tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    assert main(["simulate", "--seed", "2", "--hours", "0.5", "--start", "2027-01-05T10:00:00Z", "--quiet",
                 "--out", str(out)]) == 0
    times = _times(out)
    start = datetime(2027, 1, 5, 10, tzinfo=UTC)
    assert times and start <= min(times) and max(times) <= start + timedelta(hours=0.5)


def test_start_now_ends_the_window_at_the_current_time(tmp_path: Path) -> None:
    out = tmp_path / "records.jsonl"
    before = datetime.now(UTC).replace(microsecond=0)
    assert main(["simulate", "--seed", "2", "--hours", "0.5", "--start", "now", "--quiet", "--out", str(out)]) == 0
    after = datetime.now(UTC)
    times = _times(out)
    assert times and before - timedelta(hours=0.5) <= min(times) and max(times) <= after


@pytest.mark.parametrize(("start", "reason"), [
    ("yesterday", "not an RFC 3339 time such as 2026-11-02T00:00:00Z"),
    ("2027-01-05T10:00:00", "the time needs a zone (Z or +hh:mm)"),
], ids=["not-a-time", "no-zone"])
def test_a_start_that_names_no_instant_is_one_line(capsys: pytest.CaptureFixture[str], start: str,
                                                   reason: str) -> None:
    assert main(["simulate", "--hours", "0.5", "--start", start, "--quiet"]) == 2
    assert capsys.readouterr().err == f"claimtrail simulate: --start {start!r}: {reason}, or 'now'\n"


SCENARIO = Path(__file__).parents[2] / "ingest" / "simulate" / "scenarios" / "cluster-day.yaml"


@pytest.mark.parametrize(("line", "reason"), [
    ('start: "yesterday"', "'yesterday': not an RFC 3339 time such as 2026-11-02T00:00:00Z"),
    ('start: "2027-01-05T10:00:00"', "'2027-01-05T10:00:00': the time needs a zone (Z or +hh:mm)"),
    ("start: 2027-01-05T10:00:00Z", 'expected a quoted RFC 3339 time such as "2026-11-02T00:00:00Z", got datetime'),
], ids=["not-a-time", "no-zone", "unquoted"])
def test_a_scenario_start_that_names_no_instant_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            line: str, reason: str) -> None:
    text = SCENARIO.read_text()
    start = next(ln for ln in text.splitlines() if ln.strip().startswith("start:"))
    scenario = tmp_path / "day.yaml"
    scenario.write_text(text.replace(start, start[:len(start) - len(start.lstrip())] + line))
    assert main(["simulate", "--scenario", str(scenario), "--hours", "0.5", "--quiet"]) == 2
    assert capsys.readouterr().err == (f"claimtrail simulate: day.yaml#3 Workload cluster-day: spec.start: "
                                       f"{reason}\n")


@pytest.mark.parametrize(("value", "reason"), [
    ('""', "must not be empty"),
    ('"prod\\teu"', "'prod\\teu': control characters are not allowed in a cluster name"),
], ids=["empty", "tab"])
def test_a_scenario_cluster_no_store_takes_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str,
                                                      reason: str) -> None:
    text = SCENARIO.read_text()
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("cluster:"))
    scenario = tmp_path / "day.yaml"
    scenario.write_text(text.replace(line, line[:len(line) - len(line.lstrip())] + f"cluster: {value}"))
    assert main(["simulate", "--scenario", str(scenario), "--hours", "0.5", "--quiet"]) == 2
    assert capsys.readouterr().err == f"claimtrail simulate: day.yaml#3 Workload cluster-day: spec.cluster: {reason}\n"
