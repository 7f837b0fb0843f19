"""A writer killed with SIGKILL mid-ingest loses nothing and doubles nothing once restarted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from audit.store.queries import AuditStore, DecisionFilter
from tests.store.factory import make_records

REPO = Path(__file__).resolve().parents[2]
COUNT, CHUNK = 6_000, 250


def run_child(directory: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.store.writer_child", str(directory), str(COUNT), str(CHUNK)],
                            cwd=REPO, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})


def stored_ids(store: AuditStore) -> set[str]:
    return {r[0] for r in store.client.query("SELECT decision_id FROM decisions").result_rows}


def test_sigkill_mid_ingest_then_restart_ends_with_exactly_the_records_sent(tmp_path: Path) -> None:
    child = run_child(tmp_path)
    acked = 0
    assert child.stdout is not None
    for line in child.stdout:
        acked = int(line.split()[1])
        if acked >= COUNT // 3:
            child.send_signal(signal.SIGKILL)
            break
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL and 0 < acked < COUNT
    expected = [r.decision_id for r in make_records(COUNT)]

    # restart 1: only the spool is replayed, nothing is re-sent; every acknowledged record is there
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        writer = store.writer(name="child", background=False)
        assert writer.drain()
        present = stored_ids(store)
        assert set(expected[:acked]) <= present
        assert present <= set(expected)

    # restart 2: the producer starts over (at-least-once); the store ends with each record once
    child = run_child(tmp_path)
    out, _ = child.communicate(timeout=300)
    assert child.returncode == 0 and out.endswith("done\n")
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        rows = store.client.query("SELECT count(), uniqExact(decision_id) FROM decisions FINAL").result_rows[0]
        assert tuple(rows) == (COUNT, COUNT)
        assert stored_ids(store) == set(expected)
        day = DecisionFilter(since="2026-11-01T00:00:00Z", until="2026-11-02T00:00:00Z")
        assert sum(g["decisions"] for g in store.fallback_stats(day, ["tenant"])) == COUNT
        store.client.command("OPTIMIZE TABLE decisions FINAL")
        assert store.client.query("SELECT count() FROM decisions").result_rows[0][0] == COUNT
        assert not list((tmp_path / "spool" / "child").glob("*.seg")) or store.writer(
            name="child", background=False).spool.pending_frames() == 0
