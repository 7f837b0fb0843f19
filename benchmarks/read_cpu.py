"""The server's CPU time per read: a decision by id, its summary "why", the newest page of a tenant.

Under many concurrent readers on few cores, a read's latency is about the number of readers per core
times the CPU each request costs the server, so that cost is what this measures, away from the
concurrency benchmark's noise. A copy of an existing store (the concurrency benchmark's by default,
``.claimtrail/bench-concurrency/store``) is served by a real ``claimtrail serve`` with an admin and a
tenant token; one client then asks each read for decisions it has not asked for before (so no cached
answer is served), one request at a time, and the server process's user + system time from
``/proc/<pid>/stat`` over those requests, divided by their number, is reported per read and caller.

    python -m benchmarks.read_cpu [STORE_DIR] [--requests N] [--code OTHER_CHECKOUT]
"""

from __future__ import annotations

import argparse
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.cores import process_cpu
from benchmarks.serving import start_serve, wait_ready

REPO = Path(__file__).resolve().parents[1]
DEFAULT_STORE = REPO / ".claimtrail" / "bench-concurrency" / "store"
TOKENS = "tokens:\n  - token: admin-token\n    admin: true\n  - token: tenant-token\n    tenant: {tenant}\n"


def _serve(store: Path, tokens: Path, code: Path) -> tuple[subprocess.Popen[bytes], str]:
    from tests.api.conftest import free_port

    port = free_port()
    proc = start_serve(["--dsn", f"chdb://{store}/db", "--port", str(port), "--tokens", str(tokens),
                        "--rate-limit", "1000000", "--burst", "1000000", "--max-in-flight", "1000"],
                       store / "serve.log", code)
    base = f"http://127.0.0.1:{port}"
    wait_ready(proc, base, store / "serve.log", 600)  # a first start may apply migrations that backfill
    return proc, base


def measure(store: Path, n: int, tenant: str, code: Path = REPO) -> list[tuple[str, float, float]]:
    """(read, server CPU ms per request, wall ms per request) for each read and caller."""
    from tests.api.conftest import stop

    tokens = store / "tokens.yaml"
    tokens.write_text(TOKENS.format(tenant=tenant))
    proc, base = _serve(store, tokens, code)
    admin, own = {"Authorization": "Bearer admin-token"}, {"Authorization": "Bearer tenant-token"}
    out: list[tuple[str, float, float]] = []
    try:
        with httpx.Client(base_url=base, timeout=300) as client:
            every: list[str] = []
            mine: list[str] = []  # the tenant's, listed by the admin: nothing is cached for the tenant caller
            for day in range(1, 8):
                for ids, only in ((every, {}), (mine, {"tenant": tenant})):
                    page = client.get("/v1/decisions", headers=admin,
                                      params={"limit": 1000, "until": f"2026-11-0{day}T00:00:00Z", **only}).json()
                    ids += [item["decision_id"] for item in page["items"]]
            random.Random(17).shuffle(every)
            random.Random(18).shuffle(mine)
            if len(every) < 2 * n or len(mine) < 2 * n:
                raise RuntimeError(f"found {len(every)} decisions and {len(mine)} of tenant {tenant}; need {2 * n} each")
            reads: list[tuple[str, list[tuple[str, dict[str, str], dict[str, str]]]]] = [
                ("decision by id (admin)", [(f"/v1/decisions/{d}", {}, admin) for d in every[:n]]),
                ("why summary (admin)", [(f"/v1/decisions/{d}/why", {"model": "H100"}, admin) for d in every[n:2 * n]]),
                ("newest 50 of a tenant (admin)",
                 [("/v1/decisions", {"limit": "50", "tenant": tenant, "until": f"2026-11-08T00:{j // 60:02d}:{j % 60:02d}Z"},
                   admin) for j in range(n)]),
                ("decision by id (tenant)", [(f"/v1/decisions/{d}", {}, own) for d in mine[:n]]),
                ("why summary (tenant)", [(f"/v1/decisions/{d}/why", {"model": "H100"}, own) for d in mine[n:2 * n]]),
                ("newest 50 (tenant)",
                 [("/v1/decisions", {"limit": "50", "until": f"2026-11-08T01:{j // 60:02d}:{j % 60:02d}Z"}, own)
                  for j in range(n)]),
            ]
            for name, requests in reads:
                before, started = process_cpu(proc.pid), time.perf_counter()
                for path, params, headers in requests:
                    answer = client.get(path, params=params, headers=headers)
                    if answer.status_code != 200:
                        raise RuntimeError(f"GET {path}: HTTP {answer.status_code}: {answer.text[:300]}")
                cpu = process_cpu(proc.pid) - before
                out.append((name, 1000 * cpu / n, 1000 * (time.perf_counter() - started) / n))
    finally:
        stop(proc)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", nargs="?", default=str(DEFAULT_STORE), help="a store directory (holding db/); copied first")
    parser.add_argument("--requests", type=int, default=200, help="requests per read")
    parser.add_argument("--tenant", default="acme", help="the tenant of the tenant token")
    parser.add_argument("--code", default=str(REPO), help="the checkout whose server is measured (to compare two)")
    args = parser.parse_args()
    if not (Path(args.store) / "db").is_dir():
        raise SystemExit(f"{args.store}: no store there (run the concurrency benchmark once to build one)")
    work = Path(tempfile.mkdtemp(prefix="read-cpu-"))
    try:
        copy = work / "store"
        # the served copy may be migrated and merged; the engine links its databases relatively
        shutil.copytree(Path(args.store) / "db", copy / "db", symlinks=True)
        for name, cpu, wall in measure(copy, args.requests, args.tenant, Path(args.code)):
            print(f"{name:32s} server CPU {cpu:6.2f} ms/request   wall {wall:6.2f} ms/request")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
