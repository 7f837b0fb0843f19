"""A record or a world event holding a text UTF-8 cannot hold (a lone surrogate, which a Python
string can) is kept in quarantine with a reason naming it and the field, and the rest of its batch
is stored: through the store's writer, through the in-process sink the simulator and the watcher
write a store with, through the HTTP sink they send to the API with (the API refuses the one line),
and through the file sink, whose reader refuses the one record line (an event line it reads back
as it was). Real chDB stores, a real loopback server."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from audit.events import WorldEvent
from audit.records import DecisionRecord
from audit.store.queries import AuditStore
from ingest.files import import_file
from ingest.sinks import FileSink, HttpSink, StoreSink
from tests.store.factory import make_event, make_records
from tests.store.test_sinks import TOKEN, IngestServer, free_port


def _batch() -> tuple[list[DecisionRecord], DecisionRecord]:
    first, middle, last = make_records(3)
    bad = replace(middle, message="node lost\ud800 mid-bind")
    return [first, bad, last], bad


# Each writes ``items`` (records or world events, as ``kind`` says) the way its name says and
# checks that one of them was kept aside.


def _by_writer(db: Path, kind: str, items: list[Any]) -> None:
    with AuditStore.open(f"chdb://{db}") as store:
        writer = store.writer(background=False)
        getattr(writer, f"write_{kind}")(items)
        assert writer.flush()
        writer.close()


def _by_store_sink(db: Path, kind: str, items: list[Any]) -> None:
    sink = StoreSink(f"chdb://{db}", spool_dir=str(db.parent / "spool"))
    getattr(sink, f"write_{kind}")(items)
    assert sink.flush()
    assert sink.quarantined == 1
    sink.close()


def _by_http_sink(db: Path, kind: str, items: list[Any]) -> None:
    port = free_port()
    with AuditStore.open(f"chdb://{db}") as store:
        server = IngestServer(store, port)
        try:
            sink = HttpSink(f"http://127.0.0.1:{port}", token=TOKEN, spool_dir=str(db.parent / "spool"))
            getattr(sink, f"write_{kind}")(items)
            assert sink.flush(timeout=30)
            sent = "sent" if kind == "records" else "events_sent"
            assert (sink.stats()[sent], sink.quarantined) == (3, 1)  # lines sent, lines the API quarantined
            sink.close()
        finally:
            server.stop()


REASON = "field message: not valid UTF-8 text (lone surrogate U+D800 at character 9)"


@pytest.mark.parametrize(("write", "reason"), [
    (_by_writer, "decision {id}: " + REASON),
    (_by_store_sink, "decision {id}: " + REASON),
    (_by_http_sink, "DecisionRecord: " + REASON.removeprefix("field ")),  # as the API quarantines lines
], ids=["writer", "store sink", "http sink"])
def test_a_record_with_a_lone_surrogate_is_quarantined_and_the_rest_of_its_batch_stored(
    tmp_path: Path, _empty_store_dir: Path, write: Callable[[Path, str, list[Any]], None], reason: str,
) -> None:
    db = tmp_path / "db"
    shutil.copytree(_empty_store_dir, db, symlinks=True)
    records, bad = _batch()
    write(db, "records", records)
    with AuditStore.open(f"chdb://{db}") as store:
        stored = store.client.query("SELECT decision_id FROM decisions FINAL ORDER BY decision_id").result_rows
        quarantined = store.quarantined(10)
    assert [row[0] for row in stored] == sorted([records[0].decision_id, records[2].decision_id])
    assert [(q["kind"], q["path"], q["error"]) for q in quarantined] == [
        ("record", "message", reason.format(id=bad.decision_id))]
    # nothing of it is lost: the raw text is its JSON with the surrogate escaped, read back whole
    assert json.loads(quarantined[0]["raw"])["message"] == bad.message
    assert DecisionRecord.from_dict(json.loads(quarantined[0]["raw"])) == bad


def test_the_file_sink_keeps_every_record_and_its_reader_refuses_the_one_line(tmp_path: Path) -> None:
    records, bad = _batch()
    sink = FileSink(str(tmp_path / "out.jsonl"))
    sink.write_records(records)
    sink.close()
    lines = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["decision_id"] for line in lines] == [r.decision_id for r in records]
    assert json.loads(lines[1])["message"] == bad.message
    read = import_file(tmp_path / "out.jsonl", "records")
    assert [r.decision_id for r in read.records] == [records[0].decision_id, records[2].decision_id]
    assert [(e.location, e.path, e.error) for e in read.errors] == [
        (f"{tmp_path / 'out.jsonl'}:2", "message", "DecisionRecord: " + REASON.removeprefix("field "))]


def _events() -> tuple[list[WorldEvent], WorldEvent]:
    first, middle, last = (make_event(seq) for seq in (5, 6, 7))
    bad = replace(middle, payload={"spec": {**middle.payload["spec"], "driver": "gpu\ud800.nvidia.com"}})
    return [first, bad, last], bad


EVENT_REASON = ("event c1/6 (ResourceSlice node-1-gpus): field payload.spec.driver: not valid UTF-8 text "
                "(lone surrogate U+D800 at character 3)")


@pytest.mark.parametrize("write", [_by_writer, _by_store_sink, _by_http_sink],
                         ids=["writer", "store sink", "http sink"])
def test_an_event_with_a_lone_surrogate_is_quarantined_and_the_rest_of_its_batch_stored(
    tmp_path: Path, _empty_store_dir: Path, write: Callable[[Path, str, list[Any]], None],
) -> None:
    db = tmp_path / "db"
    shutil.copytree(_empty_store_dir, db, symlinks=True)
    events, bad = _events()
    write(db, "events", events)
    with AuditStore.open(f"chdb://{db}") as store:
        stored = store.client.query("SELECT seq FROM events ORDER BY seq").result_rows
        quarantined = store.quarantined(10)
    assert [row[0] for row in stored] == [5, 7]
    assert [(q["kind"], q["path"], q["error"]) for q in quarantined] == [("event", "payload.spec.driver", EVENT_REASON)]
    # nothing of it is lost: the raw text is its JSON with the surrogate escaped, read back whole
    assert WorldEvent.from_dict(json.loads(quarantined[0]["raw"])) == bad


def test_the_file_sink_keeps_every_event_and_its_reader_reads_the_escaped_one_back_whole(tmp_path: Path) -> None:
    events, bad = _events()
    sink = FileSink(str(tmp_path / "out.jsonl"))
    sink.write_events(events)
    sink.close()
    lines = (tmp_path / "out.events.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["seq"] for line in lines] == [5, 6, 7]
    assert import_file(tmp_path / "out.events.jsonl", "events").events == events
