"""``claimtrail.redacted`` lifts the receiver's output_digest check, so only what the exporter
sends there, a list of the JSON pointers redaction changed, is taken as saying so."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from audit.records import record_text
from audit.telemetry import schema as s
from ingest.otlp.decode import records_from_traces
from tests.otlp.payloads import span, traces
from tests.telemetry.records_factory import make_record

ORIGINAL = make_record()
# content changed after sealing, as redaction changes it: the digest no longer matches
CHANGED = dataclasses.replace(ORIGINAL, message="pod sha256:0123456789abcdef waited")


@pytest.mark.parametrize(
    ("redacted", "taken"),
    [
        pytest.param(["/message"], True, id="the-paths-redaction-changed"),
        pytest.param(None, False, id="absent"),
        pytest.param("x", False, id="a-string"),
        pytest.param(True, False, id="a-boolean"),
        pytest.param(["message"], False, id="not-a-pointer"),
    ],
)
def test_only_a_list_of_pointers_lifts_the_output_digest_check(redacted: Any, taken: bool) -> None:
    attrs: dict[str, Any] = {s.RECORD: record_text(CHANGED)}
    if redacted is not None:
        attrs[s.REDACTED] = redacted
    decoded = records_from_traces(traces(span(s.ROOT_SPAN, attrs)))
    assert ([r.message for r in decoded.records], len(decoded.rejected)) == (
        ([CHANGED.message], 0) if taken else ([], 1))
    if not taken:
        (item,) = decoded.rejected
        expected = s.REDACTED if redacted is not None else "output_digest"
        assert expected in item.error
