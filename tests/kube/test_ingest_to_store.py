"""``claimtrail ingest kube --server chdb:///dir``: the watcher writes straight into the embedded
store, and a restarted watcher continues the cluster's sequence where the store left it."""

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
from tests.kube.harness import populate
from tests.kube.test_ingest_command import ROOT, _kubeconfig


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
def test_watcher_writes_to_the_store_and_a_restart_continues_the_sequence(tmp_path: Path) -> None:
    store = tmp_path / "store"
    dsn = f"chdb://{store}"
    with FakeApiServer() as server:
        populate(server)
        _kubeconfig(tmp_path / "kubeconfig", server.url)
        _run_once(server, tmp_path / "kubeconfig", dsn, "--seq-start", "0")
        _run_once(server, tmp_path / "kubeconfig", dsn)
    client = clickhouse_connect.get_client(dsn=dsn)
    try:
        seqs = [r[0] for r in client.query("SELECT seq FROM claimtrail.events FINAL WHERE cluster = 'lab' ORDER BY seq").result_rows]
        decisions = client.query("SELECT count() FROM claimtrail.decisions FINAL WHERE cluster = 'lab'").result_rows[0][0]
    finally:
        client.close()
    # run 1: 15 events; run 2 relists the 5 objects still alive and numbers them after the stored ones
    assert seqs == list(range(20))
    assert decisions == 3  # the same observed decisions again, deduplicated by id
