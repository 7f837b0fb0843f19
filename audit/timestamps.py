"""Times as the project writes and reads them: RFC 3339 text and milliseconds since the epoch.

Every layer parses and formats times through here, so a time has one reading everywhere: a
trailing ``Z`` means UTC, fractions beyond milliseconds are truncated when a time becomes
milliseconds, and formatted times are UTC with a ``Z``. What a user gives (window bounds on the
command line, a scenario's start) is read by ``parse_zoned_ms``, which refuses a time without its
offset as the API's query parameters do; the times of records and events must have the form
``is_rfc3339`` checks, offset included. Nothing here reads the clock: callers that need
"now" pass it in.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)


def parse_rfc3339(text: str, *, naive_is_utc: bool = True) -> datetime:
    """A datetime; ``Z`` means UTC, and so does a missing zone unless ``naive_is_utc`` is False
    (then the result is naive, for inputs that must name their zone). ValueError when not a time."""
    t = text.strip()
    if t.endswith(("Z", "z")):
        t = t[:-1] + "+00:00"
    parsed = datetime.fromisoformat(t)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None and naive_is_utc else parsed


# RFC 3339 date-times as records and events carry them: a "T" (or a space), at most microseconds,
# then the offset. The store parses the same text again in SQL (parseDateTime64BestEffort), and on
# this form both parsers agree to the millisecond. RFC 3339 has no local times: a text without its
# offset names no instant, and reading it as UTC made replay report the recorded time as changed.
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})")
_RFC3339_ANY_ZONE = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})?")


def is_rfc3339(text: str, *, offset_required: bool = True) -> bool:
    """Whether ``text`` has the form of an RFC 3339 date-time (its values are for ``parse_rfc3339``
    to judge: a 13th month has the form). ``offset_required=False`` also takes a time without one."""
    return (_RFC3339 if offset_required else _RFC3339_ANY_ZONE).fullmatch(text) is not None


# a date-time close to that form: either case of T and Z, any count of fraction digits, any zone
_NEAR_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})?")


def rfc3339_form_problem(text: str, *, offset_required: bool = True) -> str | None:
    """None when ``text`` has the form ``is_rfc3339`` takes; else, for a text that is nearly a
    date-time of that form, what keeps it from being one (a generic refusal tells a user who sent
    Go's nanoseconds or a lower-case ``z`` nothing), and for any other text ``NOT_A_TIME``."""
    if is_rfc3339(text, offset_required=offset_required):
        return None
    near = _NEAR_RFC3339.fullmatch(text)
    if near is None:
        return NOT_A_TIME
    fraction, zone = near.group(1), near.group(2)
    if fraction is not None and len(fraction) > 6:
        return f"{len(fraction)} fraction digits: at most 6 (microseconds) are taken"
    if "t" in text[10:11] or zone == "z":
        return "write T and Z in upper case"
    return ZONE_REQUIRED


def datetime_ms(value: datetime) -> int:
    """Milliseconds since the epoch, truncated (exact: timedelta floor division, no float)."""
    return (value - EPOCH) // _ONE_MS


# RFC 3339 writes four-digit years: every time a record or an event carries lies between these
EARLIEST_MS = datetime_ms(datetime(1, 1, 1, tzinfo=UTC))
LATEST_MS = datetime_ms(datetime(9999, 12, 31, 23, 59, 59, 999_000, tzinfo=UTC))
HOUR_MS = 3_600_000


def window_problem(start_ms: float, hours: float) -> str:
    """Why ``hours`` from ``start_ms`` is no window whose times can be written ('' when it is):
    it must start and end within the four-digit years RFC 3339 has."""
    if start_ms < EARLIEST_MS:
        return f"the window would start before {format_time_ms(EARLIEST_MS)}, the first time RFC 3339 can write"
    if start_ms + hours * HOUR_MS > LATEST_MS:
        return f"the window would end after {format_time_ms(LATEST_MS)}, the last time RFC 3339 can write"
    return ""


NOT_A_TIME = "not an RFC 3339 time such as 2026-11-02T00:00:00Z"
ZONE_REQUIRED = "the time needs a zone (Z or +hh:mm)"


def parse_zoned_ms(text: str) -> int:
    """Milliseconds since the epoch of a time a user gave, which must name its offset: RFC 3339
    has no local times, and reading one as UTC would move a window by the user's offset without a
    word. ValueError saying which of the two is wrong, for a message that names the input."""
    try:
        parsed = parse_rfc3339(text, naive_is_utc=False)
    except ValueError:
        raise ValueError(NOT_A_TIME) from None
    if parsed.tzinfo is None:
        raise ValueError(ZONE_REQUIRED)
    return datetime_ms(parsed)


_PARSED: dict[str, int] = {}


def parse_time_ms(text: str) -> int:
    """RFC 3339 (``2026-11-01T00:00:00Z`` or with fractional seconds) -> ms since the epoch.

    Memoised: world events repeat the same instants many times."""
    hit = _PARSED.get(text)
    if hit is not None:
        return hit
    if len(_PARSED) > 100_000:
        _PARSED.clear()
    value = _PARSED[text] = datetime_ms(parse_rfc3339(text))
    return value


_FORMATTED: dict[int, str] = {}
# whole minutes -> "YYYY-MM-DDTHH:MM:": a simulated day has ~100k distinct instants, mostly in
# distinct seconds, but only 1,440 minutes, so strftime runs once a minute
_MINUTES: dict[int, str] = {}


def format_time_ms(ms: int) -> str:
    """ms since the epoch -> ``2026-11-02T00:00:00.000Z`` (memoised: simulations reuse instants)."""
    text = _FORMATTED.get(ms)
    if text is None:
        if len(_FORMATTED) > 100_000:
            _FORMATTED.clear()
        minutes = ms // 60_000  # floor, so the seconds and the fraction are never negative
        prefix = _MINUTES.get(minutes)
        if prefix is None:
            if len(_MINUTES) > 100_000:
                _MINUTES.clear()
            at = EPOCH + timedelta(minutes=minutes)
            # the year by hand: strftime's %Y writes year 999 as "999", which is no RFC 3339 time
            prefix = _MINUTES[minutes] = f"{at.year:04d}-" + at.strftime("%m-%dT%H:%M:")
        text = _FORMATTED[ms] = f"{prefix}{ms // 1000 % 60:02d}.{ms % 1000:03d}Z"
        # the text is read back at once (a world folding the event it stamps): its reading is known
        if len(_PARSED) > 100_000:
            _PARSED.clear()
        _PARSED[text] = ms
    return text



def format_utc(value: datetime, digits: int = 3) -> str:
    """``value`` in UTC as ``YYYY-MM-DDTHH:MM:SS[.f…]Z`` with 0, 3 or 6 fraction digits."""
    # isoformat, not strftime: %Y writes year 1 as "1", which no reader takes back as a time
    text = value.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds")
    return (text[:-7] if digits == 0 else text[:-(6 - digits)] if digits < 6 else text) + "Z"
