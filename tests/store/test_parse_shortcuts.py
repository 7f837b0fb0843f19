"""Ingest validates a record from the line it came in as, not from the parsed value written out
again: the two must give the same record, or the same error, for every line, the odd ones
included."""

from __future__ import annotations

import json

import pytest

from audit.records import RecordError, to_jsonl, validate_record
from tests.store.factory import make_record

LINE = to_jsonl([make_record(4)]).strip()


def _with_detail(value: str) -> str:
    """The record's line with a blocker whose detail holds ``value`` as written."""
    data = json.loads(LINE)
    data["blockers"] = [{"code": "quota_exhausted", "tier": 0, "detail": {"zz": "PLACEHOLDER"}}]
    return json.dumps(data).replace('"PLACEHOLDER"', value)


def _outcome(data: object, text: bytes | None) -> str:
    """The record or the error, as text: NaN is not equal to itself, its repr is."""
    try:
        return repr(validate_record(data, text))
    except RecordError as exc:
        return repr(("error", exc.path, str(exc)))


LINES = {
    "the canonical line": LINE,
    "a float beyond double range": _with_detail("1E400"),
    "negative zero": _with_detail("-0.0"),
    "a float that rounds": _with_detail("1.0000000000000001"),
    "an integer beyond 64 bits": _with_detail(str(2**70)),
    "NaN and infinity": _with_detail("[NaN, -Infinity]"),
    "escaped non-ASCII and a surrogate pair": _with_detail('"\\u00e9 \\ud83d\\ude00"'),
    "a lone surrogate": _with_detail('"\\ud800"'),
    "a duplicate key": LINE[:-1] + ',"tenant":"team-b"}',
    "a carriage return at the end": LINE + "\r",
    "a string where a number belongs": LINE.replace('"attempt":0', '"attempt":"0"'),
    "a float where an integer belongs": LINE.replace('"attempt":0', '"attempt":0.0'),
    "an unknown outcome": LINE.replace('"outcome":"allocated"', '"outcome":"maybe"'),
}


@pytest.mark.parametrize("line", LINES.values(), ids=LINES.keys())
def test_validating_the_line_itself_gives_what_validating_the_parsed_value_gives(line: str) -> None:
    raw = line.encode()
    data = json.loads(raw)
    assert _outcome(data, raw) == _outcome(data, None)


@pytest.mark.parametrize("raw", [
    b"\xef\xbb\xbf" + LINE.encode(),  # a byte-order mark, which json.loads reads past
    LINE.encode("utf-16-le"),  # json.loads detects UTF-16; the validator reads UTF-8 only
], ids=["byte-order mark", "UTF-16"])
def test_a_line_json_decodes_but_the_validator_would_not_is_validated_from_its_value(raw: bytes) -> None:
    assert validate_record(json.loads(raw), raw) == validate_record(json.loads(LINE))
