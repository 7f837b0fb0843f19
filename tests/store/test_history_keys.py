"""The append-only check after a restart: nothing is remembered in the process, so every key is
looked up in the key tables the engine fills from the same inserts (``decision_keys``,
``event_keys``), and the answers are those the check gives for keys it remembers."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from audit.events import WorldEvent
from audit.records import record_text
from audit.store.queries import AuditStore
from audit.store.rows import event_json
from tests.store.test_history_property import make_event, make_record

CLUSTER = "keys"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("history-keys")
    with AuditStore.open(f"chdb://{path}/db") as store:
        for kind, lines in (("records", [json.dumps(make_record(CLUSTER, k, 0).to_dict()).encode() for k in range(3)]),
                            ("events", [make_event(CLUSTER, k, 0) for k in range(3)])):
            result = store.ingest_jsonl(b"\n".join(lines), kind, "first", compressed=False)  # type: ignore[arg-type]
            assert (result.accepted, result.absorbed, result.quarantined) == (3, 0, 0)
    return path


@pytest.fixture
def reopened(data_dir: Path) -> Iterator[AuditStore]:
    with AuditStore.open(f"chdb://{data_dir}/db") as store:
        yield store


def _stored_sha(store: AuditStore, kind: str, key: int) -> str:
    if kind == "records":
        text = store.client.query("SELECT record FROM decisions WHERE seq = {k:UInt64}", parameters={"k": key})
    else:
        text = store.client.query("SELECT body FROM events WHERE seq = {k:UInt64}", parameters={"k": key})
    return hashlib.sha256(text.result_rows[0][0].encode()).hexdigest()


def test_the_key_tables_hold_every_stored_key_with_the_digest_of_its_text(reopened: AuditStore) -> None:
    decisions = reopened.client.query("SELECT decision_id, lower(hex(sha256)) FROM decision_keys ORDER BY decision_id")
    assert decisions.result_rows == sorted(
        (make_record(CLUSTER, k, 0).decision_id, hashlib.sha256(record_text(make_record(CLUSTER, k, 0)).encode()).hexdigest())
        for k in range(3))
    events = reopened.client.query("SELECT cluster, seq, lower(hex(sha256)) FROM event_keys ORDER BY seq")
    assert events.result_rows == [(CLUSTER, k, _stored_sha(reopened, "events", k)) for k in range(3)]


@pytest.mark.parametrize(
    ("kind", "version", "absorbed", "quarantined"),
    [("records", 0, 1, 0), ("events", 0, 1, 0), ("records", 1, 0, 1), ("events", 1, 0, 1)],
    ids=["identical-decision-absorbed", "identical-event-absorbed", "conflicting-decision-quarantined",
         "conflicting-event-quarantined"],
)
def test_a_re_send_after_a_restart_is_judged_against_the_stored_digest(
    reopened: AuditStore, kind: str, version: int, absorbed: int, quarantined: int,
) -> None:
    line = json.dumps(make_record(CLUSTER, 1, version).to_dict()).encode() if kind == "records" \
        else make_event(CLUSTER, 1, version)
    before = _stored_sha(reopened, kind, 1)
    result = reopened.ingest_jsonl(line, kind, "again", compressed=False)  # type: ignore[arg-type]
    assert (result.accepted, result.absorbed, result.quarantined) == (0, absorbed, quarantined)
    assert _stored_sha(reopened, kind, 1) == before  # the stored text is untouched
    if quarantined:
        # a record is named by its output_digest, an event by the sha256 of its text (its event digest)
        if kind == "records":
            name, label = f"decision {make_record(CLUSTER, 1, 0).decision_id}", "output_digest"
            kept, sent = make_record(CLUSTER, 1, 0).output_digest, make_record(CLUSTER, 1, version).output_digest
        else:
            name, label = f"event {CLUSTER}/1", "sha256"
            kept = before
            sent = hashlib.sha256(event_json(WorldEvent.from_dict(json.loads(line))).encode()).hexdigest()
        (error,) = result.errors
        assert error["error"] == (f"{name}: conflicts with the stored one (stored {label} {kept}, sent {label} "
                                  f"{sent}); history is append-only, the stored one is kept")


def test_a_decision_measured_again_differs_only_in_its_clock_and_is_absorbed(reopened: AuditStore) -> None:
    # another duration_us gives another text (and digest), so the stored text is read back and
    # compared without its clock fields
    again = dataclasses.replace(make_record(CLUSTER, 2, 0), duration_us=make_record(CLUSTER, 2, 0).duration_us + 1000)
    assert record_text(again) != record_text(make_record(CLUSTER, 2, 0))
    result = reopened.ingest_jsonl(json.dumps(again.to_dict()).encode(), "records", "again", compressed=False)
    assert (result.accepted, result.absorbed, result.quarantined) == (0, 1, 0)
