"""Sinks deliver records and events to files, to the store, and over HTTP through outages."""

from __future__ import annotations

import gzip
import json
import shutil
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import audit.records
from audit.canonical import canonical_json
from audit.records import record_text
from audit.store import rows
from audit.store.queries import AuditStore
from ingest.files import export_events, export_records, import_file
from ingest.sinks import FileSink, HttpSink, SinkError, StoreSink, open_sink
from tests.store.factory import make_event, make_records

TOKEN = "s3cret-admin"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class IngestServer:
    """A real loopback HTTP server in front of a real store, speaking the ingest endpoints."""

    def __init__(self, store: AuditStore, port: int, max_body: int | None = None) -> None:
        outer = self
        self.requests = 0

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                outer.requests += 1
                kind = {"/v1/ingest/records": "records", "/v1/ingest/events": "events"}.get(self.path)
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    self._answer(401, {"error": "bad token"})
                elif kind is None:
                    self._answer(404, {"error": self.path})
                else:
                    body = self.rfile.read(int(self.headers["Content-Length"]))
                    if self.headers.get("Content-Encoding") == "gzip":
                        body = gzip.decompress(body)
                    if max_body is not None and len(body) > max_body:  # as `serve --max-body-mb`
                        self._answer(413, {"detail": f"decompressed body exceeds the limit of {max_body} bytes"})
                        return
                    self._answer(200, store.ingest_jsonl(body, kind, "http-test").to_dict())  # type: ignore[arg-type]

            def _answer(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def http_sink(tmp_path: Path, port: int, monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpSink]:
    monkeypatch.setenv("CLAIMTRAIL_TOKEN", TOKEN)
    sink = open_sink(f"http://127.0.0.1:{port}", spool_dir=str(tmp_path / "http-spool"), batch_size=100,
                     backoff_base=0.02, backoff_cap=0.1)
    yield sink
    sink.close()


def test_http_sink_spools_while_the_server_is_down_and_drains_when_it_starts(store: AuditStore, port: int,
                                                                             http_sink: HttpSink) -> None:
    records = make_records(250)
    events = [make_event(s) for s in range(1, 41)]
    http_sink.write_events(events)
    http_sink.write_records(records)
    assert http_sink.flush(timeout=0.5) is False  # connection refused: everything waits on disk
    stats = http_sink.stats()
    assert stats["delivery_errors"] >= 1 and stats["sent"] == 0 and stats["spool_batches"] == 4
    assert "ConnectError" in http_sink.last_error
    server = IngestServer(store, port)
    try:
        assert http_sink.flush(timeout=60) is True
    finally:
        server.stop()
    stats = http_sink.stats()
    assert (stats["sent"], stats["events_sent"], stats["spool_batches"]) == (250, 40, 0)
    assert store.client.query("SELECT count() FROM decisions FINAL").result_rows[0][0] == 250
    got = store.get_decision(records[17].decision_id, None)
    assert got is not None and canonical_json(got.to_dict()) == canonical_json(records[17].to_dict())
    assert [e.seq for e in store.events("c1", 0, 100)] == list(range(1, 41))


def test_a_restarted_http_sink_delivers_what_an_earlier_run_left_in_the_spool(store: AuditStore, tmp_path: Path,
                                                                              port: int,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAIMTRAIL_TOKEN", TOKEN)
    spool = str(tmp_path / "left-over")
    first = HttpSink(f"http://127.0.0.1:{port}", spool_dir=spool, batch_size=50, backoff_base=0.02, backoff_cap=0.05)
    first.write_records(make_records(120))
    assert first.flush(timeout=0.3) is False
    first.close()  # the process ends with the batches still spooled
    server = IngestServer(store, port)
    try:
        second = HttpSink(f"http://127.0.0.1:{port}", spool_dir=spool, backoff_base=0.02)
        assert second.flush(timeout=60) is True
        second.close()
    finally:
        server.stop()
    assert store.client.query("SELECT count(), uniqExact(decision_id) FROM decisions FINAL").result_rows[0] == (120, 120)


def test_http_sink_keeps_batches_the_server_refuses(store: AuditStore, tmp_path: Path, port: int) -> None:
    server = IngestServer(store, port)
    try:
        sink = HttpSink(f"http://127.0.0.1:{port}", token="wrong", spool_dir=str(tmp_path / "s"), backoff_base=0.02,
                        backoff_cap=0.05)
        sink.write_records(make_records(5))
        assert sink.flush(timeout=0.5) is False
        assert "HTTP 401" in sink.last_error and sink.stats()["spool_batches"] == 1
        sink.token = TOKEN  # the operator fixes the token; nothing was lost meanwhile
        assert sink.flush(timeout=30) is True
        sink.close()
    finally:
        server.stop()
    assert store.client.query("SELECT count() FROM decisions FINAL").result_rows[0][0] == 5
    assert sink.undelivered == 0


@pytest.mark.parametrize(("records", "lines_per_body"), [(40, 20), (40, 7), (33, 1)])
def test_a_batch_larger_than_the_server_takes_is_delivered_in_smaller_bodies(
        store: AuditStore, tmp_path: Path, port: int, records: int, lines_per_body: int) -> None:
    made = make_records(records)
    longest = max(len(line) for line in (json.dumps(r.to_dict()) for r in made))
    server = IngestServer(store, port, max_body=lines_per_body * (longest + 200))
    try:
        sink = HttpSink(f"http://127.0.0.1:{port}", token=TOKEN, spool_dir=str(tmp_path / "s"), batch_size=records,
                        backoff_base=0.02, backoff_cap=0.05)
        sink.write_records(made)
        delivered = sink.flush(timeout=30)
        sink.close()
    finally:
        server.stop()
    assert (delivered, sink.undelivered, sink.stats()["sent"]) == (True, 0, records), sink.last_error
    assert store.client.query("SELECT count() FROM decisions FINAL").result_rows[0][0] == records


def test_a_line_larger_than_the_server_takes_stays_in_the_spool_and_says_so(store: AuditStore, tmp_path: Path,
                                                                             port: int) -> None:
    server = IngestServer(store, port, max_body=100)
    try:
        sink = HttpSink(f"http://127.0.0.1:{port}", token=TOKEN, spool_dir=str(tmp_path / "s"), batch_size=4,
                        backoff_base=0.02, backoff_cap=0.05)
        sink.write_records(make_records(4))
        assert sink.flush(timeout=0.5) is False
        sink.close()
    finally:
        server.stop()
    assert sink.undelivered == 1 and "HTTP 413" in sink.last_error and "raise its --max-body-mb" in sink.last_error


def test_a_sink_closed_while_the_server_refuses_counts_what_it_left_in_the_spool(store: AuditStore, tmp_path: Path,
                                                                                port: int) -> None:
    server = IngestServer(store, port)
    try:
        sink = HttpSink(f"http://127.0.0.1:{port}", token="wrong", spool_dir=str(tmp_path / "s"), batch_size=3,
                        backoff_base=0.02, backoff_cap=0.05)
        sink.write_records(make_records(7))
        sink.close()
    finally:
        server.stop()
    assert (sink.undelivered, sink.spool_dir) == (3, str(tmp_path / "s"))
    assert "HTTP 401" in sink.last_error


def test_file_sink_writes_canonical_lines_that_import_back(tmp_path: Path) -> None:
    records = make_records(12)
    events = [make_event(s) for s in range(3)]
    sink = open_sink(str(tmp_path / "out.jsonl"))
    assert isinstance(sink, FileSink)
    sink.write_records(records)
    sink.write_events(events)
    sink.close()
    lines = (tmp_path / "out.jsonl").read_bytes().splitlines()
    assert lines == [canonical_json(r.to_dict()) for r in records]
    back = import_file(tmp_path / "out.jsonl", "records")
    assert [canonical_json(r.to_dict()) for r in back.records] == lines and back.errors == []
    assert [e.to_dict() for e in import_file(tmp_path / "out.events.jsonl", "events").events] == [
        e.to_dict() for e in events]


@pytest.mark.parametrize(("tail", "kept", "torn"), [
    pytest.param(b'{"decision_id": "d-9", "clus', 2, b'{"decision_id": "d-9", "clus\n', id="torn-write-moved-aside"),
    pytest.param(b"", 2, None, id="whole-file-untouched"),
])
def test_a_line_an_earlier_run_left_unfinished_is_moved_aside_before_appending(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, tail: bytes, kept: int, torn: bytes | None) -> None:
    """A producer killed mid-line leaves the line without its newline: appending to it would run
    the next line on from it, and reading the file back (a restarted watcher's resume) would
    refuse the file."""
    first = make_records(2)
    path = tmp_path / "out.jsonl"
    path.write_bytes(b"".join(canonical_json(r.to_dict()) + b"\n" for r in first) + tail)
    sink = FileSink(str(path))
    later = make_records(1, start=2)
    sink.write_records(later)
    sink.close()
    back = import_file(path, "records")
    assert back.errors == [] and [r.decision_id for r in back.records] == [r.decision_id for r in first[:kept] + later]
    torn_path = tmp_path / "out.jsonl.torn"
    assert (torn_path.read_bytes() if torn_path.exists() else None) == torn
    assert ("cut short by a write that did not finish" in caplog.text) == (torn is not None)


def test_a_last_line_written_whole_without_its_newline_is_kept(tmp_path: Path) -> None:
    first = make_records(2)
    path = tmp_path / "out.jsonl"
    path.write_bytes(b"\n".join(canonical_json(r.to_dict()) for r in first))  # no final newline
    sink = FileSink(str(path))
    sink.write_records(make_records(1, start=2))
    sink.close()
    back = import_file(path, "records")
    assert back.errors == [] and len(back.records) == 3 and not (tmp_path / "out.jsonl.torn").exists()


@pytest.mark.parametrize("suffix", [".jsonl", ".yaml"])
def test_export_then_import_round_trips_records_and_events(tmp_path: Path, suffix: str) -> None:
    records = make_records(5)
    events = [make_event(s) for s in range(4)]
    assert export_records(records, tmp_path / f"r{suffix}") == 5
    assert export_events(events, tmp_path / f"e{suffix}") == 4
    assert [r.to_dict() for r in import_file(tmp_path / f"r{suffix}", "records").records] == [r.to_dict() for r in records]
    assert [e.to_dict() for e in import_file(tmp_path / f"e{suffix}", "events").events] == [e.to_dict() for e in events]


def test_import_reports_each_bad_item_with_location_and_field_path() -> None:
    fixtures = Path(__file__).parents[1] / "fixtures" / "store"
    result = import_file(fixtures / "records_with_mistakes.yaml", "records")
    assert len(result.records) == 1
    assert [(e.location.rsplit("/", 1)[1], e.path) for e in result.errors] == [
        ("records_with_mistakes.yaml#1", "seq"), ("records_with_mistakes.yaml#2", "outcome")]


def test_store_sink_writes_through_the_spooled_writer(tmp_path: Path) -> None:
    sink = open_sink(f"chdb://{tmp_path}/db", spool_dir=str(tmp_path / "sp"))
    assert isinstance(sink, StoreSink)
    sink.write_events([make_event(s) for s in range(5, 9)])
    sink.write_records(make_records(30))
    assert sink.flush() is True
    c1, elsewhere = sink.stored_world("c1"), sink.stored_world("elsewhere")
    assert (c1.last_seq, c1.events, elsewhere.last_seq, elsewhere.events) == (8, 4, None, 0)
    assert sink.stats()["written"] == 30
    sink.close()
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        assert store.client.query("SELECT count() FROM decisions").result_rows[0][0] == 30


def test_the_store_sink_encodes_each_item_once_and_stores_its_canonical_text(
        tmp_path: Path, _empty_store_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    encoded: Counter[str] = Counter()
    encode_record, encode_event = audit.records.fast_canonical_json, rows._ENCODE_SORTED

    def counted_record(obj: Any, opened: Any) -> bytes | None:
        encoded[type(obj).__name__] += 1
        return encode_record(obj, opened)

    def counted_event(obj: Any) -> str:
        encoded["event"] += 1
        return encode_event(obj)

    # the real encoders, counted: record_bytes and record_text both start with the first
    monkeypatch.setattr(audit.records, "fast_canonical_json", counted_record)
    monkeypatch.setattr(rows, "_ENCODE_SORTED", counted_event)
    db = tmp_path / "db"
    shutil.copytree(_empty_store_dir, db, symlinks=True)
    records, events = make_records(20), [make_event(s) for s in range(5, 12)]
    sink = StoreSink(f"chdb://{db}", spool_dir=str(tmp_path / "sp"))
    sink.write_events(events)
    sink.write_records(records)
    assert sink.flush() is True
    sink.close()
    assert encoded == {"DecisionRecord": 20, "event": 7}
    monkeypatch.undo()
    with AuditStore.open(f"chdb://{db}") as store:
        stored = store.client.query("SELECT record FROM decisions FINAL ORDER BY decision_id").result_rows
        bodies = store.client.query("SELECT body FROM events ORDER BY seq").result_rows
    assert [row[0] for row in stored] == [record_text(r) for r in sorted(records, key=lambda r: r.decision_id)]
    assert [row[0] for row in bodies] == [rows.event_json(e) for e in events]


@pytest.mark.parametrize("target", ["out.csv", "ftp://host/x", "/tmp/no-suffix"], ids=["csv", "ftp", "no-suffix"])
def test_unknown_targets_are_refused_with_a_message(target: str) -> None:
    with pytest.raises(SinkError, match="expected a .jsonl path"):
        open_sink(target)


@pytest.mark.parametrize("answer", [b"<html>maintenance</html>", b'{"seq": 7}', b'["last_seq"]', b'{"last_seq": "x"}'])
def test_an_answer_that_is_not_a_page_of_events_is_not_taken_for_one(tmp_path: Path, port: int, answer: bytes,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            self.send_response(200)
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sink = HttpSink(f"http://127.0.0.1:{port}", token=TOKEN, spool_dir=str(tmp_path / "s"))
    try:
        with caplog.at_level("WARNING", logger="ingest.sinks"):
            assert sink.stored_world("c1") is None
    finally:
        sink.close()
        server.shutdown()
        server.server_close()
    (warning,) = [r for r in caplog.records if r.getMessage() == "stored world unknown"]
    assert "unexpected answer" in warning.error  # type: ignore[attr-defined]


@pytest.mark.parametrize(("records", "events", "missing"), [
    pytest.param("typo/out.jsonl", None, "typo", id="records-directory"),
    pytest.param("out.jsonl", "typo/deeper/events.jsonl", "typo/deeper", id="events-directory"),
])
def test_a_file_sink_in_a_directory_that_does_not_exist_is_refused_not_made(
        tmp_path: Path, records: str, events: str | None, missing: str) -> None:
    with pytest.raises(SinkError, match=f"directory {tmp_path / missing} does not exist$"):
        open_sink(str(tmp_path / records), events_path=str(tmp_path / events) if events else None)
    assert not (tmp_path / "typo").exists()
