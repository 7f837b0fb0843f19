"""Where a simulation goes: never silently nowhere, never on top of an earlier run.

Simulating into an embedded store another process owns stops at once with one line (the spooled
writer would otherwise keep every record in its spool for as long as the owning server runs,
and the command would look as if it had succeeded); simulating into an API that refuses the
batches ends with exit 1 and says where they wait; simulating twice into the same JSONL files
replaces them, so they still replay.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


class _Refusing(BaseHTTPRequestHandler):
    """An API that takes no token: every request is a 401."""

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"title": "unauthorized"}'
        self.send_response(401)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        return None


@pytest.fixture
def refusing_api() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    server = ThreadingHTTPServer(("127.0.0.1", port), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.shutdown()
        server.server_close()


def test_simulating_into_an_api_that_refuses_the_batches_fails_and_keeps_them(tmp_path: Path,
                                                                               refusing_api: str) -> None:
    done = subprocess.run([sys.executable, "-m", "audit.cli.main", "simulate", "--hours", "0.1", "--quiet", "--out",
                           refusing_api], cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CLAIMTRAIL_DATA_DIR": str(tmp_path), "CLAIMTRAIL_TOKEN": "wrong"})
    assert done.returncode == 1
    assert "decision outcomes" in done.stdout  # the summary still tells what was simulated
    (message,) = [line for line in done.stderr.splitlines() if line.startswith("claimtrail simulate:")]
    assert f"--out {refusing_api}: " in message and "were not delivered" in message and "HTTP 401" in message
    spooled = [p for p in (tmp_path / "spool").rglob("*") if p.is_file() and p.stat().st_size > 0]
    assert spooled and f"the spool {spooled[0].parent}" in message


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


def test_simulating_a_second_run_of_one_cluster_into_an_api_fails_on_what_it_quarantined(tmp_path: Path) -> None:
    """Two seeds of one scenario share the cluster name and the seqs from 0: the second run's
    events conflict with the first run's stored history, and the API quarantines them. The run
    must say so and fail, not end as if its history had been stored."""
    from tests.api.conftest import TOKENS, start_server, stop

    (tmp_path / "api").mkdir()
    server, proc = start_server(tmp_path / "api")
    try:
        def simulate(seed: int) -> subprocess.CompletedProcess[str]:
            return subprocess.run([sys.executable, "-m", "audit.cli.main", "simulate", "--hours", "0.1", "--quiet",
                                   "--seed", str(seed), "--start", "2026-12-01T09:00:00Z", "--out", server.base],
                                  cwd=REPO, capture_output=True, text=True, timeout=300,
                                  env={**os.environ, "CLAIMTRAIL_DATA_DIR": str(tmp_path / "data"),
                                       "CLAIMTRAIL_TOKEN": TOKENS["admin"]})

        first = simulate(3)
        assert (first.returncode, first.stderr) == (0, "")
        second = simulate(4)
    finally:
        stop(proc)
    assert second.returncode == 1
    (message,) = [line for line in second.stderr.splitlines() if line.startswith("claimtrail simulate:")]
    assert message.startswith(f"claimtrail simulate: --out {server.base}: the API quarantined ")
    assert "of the records and events sent, so history does not hold them; the first: /v1/ingest/events line " in message
    assert "conflicts with the stored one" in message
    assert message.endswith("(the store already holds this cluster's history: give each simulated run into one "
                            "store a cluster name of its own, spec.cluster of the scenario's Workload)")


def test_simulating_a_second_run_of_one_cluster_into_a_store_keeps_the_first_runs_history(tmp_path: Path) -> None:
    """The same two runs written to the store directly: history stays append-only there too. An
    identical re-run is absorbed; the other seed's conflicting events are quarantined, the stored
    ones kept, and the run fails saying so."""
    from audit.store.queries import AuditStore

    dsn = f"chdb://{tmp_path / 'db'}"

    def simulate(seed: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "audit.cli.main", "simulate", "--hours", "0.1", "--quiet",
                               "--seed", str(seed), "--start", "2026-12-01T09:00:00Z", "--out", dsn],
                              cwd=REPO, capture_output=True, text=True, timeout=300,
                              env={**os.environ, "CLAIMTRAIL_DATA_DIR": str(tmp_path / "data")})

    def stored() -> tuple[list[tuple], int]:
        store = AuditStore.open(dsn)
        try:
            events = store._query("SELECT seq, body FROM events ORDER BY seq, body").result_rows
            return events, len({seq for seq, _ in events})
        finally:
            store.close()

    first = simulate(3)
    assert (first.returncode, first.stderr) == (0, "")
    history, seqs = stored()
    assert len(history) == seqs > 0
    again = simulate(3)
    assert (again.returncode, again.stderr) == (0, "")
    second = simulate(4)
    assert second.returncode == 1
    (message,) = [line for line in second.stderr.splitlines() if line.startswith("claimtrail simulate:")]
    assert message.startswith(f"claimtrail simulate: --out {dsn}: the store quarantined ")
    assert "conflicts with the stored one" in message and "the stored one is kept" in message
    after, seqs_after = stored()
    # the first run's events as they were, the second's beyond them added, no seq written twice
    assert after[:len(history)] == history and seqs_after == len(after)


@pytest.mark.parametrize(
    ("start", "shown"),
    [
        pytest.param("1960-01-01T00:00:00Z", "1960-01-01T00:", id="before-1970"),
        pytest.param("2300-06-01T00:00:00Z", "2300-06-01T00:", id="after-2299"),
    ],
)
def test_a_run_the_store_quarantines_ends_in_failure_naming_why(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 start: str, shown: str) -> None:
    """The store keeps times of 1970..2299 only: a run outside them is quarantined whole, and a
    command that then exits 0 would leave the user believing the store holds the run."""
    from audit.cli.main import main

    target = f"chdb://{tmp_path}/db"
    assert main(["simulate", "--quiet", "--start", start, "--hours", "0.1", "--out", target]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"claimtrail simulate: --out {target}: the store quarantined ")
    assert "so history does not hold them; the first: " in err and f"'{shown}" in err
    assert "is outside 1970..2299" in err and err.count("\n") == 1
