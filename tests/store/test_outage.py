"""An unreachable store fills the spool and the spool drains, in order, once the store is back.

No ClickHouse server can run here, so "the server is down" is played by an embedded store
directory that another process holds (chDB locks a directory to one process): connecting fails
exactly as it would against a dead server, and succeeds once that process exits. The same
writer code talks to a server over HTTP; the HTTP sink's outage test is in test_sinks.py.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from audit.store.queries import AuditStore, open_writer
from audit.store.spool import SpoolFullError
from tests.store.factory import make_event, make_records

HOLD = "import clickhouse_connect, sys; c = clickhouse_connect.get_client(dsn=sys.argv[1]); print('held', flush=True); sys.stdin.read()"


def hold_store(directory: Path) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, f"chdb://{directory}/db"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_records_wait_in_the_spool_while_the_store_is_away_and_drain_in_order(tmp_path: Path) -> None:
    holder = hold_store(tmp_path)
    writer = open_writer(f"chdb://{tmp_path}/db", spool_dir=str(tmp_path / "spool"), batch_size=100,
                         retry_interval=0.05)
    try:
        records = make_records(450)
        writer.write_records(records)
        writer.write_events([make_event(s) for s in range(1, 31)])
        assert writer.flush(timeout=5) is False  # durable in the spool, not delivered
        stats = writer.stats()
        assert stats["spooled"] == 450 and stats["written"] == 0 and stats["delivery_errors"] >= 1
        assert stats["spool_batches"] == 6  # five record batches and one event batch, in arrival order
        assert "owned by another process" in writer.last_error
    finally:
        holder.communicate("")  # the store comes back
    assert writer.flush(timeout=60) is True
    stats = writer.stats()
    assert (stats["written"], stats["events_written"], stats["spooled"], stats["spool_bytes"]) == (450, 30, 0, 0)
    writer.close()
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        assert store.client.query("SELECT count() FROM decisions FINAL").result_rows[0][0] == 450
        assert [e.seq for e in store.events("c1", 0, 100)] == list(range(1, 31))


def test_a_full_spool_refuses_new_batches_with_a_clear_error(tmp_path: Path) -> None:
    holder = hold_store(tmp_path)
    try:
        writer = open_writer(f"chdb://{tmp_path}/db", spool_dir=str(tmp_path / "spool"), batch_size=50,
                             max_spool_bytes=100_000, spool_block_seconds=0.2, retry_interval=0.05)
        writer.write_records(make_records(50))
        writer.flush(timeout=1)
        with pytest.raises(SpoolFullError, match="limit is 100000"):
            for start in range(50, 2000, 50):
                writer.write_records(make_records(50, start=start))
        kept = writer.stats()["spool_bytes"]
        assert 0 < kept <= 100_000
    finally:
        holder.communicate("")
    deadline = time.monotonic() + 60
    while writer.stats()["spool_batches"] and time.monotonic() < deadline:
        time.sleep(0.05)
    writer.close()
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        # every batch the spool accepted arrived; the refused one was refused, not dropped silently
        assert store.client.query("SELECT count() FROM decisions FINAL").result_rows[0][0] == writer.stats()["written"]
        assert writer.stats()["written"] == writer.stats()["received"] - 50
