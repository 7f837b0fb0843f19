"""A record whose values do not fit the store's columns is refused with the field named."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from audit.records import DecisionRecord
from audit.store import rows
from tests.store.factory import make_record


def _tier(**changes: Any) -> DecisionRecord:
    record = make_record(1)  # a fallback: two tiers
    return replace(record, tiers=[record.tiers[0], replace(record.tiers[1], **changes)])


CASES: dict[str, tuple[DecisionRecord, str, str]] = {
    "attempt above UInt16": (replace(make_record(1), attempt=2**16), "attempt", "65536 is outside 0..65535"),
    "negative seq": (replace(make_record(1), seq=-1), "seq", "-1 is outside 0..18446744073709551615"),
    "backoff above UInt32": (replace(make_record(1), backoff_ms=2**32), "backoff_ms", "is outside 0..4294967295"),
    "negative wait": (replace(make_record(1), wait_ms=-5), "wait_ms", "-5 is outside"),
    "steps above UInt32": (replace(make_record(1), steps=2**32), "steps", "4294967296 is outside"),
    "negative duration": (replace(make_record(1), duration_us=-1), "duration_us", "-1 is outside"),
    "schema version above UInt16": (replace(make_record(1), schema_version=70000), "schema_version", "70000"),
    "empty decision id": (replace(make_record(1), decision_id=""), "decision_id", "must not be empty"),
    "tier index below -1": (replace(make_record(1), tier_index=-2), "tier_index", "-2 is outside -1..32767"),
    "tier number above UInt8": (_tier(index=256), "tiers.1.index", "256 is outside 0..255"),
    "considered above UInt32": (_tier(considered=2**32), "tiers.1.considered", "4294967296 is outside"),
    "negative nodes evaluated": (_tier(nodes_evaluated=-1), "tiers.1.nodes_evaluated", "-1 is outside"),
    "reason count above UInt32": (_tier(reasons={"in_use": 2**32}), "tiers.1.reasons.in_use", "is outside"),
    "time without a date": (replace(make_record(1), time="08:00"), "time", "not an ISO 8601 time"),
}


@pytest.mark.parametrize(("record", "path", "message"), CASES.values(), ids=CASES.keys())
def test_a_value_outside_its_column_names_the_field(record: DecisionRecord, path: str, message: str) -> None:
    with pytest.raises(rows.RowError) as info:
        rows.check_record(record)
    assert info.value.path == path
    assert message in str(info.value)


def test_a_record_that_fits_returns_its_time_in_epoch_milliseconds() -> None:
    record = replace(make_record(1), time="2026-11-01T00:00:05.250Z", seq=2**64 - 1, attempt=2**16 - 1)
    assert rows.check_record(record) == 1_793_491_205_250
