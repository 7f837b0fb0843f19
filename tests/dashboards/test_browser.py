"""The demo stack in a real browser: API + ``streamlit run`` on loopback, Debian's headless Chromium.

Playwright drives ``/usr/bin/chromium`` (never a downloaded browser). The Fallback page must
draw Plotly charts and redraw after a filter is picked; the Decision explorer must show the
why-skipped answer with its per-device table. Screenshots land in ``artifacts/``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.dashboards.conftest import REPO, free_port, stop, wait_until_up

CHROMIUM = Path("/usr/bin/chromium")
# Flags that work headless on a small VM without a GPU, a sandbox or background updates.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = REPO / "artifacts"
PLOT = ".js-plotly-plot .main-svg"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed (make install adds it)"),
]


@pytest.fixture(scope="module")
def dashboard(api: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("dashboard") / "streamlit.log"
    port = free_port()
    cmd = [sys.executable, "-m", "streamlit", "run", str(REPO / "dashboards" / "app.py"),
           "--server.port", str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
           "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    env = {**os.environ, "CLAIMTRAIL_API": api}
    env.pop("CLAIMTRAIL_TOKEN", None)
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(f"{base}/_stcore/health", proc, log)
        yield base
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def test_fallback_page_draws_plotly_charts_and_redraws_after_a_tenant_is_picked(dashboard: str, browser: object) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
    page.goto(f"{dashboard}/fallback")
    page.wait_for_selector(PLOT, timeout=60_000)
    # the stacked area (the Sankey of pods needs pods in the event log, which this store lacks)
    assert page.locator(PLOT).count() >= 1
    page.get_by_text("fell back", exact=False).first.wait_for(timeout=30_000)

    page.locator(".st-key-f_tenant").click()
    page.get_by_role("option", name="alpha").click()
    page.get_by_text("pods with alternatives fell back", exact=False).first.wait_for(timeout=60_000)
    page.wait_for_selector(PLOT, timeout=60_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-fallback.png"), full_page=True)
    page.close()


def test_decision_explorer_shows_the_why_skipped_table(dashboard: str, browser: object) -> None:
    page = browser.new_page(viewport={"width": 1400, "height": 1200})  # type: ignore[attr-defined]
    page.goto(f"{dashboard}/explorer")
    search = page.locator(".st-key-ex_query input")
    search.fill("team-alpha/train-01")
    search.press("Enter")
    page.get_by_text("pod team-alpha/train-01", exact=False).first.wait_for(timeout=60_000)
    page.wait_for_selector(PLOT, timeout=60_000)  # the tier waterfalls
    table = page.locator(".st-key-why_devices")
    table.wait_for(state="visible", timeout=60_000)
    grid = table.locator("[data-testid='stDataFrame']")
    grid.wait_for(state="visible", timeout=60_000)
    assert grid.count() == 1
    # the grid keeps an accessible copy of its cells in the DOM
    table.get_by_text("gpu.nvidia.com/h100-node-0/gpu-2", exact=True).wait_for(state="attached", timeout=30_000)
    page.get_by_text("H100 skipped", exact=False).first.wait_for(timeout=30_000)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dashboard-explorer.png"), full_page=True)
    page.close()
