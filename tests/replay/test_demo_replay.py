"""``claimtrail demo`` verifies its day by replay through the API, so the runs are stored and the
dashboard's Replay page (which reads ``/v1/stats/replay``) shows them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from audit.store.queries import AuditStore
from tests.api.conftest import free_port

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_demo_stores_a_replay_run_for_every_decision(tmp_path: Path) -> None:
    data = tmp_path / "demo"
    out = subprocess.run([sys.executable, "-m", "audit.cli.main", "demo", "--check", "--hours", "1",
                          "--data-dir", str(data), "--api-port", str(free_port()),
                          "--dashboard-port", str(free_port())],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "$ claimtrail replay --server http://127.0.0.1:" in out.stdout
    found = re.search(r"replay runs stored: ([\d,]+) of ([\d,]+) decisions \(the dashboard's Replay page shows them\)",
                      out.stdout)
    assert found, out.stdout[-3000:]
    stored, decided = (int(g.replace(",", "")) for g in found.groups())
    assert stored == decided > 0
    # the server is gone: the store is ours to read
    with AuditStore.open(f"chdb://{data.resolve()}/db") as store:
        rows = store.replay_summary()
    assert sum(r["decisions"] for r in rows) == sum(r["matches"] for r in rows) == decided
