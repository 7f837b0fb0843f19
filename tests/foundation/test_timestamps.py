"""Every layer reads and writes times through ``audit.timestamps``: one reading of each text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit.timestamps import datetime_ms, format_time_ms, format_utc, is_rfc3339, parse_rfc3339, parse_time_ms

NOV_2 = 1_793_577_600_000  # 2026-11-02T00:00:00Z, by hand: 20,759 days after 1970-01-01 × 86,400,000


@pytest.mark.parametrize(("text", "ms"), [
    ("2026-11-02T00:00:00Z", NOV_2),
    ("2026-11-02T00:00:00.000Z", NOV_2),
    ("2026-11-02T00:00:00", NOV_2),                    # no zone: UTC
    ("2026-11-02T01:00:00+01:00", NOV_2),              # an offset moves the instant
    ("2026-11-02T00:00:00.123999Z", NOV_2 + 123),      # fractions below a millisecond are cut, not rounded
    ("2026-11-02 00:00:00.5Z", NOV_2 + 500),
    (" 2026-11-02T00:00:00z ", NOV_2),
    ("1970-01-01T00:00:00Z", 0),
])
def test_rfc3339_texts_become_epoch_milliseconds(text: str, ms: int) -> None:
    assert parse_time_ms(text) == ms


@pytest.mark.parametrize("text", ["", "yesterday", "2026-13-01T00:00:00Z", "2026-11-02T25:00:00Z"])
def test_what_is_not_a_time_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_time_ms(text)


@pytest.mark.parametrize(("text", "with_offset", "any_zone"), [
    ("2026-11-02T00:00:00Z", True, True),
    ("2026-11-02T00:00:00.123456+05:30", True, True),
    ("2026-11-02 00:00:00.5-08:00", True, True),
    ("2026-11-02T00:00:00", False, True),
    ("2026-11-02T00:00:00.000", False, True),
    ("2026-11-02T00:00:00.1234567Z", False, False),
    ("99999-11-02T00:00:00Z", False, False),
    ("2026-11-02T00:00:00Z\n", False, False),
    ("yesterday", False, False),
])
def test_the_form_of_a_record_time_needs_its_offset(text: str, with_offset: bool, any_zone: bool) -> None:
    assert is_rfc3339(text) is with_offset
    assert is_rfc3339(text, offset_required=False) is any_zone


def test_a_zone_can_be_required() -> None:
    assert parse_rfc3339("2026-11-02T00:00:00", naive_is_utc=False).tzinfo is None
    assert parse_rfc3339("2026-11-02T00:00:00Z", naive_is_utc=False).tzinfo is not None


@pytest.mark.parametrize(("digits", "text"), [
    (0, "2026-11-02T03:04:05Z"), (3, "2026-11-02T03:04:05.123Z"), (6, "2026-11-02T03:04:05.123456Z")])
def test_format_utc_writes_utc_with_z_and_the_digits_asked(digits: int, text: str) -> None:
    local = datetime(2026, 11, 2, 5, 4, 5, 123456, tzinfo=timezone(timedelta(hours=2)))
    assert format_utc(local, digits) == text


@given(st.integers(min_value=-10**12, max_value=10_413_791_999_999))
def test_milliseconds_survive_a_round_trip_through_text(ms: int) -> None:
    text = format_time_ms(ms)
    assert text.endswith("Z") and len(text) == 24
    assert parse_time_ms(text) == ms
    # formatting tells the parser's memo what the text reads as: that must be the text's own reading
    assert datetime_ms(parse_rfc3339(text)) == ms
    assert datetime_ms(datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=ms)) == ms


@given(st.integers(min_value=-10**12, max_value=10_413_791_999_999), st.integers(min_value=-90_000, max_value=90_000))
def test_formatted_times_are_the_datetime_text_also_within_a_known_minute(ms: int, step: int) -> None:
    # the minute's text is memoised apart from the seconds and milliseconds: a neighbour reuses it
    for at in (ms, ms + step):
        expected = (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(milliseconds=at)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        assert format_time_ms(at) == expected


@pytest.mark.parametrize(("ms", "text"), [
    (NOV_2 + 999, "2026-11-02T00:00:00.999Z"),
    (NOV_2 + 1000, "2026-11-02T00:00:01.000Z"),
    (NOV_2 - 1, "2026-11-01T23:59:59.999Z"),
    (-1, "1969-12-31T23:59:59.999Z"),
    (NOV_2 + 59_999, "2026-11-02T00:00:59.999Z"),
    (NOV_2 + 60_000, "2026-11-02T00:01:00.000Z"),
    (-60_000, "1969-12-31T23:59:00.000Z"),
    (-60_001, "1969-12-31T23:58:59.999Z"),
])
def test_formatted_times_at_second_and_minute_boundaries(ms: int, text: str) -> None:
    assert format_time_ms(ms) == text


@pytest.mark.parametrize(("ms", "text"), [
    (-62_135_596_800_000, "0001-01-01T00:00:00.000Z"),
    (-30_610_310_400_000, "0999-12-31T00:00:00.000Z"),
    (-30_610_224_000_001, "0999-12-31T23:59:59.999Z"),
    (-30_610_224_000_000, "1000-01-01T00:00:00.000Z"),
])
def test_years_before_1000_are_written_with_four_digits(ms: int, text: str) -> None:
    assert format_time_ms(ms) == text
    assert is_rfc3339(text) and parse_time_ms(text) == ms
