"""Filter parsing and the explorer's wording of replay verdicts."""

from __future__ import annotations

import pytest

from dashboards.client import Filters, ReplayReport
from dashboards.explorer import describe_replay
from dashboards.filters import parse_instant
from dashboards.view import duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("2026-03-01T08:00:00Z", "2026-03-01T08:00:00Z", id="utc-instant"),
        pytest.param(" 2026-03-01 ", "2026-03-01T00:00:00Z", id="date-is-utc-midnight"),
        pytest.param("2026-03-01T08:30", "2026-03-01T08:30:00Z", id="time-without-zone-is-utc"),
        pytest.param("2026-03-01T10:00:00+02:00", "2026-03-01T08:00:00Z", id="offset-converted-to-utc"),
        pytest.param("", "", id="empty-means-unbounded"),
    ],
)
def test_time_filter_accepts_iso_8601(text: str, expected: str) -> None:
    assert parse_instant("since", text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # the window the API's figures name ends one millisecond past the last event: typed in, its
        # last instant must stay inside, or a pod bound or pending then drops out of every figure
        pytest.param("2026-11-02T23:59:24.157Z", "2026-11-02T23:59:24.157Z", id="milliseconds-of-the-api-window"),
        pytest.param("2026-11-02T23:59:24.5+01:00", "2026-11-02T22:59:24.500Z", id="tenths-converted-to-utc"),
        pytest.param("2026-11-02T23:59:24.000250Z", "2026-11-02T23:59:24.000250Z", id="microseconds-as-the-api-reads-them"),
    ],
)
def test_time_filter_keeps_the_fraction_of_a_second(text: str, expected: str) -> None:
    assert parse_instant("until", text) == expected


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", "08:00; DROP TABLE decisions"], ids=["word", "bad-month", "injection"])
def test_time_filter_rejects_other_text_naming_the_field(text: str) -> None:
    with pytest.raises(ValueError, match=r"^filter `until`: .* is not an ISO 8601 time"):
        parse_instant("until", text)


def test_filters_send_only_what_is_set() -> None:
    assert Filters(tenant="alpha", model="H100").params() == {"tenant": "alpha", "model": "H100"}
    assert Filters().params() == {}


@pytest.mark.parametrize(
    ("body", "expected", "ok"),
    [
        pytest.param({"runs": [{"decision_id": "abcdef0123", "match": True}]},
                     "Match: re-executing abcdef01 reproduced the recorded output digest.", True, id="match"),
        pytest.param({"runs": [{"decision_id": "abcdef0123", "match": False, "cause": "policy_changed", "diff": "tier 0"}]},
                     "Mismatch (policy_changed) for abcdef01: tier 0", False, id="mismatch-with-cause"),
        pytest.param({"runs": [{"decision_id": "abcdef0123", "match": False, "cause": "output_mismatch",
                                "diff": ["outcome: a != b", "node: x != y", "tier 0", "tier 1", "tier 2"]}]},
                     "Mismatch (output_mismatch) for abcdef01: outcome: a != b; node: x != y; tier 0; … 2 more", False,
                     id="mismatch-with-a-list-of-differences"),
        pytest.param({"results": [{"decision_id": "other", "match": True}]},
                     "The replay answer did not mention decision abcdef0123.", False, id="answer-about-another-decision"),
        pytest.param({"job_id": "j-7"}, "Replay queued as job j-7.", True, id="queued-as-job"),
    ],
)
def test_replay_verdict_wording(body: dict, expected: str, ok: bool) -> None:
    assert describe_replay(ReplayReport(body), "abcdef0123") == (expected, ok)


@pytest.mark.parametrize(
    ("ms", "shown"),
    [
        pytest.param(0, "0.0 s", id="zero"),
        pytest.param(119_949, "119.9 s", id="just-under-two-minutes-stays-seconds"),
        pytest.param(5_737_600, "95.6 min", id="minutes"),
        pytest.param(7_200_000, "2.0 h", id="two-hours"),
    ],
)
def test_waits_read_in_the_largest_sensible_unit(ms: float, shown: str) -> None:
    assert duration(ms) == shown


def test_a_cell_missing_from_a_folded_row_reads_as_unknown_not_zero() -> None:
    from dashboards.view import maybe, pct

    folded = {"tenant": "(others)", "decisions": 5}
    assert (maybe(folded, "wait_p99_ms"), duration(maybe(folded, "wait_p99_ms")), pct(maybe(folded, "first_choice_rate"))) == (None, "–", "–")
    assert maybe({"wait_p99_ms": 0}, "wait_p99_ms") == 0.0
