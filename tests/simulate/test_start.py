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


def test_a_start_that_is_no_time_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--hours", "0.5", "--start", "yesterday", "--quiet"]) == 2
    assert capsys.readouterr().err == (
        "claimtrail simulate: --start 'yesterday': not an RFC 3339 time (2026-11-02T00:00:00Z) or 'now'\n")
