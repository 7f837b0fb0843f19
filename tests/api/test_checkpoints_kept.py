"""The API server checkpoints each cluster's world event log itself as events are ingested
(``claimtrail serve --checkpoint-every N``): the checkpoints ``claimtrail replay --write-checkpoints
N`` writes, byte for byte, written in the background after seq N-1, 2N-1, …; a resumed watcher
starts from the newest; a round that fails is logged and tried again at the cluster's next ingest.

The keeper's own tests serve the app in this process (uvicorn on loopback), so they can wait for
the keeper (``AuditStore.wait_checkpoints``); the command line's tests run ``claimtrail serve``,
whose stop writes what is due before the store closes.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from audit.api.app import create_app
from audit.api.auth import AuthConfig
from audit.api.deps import Settings
from audit.cli.main import main
from audit.events import WorldEvent
from audit.replay.checkpoints import checkpoint_body
from audit.store.queries import AuditStore
from audit.world import World
from ingest.sinks import FileSink, HttpSink
from tests.api.conftest import TOKENS, start_server, stop
from tests.otlp.loopback import serve
from tests.replay.runs import busy

EVERY = 1000
EVENTS = busy(2.0).events[:2500]  # 2.5 intervals of a simulated cluster's log
CLUSTER = EVENTS[0].cluster
BODY = 400  # events per POST: positions fall inside bodies and between them


def _post(base: str, events: list[WorldEvent], body: int = BODY) -> None:
    for i in range(0, len(events), body):
        lines = "".join(json.dumps(e.to_dict()) + "\n" for e in events[i:i + body]).encode()
        r = httpx.post(f"{base}/v1/ingest/events", content=lines, headers=_admin(), timeout=60)
        assert r.status_code == 200 and r.json()["accepted"] == len(events[i:i + body]), r.text


def _admin() -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS['admin']}"}


def _stored(store: AuditStore) -> list[tuple[int, str, str]]:
    """Every checkpoint of the cluster as stored: seq, digest of the text, the text."""
    rows = store._query("SELECT seq, digest, body FROM checkpoints FINAL WHERE cluster = {c:String} ORDER BY seq",
                        {"c": CLUSTER}).result_rows
    return [(int(seq), str(digest), str(body)) for seq, digest, body in rows]


@pytest.fixture
def served(store: AuditStore) -> Iterator[tuple[str, AuditStore]]:
    """An API over a fresh store that keeps checkpoints every EVERY events, served on loopback."""
    store.keep_checkpoints(EVERY)
    with serve(create_app(store, Settings(auth=AuthConfig(insecure_local=True))), lifespan="on") as base:
        yield base, store


def test_ingested_events_are_checkpointed_at_every_nth_and_a_resume_starts_from_the_newest(
        served: tuple[str, AuditStore], tmp_path: Path) -> None:
    base, store = served
    _post(base, EVENTS)
    assert store.wait_checkpoints(timeout=120)
    assert [seq for seq, _, _ in _stored(store)] == [999, 1999]
    assert store.checkpoints is not None and (store.checkpoints.written, store.checkpoints.errors) == (2, 0)
    sink = HttpSink(base, token=TOKENS["admin"], spool_dir=str(tmp_path / "spool"))
    try:
        resumed = sink.stored_world(CLUSTER)
    finally:
        sink.close()
    files = FileSink(str(tmp_path / "whole.jsonl"))
    files.write_events(EVENTS)
    whole = files.stored_world(CLUSTER)
    files.close()
    assert resumed is not None and resumed.checkpoint == 1999
    assert (resumed.objects, resumed.last_seq, resumed.policy) == (whole.objects, whole.last_seq, whole.policy)
    metrics = httpx.get(f"{base}/metrics", timeout=30).text.splitlines()
    assert [line for line in metrics if line.startswith("claimtrail_store{counter=\"checkpoint")] == [
        'claimtrail_store{counter="checkpoint_errors"} 0', 'claimtrail_store{counter="checkpoints_written"} 2']


def test_a_round_stopped_by_a_missing_event_is_logged_and_goes_on_at_the_next_ingest(
        served: tuple[str, AuditStore], caplog: pytest.LogCaptureFixture) -> None:
    base, store = served
    caplog.set_level(logging.ERROR, logger="claimtrail.store.checkpoints")
    _post(base, EVENTS[:1500] + EVENTS[1600:], body=2400)  # one delivery, one round: the error is logged once
    assert store.wait_checkpoints(timeout=120)
    assert [seq for seq, _, _ in _stored(store)] == [999]
    assert _logged(caplog) == [
        f"checkpoints of cluster {CLUSTER} not written: world {CLUSTER}: event seq 1500 missing from the store; "
        "1 checkpoint(s) written before it; checkpoints go on once it is stored (tried again when its next events "
        "are stored)"]
    caplog.clear()
    _post(base, EVENTS[1500:1600])
    assert store.wait_checkpoints(timeout=120)
    assert [seq for seq, _, _ in _stored(store)] == [999, 1999]
    assert _logged(caplog) == []
    assert store.checkpoints is not None and (store.checkpoints.written, store.checkpoints.errors) == (2, 1)


def test_a_damaged_checkpoint_to_go_on_from_is_logged_with_what_to_do(store: AuditStore,
                                                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="claimtrail.store.checkpoints")
    writer = store.writer(name="history")
    writer.write_events(EVENTS)
    assert writer.flush()
    world = World(CLUSTER)
    for event in EVENTS[:1000]:
        world.apply(event)
    store.write_checkpoint(CLUSTER, 999, {**checkpoint_body(world), "policy": "tampered"})  # no longer its digest's
    store.keep_checkpoints(EVERY)  # as a server starting on the store
    assert store.wait_checkpoints(timeout=120)
    assert [seq for seq, _, _ in _stored(store)] == [999]
    assert [line.split(": content_digest")[0] for line in _logged(caplog)] == [
        f"checkpoints of cluster {CLUSTER} not written: checkpoint {CLUSTER}@999"]
    keeper = store.checkpoints
    assert keeper is not None and keeper.errors == 1
    assert keeper.last_error.startswith(f"cluster {CLUSTER}: checkpoint {CLUSTER}@999: content_digest: recorded ")
    assert keeper.last_error.endswith("; remove it before new checkpoints can be written after it")


def _logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "claimtrail.store.checkpoints"]


def test_a_server_started_on_a_log_without_checkpoints_writes_them(store: AuditStore) -> None:
    writer = store.writer(name="history")
    writer.write_events(EVENTS)
    assert writer.flush()
    assert _stored(store) == []
    store.keep_checkpoints(EVERY)
    assert store.wait_checkpoints(timeout=120)
    assert [seq for seq, _, _ in _stored(store)] == [999, 1999]


# serve's options; the checkpoints stored once it stopped after 2.5 intervals were ingested, and the
# interval of `replay --write-checkpoints` that writes the same ones (None: the server writes none)
SERVED = {
    "every-n": (["--checkpoint-every", str(EVERY)], [999, 1999], EVERY),
    "off": (["--checkpoint-every", "0"], [], None),
    "default-every-10000": ([], [], 10_000),
}


@pytest.mark.parametrize(("argv", "seqs", "every"), SERVED.values(), ids=SERVED.keys())
def test_serve_writes_the_checkpoints_replay_write_checkpoints_writes_and_zero_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], seqs: list[int], every: int | None) -> None:
    srv, proc = start_server(tmp_path, *argv)
    try:
        _post(srv.base, EVENTS)
        counters = [line.split()[0] for line in srv.get("/metrics").text.splitlines()
                    if line.startswith('claimtrail_store{counter="checkpoint')]
    finally:
        stop(proc)  # the store's close writes what is due first
    assert counters == (['claimtrail_store{counter="checkpoint_errors"}', 'claimtrail_store{counter="checkpoints_written"}']
                        if every else [])
    with AuditStore.open(f"chdb://{tmp_path}/db", create=False) as store:
        by_the_server = _stored(store)
    assert [seq for seq, _, _ in by_the_server] == seqs
    if every is None:
        return
    dsn = f"chdb://{tmp_path}/by-the-command"
    with AuditStore.open(dsn) as other:
        writer = other.writer(name="history")
        writer.write_events(EVENTS)
        assert writer.flush()
    assert main(["replay", "--dsn", dsn, "--write-checkpoints", str(every)]) == 0
    assert capsys.readouterr().out == (f"{CLUSTER}: {len(seqs)} checkpoint(s) written, every {every:,} events up to "
                                       "seq 2,499\n")
    with AuditStore.open(dsn, create=False) as other:
        assert _stored(other) == by_the_server  # the same seqs, digests and texts


def test_the_events_of_two_clusters_are_checkpointed_each_on_its_own(served: tuple[str, AuditStore]) -> None:
    base, store = served
    twin = [dataclasses.replace(e, cluster="twin") for e in EVENTS[:1200]]
    _post(base, EVENTS[:1500] + twin)
    assert store.wait_checkpoints(timeout=120)
    assert (store.checkpoint_seqs(CLUSTER), store.checkpoint_seqs("twin")) == ([999], [999])
