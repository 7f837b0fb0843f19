"""Batches a writer (the OTLP receiver's, the ingest endpoints') spooled but had not delivered when
the server stopped are in the store before the first request is judged, so a changed version of a
spooled decision sent right after a start is quarantined rather than stored beside it."""

from __future__ import annotations

from pathlib import Path

from audit.api.storeport import OtlpSink
from audit.records import DecisionRecord
from audit.store.queries import AuditStore
from audit.store.writer import RecordWriter
from tests.api.conftest import start_server, stop
from tests.api.test_hardened_ingest import line, metric, record


def _spool_undelivered(root: Path, records: list[DecisionRecord], writer_name: str = "otlp") -> None:
    """Leave ``records`` in the named writer's spool of the store at ``root``, undelivered, as a
    process killed between spooling and delivering leaves them."""
    with AuditStore.open(f"chdb://{root}/db") as store:
        spool = store.spool_dir(writer_name)

    def store_down() -> None:
        raise ConnectionError("the store is not reachable")

    writer = RecordWriter(store_down, str(spool), source=writer_name, background=False)
    writer.write_records(records)
    assert writer.flush() is False  # spooled, not delivered
    writer.close()


def test_the_receivers_spool_is_delivered_when_its_sink_is_made(tmp_path: Path) -> None:
    spooled = record(70)
    _spool_undelivered(tmp_path, [spooled])
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        assert store.get_decision(spooled.decision_id, None) is None
        OtlpSink(store)
        found = store.get_decision(spooled.decision_id, None)
        assert found is not None and found.output_digest == spooled.output_digest


def test_a_changed_version_of_a_spooled_decision_sent_after_a_restart_is_quarantined(tmp_path: Path) -> None:
    from tests.otlp.payloads import exported

    spooled = record(71)
    changed = DecisionRecord.from_dict({**spooled.to_dict(), "message": "rewritten"}).seal()
    _spool_undelivered(tmp_path, [spooled])
    server, proc = start_server(tmp_path)
    try:
        spans, _ = exported([changed])
        answer = server.post("/v1/traces", content=spans.SerializeToString(),
                             headers={"Content-Type": "application/x-protobuf"})
        assert answer.status_code == 200, answer.text
        stored = server.get(f"/v1/decisions/{spooled.decision_id}").json()
        assert (stored["message"], stored["output_digest"]) == (spooled.message, spooled.output_digest)
        assert metric(server, 'claimtrail_store{counter="writer_quarantined"}') == 1
    finally:
        stop(proc)


def test_the_ingest_spool_is_delivered_before_the_first_body_is_screened(tmp_path: Path) -> None:
    spooled = record(72)
    changed = DecisionRecord.from_dict({**spooled.to_dict(), "message": "rewritten"}).seal()
    _spool_undelivered(tmp_path, [spooled], "ingest")
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        result = store.ingest_jsonl(line(changed), "records", "again", compressed=False)
        assert (result.accepted, result.absorbed, result.quarantined) == (0, 0, 1)
        found = store.get_decision(spooled.decision_id, None)
        assert found is not None and found.output_digest == spooled.output_digest
