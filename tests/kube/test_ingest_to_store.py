"""``claimtrail ingest kube --server chdb:///dir``: the watcher writes straight into the embedded
store, and a restarted watcher goes on from the world and the sequence the store holds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import clickhouse_connect
import pytest

from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import load_docs
from tests.kube.test_ingest_command import ROOT, _kubeconfig
from tests.kube.test_resume import RUNNING


def _run_once(server: FakeApiServer, kubeconfig: Path, dsn: str, *extra: str) -> None:
    for col in server.collections.values():
        col.watches = 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "audit.cli.main", "ingest", "kube", "--kubeconfig", str(kubeconfig), "--cluster", "lab",
         "--server", dsn, "--no-leader-election", *extra],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while any(c.watches < 2 for c in server.collections.values()):
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "watcher did not catch up"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
def test_a_restarted_watcher_goes_on_from_the_stored_world(tmp_path: Path) -> None:
    store = tmp_path / "store"
    dsn = f"chdb://{store}"
    with FakeApiServer() as server:
        for obj in load_docs("cluster.yaml"):
            server.add(obj)
        server.release_all()
        for obj in RUNNING:  # two pods still running when the watcher restarts
            server.add(obj)
        _kubeconfig(tmp_path / "kubeconfig", server.url)
        _run_once(server, tmp_path / "kubeconfig", dsn, "--seq-start", "0")
        server.delete("Pod", "legacy-0", "team-b")  # while no watcher runs
        _run_once(server, tmp_path / "kubeconfig", dsn)
    client = clickhouse_connect.get_client(dsn=dsn)
    try:
        events = client.query("SELECT seq, type, name FROM claimtrail.events FINAL WHERE cluster = 'lab' ORDER BY seq")
        decisions = client.query("SELECT count() FROM claimtrail.decisions FINAL WHERE cluster = 'lab'").result_rows[0][0]
        quarantined = client.query("SELECT count() FROM claimtrail.quarantine").result_rows[0][0]
    finally:
        client.close()
    # run 1: 11 events; run 2 logs only what changed while it was down, right after them
    assert [r[0] for r in events.result_rows] == list(range(12))
    assert events.result_rows[-1] == (11, "delete", "legacy-0")
    assert (decisions, quarantined) == (3, 0)  # the decisions of run 1, none derived again
