"""Where a simulation goes: never silently nowhere, never on top of an earlier run.

Simulating into an embedded store another process owns stops at once with one line (the spooled
writer would otherwise keep every record in its spool for as long as the owning server runs,
and the command would look as if it had succeeded); simulating twice into the same JSONL files
replaces them, so they still replay.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("events", [True, False], ids=["with-events-file", "events-companion"])
def test_simulating_twice_into_the_same_files_replaces_them(tmp_path: Path, events: bool) -> None:
    out = tmp_path / "hour.jsonl"
    events_file = tmp_path / ("hour-events.jsonl" if events else "hour.events.jsonl")
    argv = [sys.executable, "-m", "audit.cli.main", "simulate", "--seed", "3", "--hours", "0.2", "--quiet",
            "--out", str(out), *(["--events", str(events_file)] if events else [])]
    sizes = []
    for _ in range(2):
        done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        sizes.append((len(out.read_text().splitlines()), len(events_file.read_text().splitlines())))
    assert sizes[0] == sizes[1] and sizes[0][0] > 0
    replay = subprocess.run([sys.executable, "-m", "audit.cli.main", "replay", "--records", str(out),
                             "--events", str(events_file)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert replay.returncode == 0, replay.stderr
    assert replay.stdout.startswith(f"verified {sizes[0][0]:,} decision")
