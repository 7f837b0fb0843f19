"""Malformed input lands in quarantine with its error and field path; good input still lands."""

from __future__ import annotations

import gzip
import json

import pytest

from audit.errors import UserError
from audit.store.quarantine import RAW_CAP
from audit.store.queries import AuditStore
from tests.store.factory import make_event, make_record


def line(obj: object) -> bytes:
    return json.dumps(obj).encode()


def good(i: int) -> dict:
    return make_record(i).to_dict()


BAD_RECORDS = [
    (b"{not json", "", "invalid JSON"),
    (line([1, 2]), "", "expected a JSON object"),
    (line({**good(100), "seq": "12"}), "seq", "integer"),
    (line({**good(101), "outcome": "maybe"}), "outcome", "unknown outcome 'maybe'"),
    (line({k: v for k, v in good(102).items() if k != "tenant"}), "tenant", "Field required"),
    (line({**good(103), "tiers": [{"index": 0}]}), "tiers.0.request", "Field required"),
    (line({**good(104), "time": "last tuesday"}), "time", "not an ISO 8601 time"),
    (line({**good(105), "attempt": 70000}), "attempt", "outside 0..65535"),
]


@pytest.mark.parametrize(("raw", "path", "error"), BAD_RECORDS,
                         ids=["not-json", "not-object", "wrong-type", "unknown-outcome", "missing-field",
                              "nested-missing", "bad-time", "too-large-for-column"])
def test_a_bad_record_is_quarantined_with_error_and_path_and_ingest_continues(store: AuditStore, raw: bytes,
                                                                            path: str, error: str) -> None:
    body = b"\n".join([line(good(1)), raw, line(good(2))])
    result = store.ingest_jsonl(body, "records", source="test-api")
    assert (result.accepted, result.quarantined) == (2, 1)
    (row,) = store.quarantined(10)
    assert (row["source"], row["kind"], row["path"]) == ("test-api", "record", path)
    assert error in row["error"]
    assert row["raw"].encode() == raw and row["raw_size"] == len(raw)
    assert store.get_decision(make_record(1).decision_id, None) is not None
    assert store.get_decision(make_record(2).decision_id, None) is not None
    assert store.ingest_stats()["quarantined"] == 1


def test_store_level_checks_are_reported_in_the_ingest_result(store: AuditStore) -> None:
    body = b"\n".join([line(good(1)), line({**good(104), "time": "last tuesday"})])
    result = store.ingest_jsonl(body, "records", source="s")
    # validate_record accepts any string time; the store's column check catches it before writing
    assert (result.accepted, result.quarantined) == (1, 1)
    assert result.errors == [{"line": 2, "path": "time",
                              "error": "time: 'last tuesday' is not an ISO 8601 time like 2026-11-01T08:00:00.000Z"}]
    assert store.quarantine_count() == 1
    assert store.ingest_stats()["written"] == 1


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        (line({**make_event(1).to_dict(), "seq": -1}), "seq"),
        (line({**make_event(2).to_dict(), "object_kind": "Secret"}), "object_kind"),
        (line({**make_event(3).to_dict(), "colour": "red"}), "colour"),
    ],
    ids=["negative-seq", "unknown-kind", "unknown-field"],
)
def test_a_bad_event_is_quarantined_with_its_path(store: AuditStore, raw: bytes, path: str) -> None:
    result = store.ingest_jsonl(b"\n".join([line(make_event(10).to_dict()), raw]), "events", source="watch")
    assert (result.accepted, result.quarantined) == (1, 1)
    assert result.errors[0]["path"] == path and result.errors[0]["line"] == 2
    (row,) = store.quarantined(5)
    assert (row["kind"], row["path"], row["source"]) == ("event", path, "watch")
    assert [e.seq for e in store.events("c1", 0, 100)] == [10]


def test_gzip_bodies_are_accepted_and_the_raw_payload_is_capped(store: AuditStore) -> None:
    huge = line({**good(7), "message": "x" * (RAW_CAP * 2), "seq": "not a number"})
    body = gzip.compress(b"\n".join([line(good(3)), huge, b"", line(good(4))]))
    result = store.ingest_jsonl(body, "records", source="gz")
    assert (result.accepted, result.quarantined) == (2, 1)
    (row,) = store.quarantined(5)
    assert len(row["raw"].encode()) == RAW_CAP and row["raw_size"] == len(huge)


def test_the_same_bad_line_sent_twice_is_quarantined_once(store: AuditStore) -> None:
    for _ in range(2):
        store.ingest_jsonl(b"{oops", "records", source="retry")
    assert store.quarantine_count() == 1


@pytest.mark.parametrize(("body", "kind", "message"),
                         [(b"\x1f\x8bnot gzip", "records", "not valid gzip"), (b"{}", "decisions", "ingest kind")],
                         ids=["broken-gzip", "unknown-kind"])
def test_unusable_bodies_are_user_errors(store: AuditStore, body: bytes, kind: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        store.ingest_jsonl(body, kind, source="s")  # type: ignore[arg-type]


def test_the_writer_quarantines_records_that_do_not_fit_their_columns(store: AuditStore) -> None:
    writer = store.writer(name="simulator", background=False)
    bad = make_record(1)
    bad.time = "soon"
    writer.write_records([make_record(0), bad])
    assert writer.flush()
    (row,) = store.quarantined(5)
    assert (row["source"], row["kind"], row["path"]) == ("simulator", "record", "time")
    assert json.loads(row["raw"])["decision_id"] == bad.decision_id
    stats = writer.stats()
    assert (stats["received"], stats["written"], stats["quarantined"]) == (2, 1, 1)
