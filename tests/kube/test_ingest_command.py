"""``claimtrail ingest kube`` as an operator runs it: a kubeconfig, the Lease, a sink, SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import populate

ROOT = Path(__file__).resolve().parents[2]


def _kubeconfig(path: Path, url: str) -> None:
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: lab\n"
        f"clusters: [{{name: lab, cluster: {{server: '{url}'}}}}]\n"
        "contexts: [{name: lab, context: {cluster: lab, user: lab, namespace: default}}]\n"
        "users: [{name: lab, user: {token: lab-token}}]\n"
    )


def test_ingest_kube_writes_the_event_log_and_decisions_and_stops_cleanly(tmp_path: Path) -> None:
    with FakeApiServer() as server:
        populate(server)
        _kubeconfig(tmp_path / "kubeconfig", server.url)
        out = tmp_path / "records.jsonl"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("OTEL_EXPORTER_OTLP_ENDPOINT", None)
        proc = subprocess.Popen(
            [sys.executable, "-m", "audit.cli.main", "ingest", "kube", "--kubeconfig", str(tmp_path / "kubeconfig"),
             "--cluster", "lab", "--server", str(out), "--seq-start", "0", "--lease-namespace", "claimtrail",
             "--identity", "watcher-0"],
            cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True,
        )
        try:
            # every resource has been listed and watched to its end and watched again: all delivered
            deadline = time.monotonic() + 60
            while any(c.watches < 2 for c in server.collections.values()):
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "watcher did not catch up"
                time.sleep(0.05)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
        lease = server.leases[("claimtrail", "claimtrail-watcher-lab")]["spec"]
    assert lease.get("holderIdentity") is None and lease["leaseDurationSeconds"] == 1  # released on shutdown
    events = [json.loads(line) for line in (tmp_path / "records.events.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in events] == list(range(15))
    per_kind: dict[str, int] = defaultdict(int)
    for e in events:
        per_kind[e["object_kind"]] += 1
    assert dict(per_kind) == {"DeviceClass": 1, "Node": 3, "ResourceSlice": 3, "ResourceClaim": 3, "Pod": 5}
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["pod"], r["outcome"], r["track"]) for r in records) == [
        ("legacy-0", "allocated", "device-plugin"), ("train-0", "allocated", "dra"), ("train-0", "unschedulable", "dra")]
    assert next(r for r in records if r["outcome"] == "allocated" and r["track"] == "dra")["message"] == "allocator agrees"
