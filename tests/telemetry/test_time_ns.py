"""A record's time in nanoseconds: times within a minute already seen read like any other."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.telemetry import TelemetryError
from audit.telemetry.timefmt import time_ns
from tests.telemetry.records_factory import make_record

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _engine_form(instant: datetime) -> str:
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{instant.microsecond // 1000:03d}Z"


@settings(max_examples=200, deadline=None)
@given(
    minute=st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1)).map(
        lambda d: d.replace(second=0, microsecond=0, tzinfo=UTC)),
    offsets_ms=st.lists(st.integers(0, 59_999), min_size=2, max_size=4),
)
def test_every_time_of_a_minute_is_its_exact_nanoseconds_however_it_is_read(minute: datetime, offsets_ms: list[int]) -> None:
    for offset in offsets_ms:  # the first parses in full, the others are read within its minute
        instant = minute + timedelta(milliseconds=offset)
        assert time_ns(make_record(time=_engine_form(instant))) == (instant - EPOCH) // timedelta(microseconds=1) * 1000


@pytest.mark.parametrize("text", ["2026-11-02T07:15:60.000Z", "2026-11-02T07:15:0a.000Z", "2026-11-02T07:15:05.0x0Z",
                                  "2026-11-02T07:15:٠٥.000Z"])
def test_a_time_that_is_not_one_within_a_known_minute_is_refused_naming_the_decision(text: str) -> None:
    time_ns(make_record(time="2026-11-02T07:15:00.000Z"))  # the minute is known
    record = make_record(time=text)
    with pytest.raises(TelemetryError, match=rf"DecisionRecord {record.decision_id}: time: "):
        time_ns(record)
