"""Dashboard first-render time per page against an API serving a store of ≥ 1,000,000 decisions.

The store comes from the store benchmark's bulk builder (cached under ``.claimtrail``); a real
``claimtrail serve`` process owns it and each page is rendered once with Streamlit's AppTest,
caches cleared before every page so each render asks the API afresh (issue 8 target: ≤ 2 s).
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 2.0
MIN_DECISIONS = 1_000_000


def _store_dir() -> tuple[Path, int]:
    """A chDB directory holding ≥ 1M decisions, built (or reused) by the store benchmark's builder."""
    bench_store = importlib.import_module("benchmarks.bench_store")
    builder = getattr(bench_store, "build_million_store", None) or getattr(bench_store, "ensure_big_store", None)
    if builder is None:
        raise RuntimeError("benchmarks/bench_store.py exposes no 1M-decision store builder")
    built = builder()
    path, count = (built if isinstance(built, tuple) else (built, MIN_DECISIONS))
    return Path(path), int(count)


def _render_seconds(script: str) -> tuple[float, int]:
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_data.clear()
    at = AppTest.from_file(str(REPO / "dashboards" / "app.py"), default_timeout=120)
    at.run()
    st.cache_data.clear()
    started = time.perf_counter()
    at.switch_page(f"panels/{script}").run()
    elapsed = time.perf_counter() - started
    problems = len(at.exception) + len(at.error)
    return elapsed, problems


def run() -> list[dict[str, Any]]:
    sys.path.insert(0, str(REPO))
    from dashboards.navigation import PAGES
    from tests.dashboards.conftest import start_api, stop

    try:
        store_dir, decisions = _store_dir()
    except (ImportError, RuntimeError) as exc:
        return [{"issue": "#8", "name": "dashboard first render (1M decisions)", "value": 0, "unit": "s",
                 "target": f"<= {TARGET_S} s", "note": f"not measured: {exc}"}]
    dsn_dir = store_dir.parent if store_dir.name == "db" else store_dir
    log = store_dir.parent / "bench-dashboards-serve.log"
    base, proc = start_api(dsn_dir, log)
    os.environ["CLAIMTRAIL_API"] = base
    rows: list[dict[str, Any]] = []
    try:
        for page in PAGES:
            seconds, problems = _render_seconds(page.script)
            rows.append({
                "issue": "#8",
                "name": f"dashboard first render: {page.title}",
                "value": round(seconds, 3),
                "unit": "s",
                "target": f"<= {TARGET_S} s",
                "note": f"{decisions:,} decisions; AppTest, cold cache"
                        + (f"; {problems} error/exception boxes" if problems else ""),
            })
    finally:
        stop(proc)
    return rows
