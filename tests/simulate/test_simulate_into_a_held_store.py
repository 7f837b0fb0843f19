"""Simulating into an embedded store another process owns stops at once with one line.

The spooled writer would otherwise keep every record in its spool for as long as the owning
server runs, and the command would look as if it had succeeded.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HOLD = "import clickhouse_connect, sys; c = clickhouse_connect.get_client(dsn=sys.argv[1]); print('held', flush=True); sys.stdin.read()"


def test_simulate_into_a_held_store_is_refused_before_simulating(tmp_path: Path) -> None:
    holder = subprocess.Popen([sys.executable, "-c", HOLD, f"chdb://{tmp_path}/db"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        done = subprocess.run([sys.executable, "-m", "audit.cli.main", "simulate", "--hours", "0.1", "--quiet",
                               "--out", f"chdb://{tmp_path}/db"], cwd=REPO, capture_output=True, text=True, timeout=300)
    finally:
        holder.communicate("")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"claimtrail simulate: the embedded store at {tmp_path}/db is owned by another process (a running "
        "claimtrail serve or demo); use that server's API URL (such as http://127.0.0.1:8080) instead of the "
        "store's directory, or stop it first\n")
    assert not (tmp_path / "spool").exists()
