"""The p99 wait rows of ``benchmarks.bench_reservations``: a group of pods none of which started
has no p99 wait, and its row says so (null, like a rate over no pods) rather than 0 s."""

from __future__ import annotations

import pytest

from audit.metrics.waits import WaitStats
from benchmarks.bench_reservations import p99_row


@pytest.mark.parametrize(("stats", "value", "note"), [
    pytest.param(WaitStats([60_000, 120_000, 3_600_000], pending_at_end=1, longest_wait_ms=7_200_000), 3600.0,
                 "3 started; 1 still pending at the end (longest 7,200 s)", id="started-pods-rank-their-waits"),
    pytest.param(WaitStats([], pending_at_end=2, longest_wait_ms=5_400_000), None,
                 "0 started; 2 still pending at the end (longest 5,400 s)", id="none-started-is-null-not-zero"),
])
def test_a_p99_row_is_null_when_no_pod_of_the_group_started(stats: WaitStats, value: float | None, note: str) -> None:
    row = p99_row("8-GPU pods p99 wait", stats)
    assert (row["name"], row["value"], row["unit"], row["note"]) == ("8-GPU pods p99 wait", value, "s", note)
