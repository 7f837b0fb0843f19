"""``claimtrail demo``: the whole product on one laptop, in one command.

Starts the API server on an embedded store, simulates a realistic cluster day into it over
HTTP (the server owns the chDB directory, so nothing else opens it), starts the dashboard, asks
the API a why-H100-skipped question and verifies the simulated day by replay through the API (the
runs are stored, so the Replay page shows them), then prints the URLs and a summary and serves
until Ctrl-C, SIGTERM or SIGHUP, each of which stops both servers. ``--check`` does the same, checks that both servers answer and that every decision's
replay run is stored, and exits 0 — the form CI and newcomers use to prove a fresh machine works.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from audit.errors import UserError
from audit.store.connection import ID_INDEX_FILE, SPOOL_DIR, locked_by_another_process

DEMO_SEED = 7


def register(sub: Any) -> None:
    p = sub.add_parser("demo", help="simulate a cluster day, serve the API and dashboards")
    p.add_argument("--check", action="store_true", help="check that everything answers, then exit")
    p.add_argument("--data-dir", default=".claimtrail/demo", help="directory of the embedded store and the day's files, recreated (new, empty, or an earlier demo's)")
    p.add_argument("--api-port", type=int, default=8080)
    p.add_argument("--dashboard-port", type=int, default=8501)
    p.add_argument("--hours", type=float, default=24.0, help="simulated hours")
    p.set_defaults(func=run)


def _free(port: int) -> int:
    """Use the asked port when free, else any free loopback port (a second demo must not fail);
    port 0 asks for any free port."""
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return int(s.getsockname()[1])
        except OSError:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])


def _wait_http(url: str, proc: subprocess.Popen[bytes], what: str, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        _stop_if_signalled()
        if proc.poll() is not None:
            raise UserError(f"{what} exited with code {proc.returncode} before answering at {url}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise UserError(f"{what} did not answer at {url} within {timeout_s:.0f} s")


def _claimtrail(*args: str) -> list[str]:
    return [sys.executable, "-m", "audit.cli.main", *args]


def _step(msg: str) -> None:
    _stop_if_signalled()
    print(f"==> {msg}", flush=True)


class _Signalled:
    """The signal that asked the demo to stop, kept as well as raised: Python runs a handler
    wherever the main thread is, and an exception raised inside a finalizer or a weak-reference
    callback is printed and dropped, so the next step raises it again."""

    name = ""


def _stop_on(signum: int, _frame: object) -> None:
    """``kill`` (SIGTERM) and a closed terminal (SIGHUP) stop the demo as Ctrl-C does, so the
    ``finally`` below stops the API and the dashboard and the store lock is released."""
    _Signalled.name = signal.Signals(signum).name
    raise KeyboardInterrupt(_Signalled.name)


def _stop_if_signalled() -> None:
    if _Signalled.name:
        raise KeyboardInterrupt(_Signalled.name)


def run(args: argparse.Namespace) -> int:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _stop_on)
    data_dir = Path(args.data_dir)
    _recreate(data_dir)
    api_port, dash_port = _free(args.api_port), _free(args.dashboard_port)
    api = f"http://127.0.0.1:{api_port}"
    procs: list[subprocess.Popen[bytes]] = []
    env = {**os.environ, "CLAIMTRAIL_API": api}
    try:
        _step(f"starting the audit API on {api} (embedded ClickHouse in {data_dir})")
        procs.append(subprocess.Popen(_claimtrail("serve", "--create", "--dsn", f"chdb://{data_dir.resolve()}/db",
                                                  "--port", str(api_port), "--insecure-local"), env=env))
        _wait_http(f"{api}/readyz", procs[0], "the API server")

        _step(f"simulating {args.hours:g} hours of a GPU cluster (seed {DEMO_SEED}) into the API")
        records = data_dir / "records.jsonl"
        events = data_dir / "events.jsonl"
        sim = subprocess.run(_claimtrail("simulate", "--seed", str(DEMO_SEED), "--hours", str(args.hours),
                                         "--out", str(records), "--events", str(events)), env=env)
        if sim.returncode != 0:
            raise UserError(f"simulation failed with exit code {sim.returncode}")
        _post_jsonl(api, "events", events)
        _post_jsonl(api, "records", records)

        _step(f"starting the dashboard on http://127.0.0.1:{dash_port}")
        procs.append(subprocess.Popen(_claimtrail("dashboard", "--port", str(dash_port)), env=env,
                                      stdout=subprocess.DEVNULL))
        _wait_http(f"http://127.0.0.1:{dash_port}/_stcore/health", procs[1], "the dashboard")

        _summary(api, args.hours)
        _why_example(api)
        _step(f"verifying the simulated day by replay through the API  $ claimtrail replay --server {api}")
        rep = subprocess.run(_claimtrail("replay", "--server", api), env=env)
        if rep.returncode != 0:
            raise UserError(f"replay verification reported mismatches (exit {rep.returncode})")
        stored = _replay_runs_stored(api)
        decided = _decisions(api)
        print(f"replay runs stored: {stored:,} of {decided:,} decisions (the dashboard's Replay page shows them)",
              flush=True)
        if args.check and stored != decided:
            raise UserError(f"the store holds replay runs for {stored:,} of {decided:,} decisions")

        print(f"\nAPI        {api}/docs\nDashboard  http://127.0.0.1:{dash_port}\n", flush=True)
        if args.check:
            _step("demo check passed: API and dashboard answer")
            return 0
        print("Serving until Ctrl-C.", flush=True)
        _stop_if_signalled()
        signal.pause()
        return 0
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()


# everything a demo writes into its data directory: the store (with what it keeps beside its
# engine's directory) and the simulated day's files
DEMO_FILES = frozenset({"db", SPOOL_DIR, ID_INDEX_FILE, "records.jsonl", "events.jsonl"})


def _recreate(data_dir: Path) -> None:
    """Empty ``data_dir`` for a fresh day, refusing what a demo must not delete: a directory
    holding anything a demo does not write (``--data-dir ~`` is a typo, not a request to wipe a
    home), and a store another process runs on (a demo already serving from it)."""
    if data_dir.exists() and not data_dir.is_dir():
        raise UserError(f"--data-dir {data_dir}: is not a directory")
    if data_dir.is_dir():
        foreign = sorted(p.name for p in data_dir.iterdir() if p.name not in DEMO_FILES)
        if foreign:
            shown = ", ".join(foreign[:5]) + (", …" if len(foreign) > 5 else "")
            raise UserError(f"--data-dir {data_dir}: holds {shown}, which a demo does not write; the demo "
                            "deletes its data directory's contents, so name a new or empty directory")
        if locked_by_another_process(data_dir / "db"):
            raise UserError(f"--data-dir {data_dir}: its store is in use by another process (a demo or "
                            "claimtrail serve running on it); stop that first or name another directory")
        shutil.rmtree(data_dir)
    data_dir.mkdir(parents=True)


def _post_jsonl(api: str, kind: str, path: Path) -> None:
    if not path.exists():
        raise UserError(f"simulation wrote no {kind} file at {path}")
    body = path.read_bytes()
    chunk: list[bytes] = []
    size = 0
    lines = body.splitlines(keepends=True)
    for i, line in enumerate(lines):
        chunk.append(line)
        size += len(line)
        if size > 4_000_000 or i == len(lines) - 1:
            r = httpx.post(f"{api}/v1/ingest/{kind}", content=b"".join(chunk),
                           headers={"Content-Type": "application/x-ndjson"}, timeout=300)
            if r.status_code >= 300:
                raise UserError(f"ingest of {kind} failed: HTTP {r.status_code}: {r.text[:300]}")
            chunk, size = [], 0


def _replay_runs_stored(api: str) -> int:
    rows = httpx.get(f"{api}/v1/stats/replay", timeout=60).json()["rows"]
    return sum(int(r["runs"]) for r in rows)


def _decisions(api: str) -> int:
    rows = httpx.get(f"{api}/v1/stats/fallback", params={"group_by": "preferred"}, timeout=60).json()["rows"]
    return sum(int(r["decisions"]) for r in rows)


def _summary(api: str, hours: float) -> None:
    from audit.cli.cmd_simulate import DEFAULT_SCENARIO, figure_lines
    from audit.timestamps import format_time_ms, parse_time_ms
    from ingest.simulate.scenario import load_scenario_text

    start = parse_time_ms(load_scenario_text(Path(DEFAULT_SCENARIO).read_text(), "default").start)
    window = {"since": format_time_ms(start), "until": format_time_ms(start + int(hours * 3_600_000))}
    fair = httpx.get(f"{api}/v1/stats/fairness", params=window, timeout=300).json()
    fb = httpx.get(f"{api}/v1/stats/fallback", params=window, timeout=300).json()
    print(f"\nThe API's figures for {window['since']} .. {window['until']} (the same as the summary above):")
    print("\n".join(f"  {line}" if line else "" for line in figure_lines(fair, fb)))
    rows = httpx.get(f"{api}/v1/stats/fallback", params={"group_by": "preferred,model"}, timeout=60).json()["rows"]
    total = sum(int(r["decisions"]) for r in rows)
    print(f"\nDecisions in the store by preferred -> allocated model ({total:,} attempts):")
    print(f"  {'preferred':<10} {'allocated':<10} {'attempts':>9} {'allocated':>10} {'fallbacks':>10}")
    for r in rows:
        print(f"  {r['preferred'] or '-':<10} {r['model'] or '(none)':<10} {r['decisions']:>9,} "
              f"{r['allocated']:>10,} {r['fallback_decisions']:>10,}")


def _why_example(api: str) -> None:
    page = httpx.get(f"{api}/v1/decisions", params={"fallback": "true", "limit": 1}, timeout=60).json()
    items = page.get("items", [])
    if not items:
        print("\n(no fallback decision in this run to explain)")
        return
    rec = items[0]
    cmd = f"claimtrail why {rec['namespace']}/{rec['pod']} --model {rec['preferred_model']} --server {api}"
    _step(f"why was {rec['preferred_model']} skipped?  $ {cmd}")
    subprocess.run(_claimtrail("why", f"{rec['namespace']}/{rec['pod']}", "--model", rec["preferred_model"],
                               "--server", api))
