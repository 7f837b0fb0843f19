"""``make bench``: run every ``benchmarks/bench_*.py`` and print one performance table.

Each bench module exposes ``run() -> list[dict]``; a row is ``{"issue", "name", "value", "unit",
"target", "note"}``. Ratios against a baseline are measured inside one run, never compared with
numbers from another machine. Each module runs in a process of its own, so what one leaves
behind (caches, a large heap for the garbage collector to walk, open stores) does not slow the
next. The table is printed and written as JSON with the machine it ran on.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import platform
import subprocess
import sys
import tempfile
import time
from typing import Any


def machine() -> dict[str, Any]:
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpus": os.cpu_count(), "memory_gib": round(mem_gib, 1), "python": platform.python_version(),
            "platform": platform.platform()}


def run_module(name: str, rows_path: str) -> None:
    """Entry point of a module's own process: run it and write its rows as JSON."""
    rows = importlib.import_module(f"benchmarks.{name}").run()
    with open(rows_path, "w") as fh:
        json.dump(rows, fh)


def _rows_in_own_process(name: str) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-rows-") as work:
        path = os.path.join(work, "rows.json")
        done = subprocess.run([sys.executable, "-m", "benchmarks.run", "--module", name, "--rows-to", path],
                              check=False)
        if done.returncode != 0:
            raise SystemExit(f"benchmark {name} failed with exit code {done.returncode}")
        with open(path) as fh:
            rows: list[dict[str, Any]] = json.load(fh)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default="benchmarks/results.json")
    parser.add_argument("--only", default="", help="substring of bench module names to run")
    parser.add_argument("--module", help=argparse.SUPPRESS)  # set for a module's own process
    parser.add_argument("--rows-to", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.module:
        run_module(args.module, args.rows_to)
        return 0
    import benchmarks

    rows: list[dict[str, Any]] = []
    for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda m: m.name):
        if not info.name.startswith("bench_") or args.only not in info.name:
            continue
        started = time.perf_counter()
        print(f"# {info.name} ...", file=sys.stderr, flush=True)
        rows.extend(_rows_in_own_process(info.name))
        print(f"# {info.name} done in {time.perf_counter() - started:.1f}s", file=sys.stderr, flush=True)
    print(f"{'issue':<6} {'benchmark':<62} {'value':>14} {'unit':<10} target")
    for r in rows:
        value = r["value"]
        shown = f"{value:,.3f}" if isinstance(value, float) else f"{value:,}"
        print(f"{r['issue']:<6} {r['name']:<62} {shown:>14} {r['unit']:<10} {r.get('target', '')}")
    with open(args.json, "w") as fh:
        json.dump({"machine": machine(), "rows": rows}, fh, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
