"""Every page of a running demo in Debian's Chromium: nothing leaves 127.0.0.1, no error box shows.

A newcomer may have no internet access at all, so any request to another host fails the test
(and is aborted, so a page cannot quietly depend on it). ``/docs`` must render the API's
operations from assets the server itself serves.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from dashboards.navigation import PAGES
from tests.dashboards.test_browser import CHROMIUM, CHROMIUM_FLAGS
from tests.demo.conftest import Demo

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium is not installed (make install adds it)"),
]
ERROR_BOXES = "[data-testid='stAlertContentError'], [data-testid='stException']"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True)
        try:
            yield b
        finally:
            b.close()


def _open(browser: object, url: str) -> tuple[object, list[str]]:
    """A page on ``url`` whose requests to any host but 127.0.0.1 are recorded and aborted."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})  # type: ignore[attr-defined]
    outside: list[str] = []

    def guard(route: object) -> None:
        request_url = route.request.url  # type: ignore[attr-defined]
        if urlsplit(request_url).scheme in ("http", "https", "ws", "wss") and \
                urlsplit(request_url).hostname != "127.0.0.1":
            outside.append(request_url)
            route.abort()  # type: ignore[attr-defined]
        else:
            route.continue_()  # type: ignore[attr-defined]

    page.route("**/*", guard)  # type: ignore[attr-defined]
    page.goto(url)  # type: ignore[attr-defined]
    return page, outside


def _settle(page: object, timeout_s: float = 90.0) -> None:
    """Wait until the Streamlit script has run: the app is drawn and the running indicator has
    been gone for a second."""
    page.wait_for_selector("[data-testid='stMain']", timeout=60_000)  # type: ignore[attr-defined]
    page.wait_for_selector("[data-testid='stSidebarNav']", timeout=60_000)  # type: ignore[attr-defined]
    deadline, quiet_since = time.monotonic() + timeout_s, None
    while time.monotonic() < deadline:
        running = page.locator("[data-testid='stStatusWidget']").count()  # type: ignore[attr-defined]
        if running:
            quiet_since = None
        elif quiet_since is None:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since > 1.5:
            return
        page.wait_for_timeout(250)  # type: ignore[attr-defined]
    raise AssertionError("the page kept running")


@pytest.mark.parametrize("spec", PAGES, ids=[p.url_path for p in PAGES])
def test_every_page_renders_without_an_error_box_or_a_request_off_the_machine(demo: Demo, browser: object,
                                                                              spec: object) -> None:
    path = "" if spec is PAGES[0] else spec.url_path  # type: ignore[attr-defined]
    page, outside = _open(browser, f"{demo.dashboard}/{path}")
    try:
        _settle(page)
        errors = page.locator(ERROR_BOXES)  # type: ignore[attr-defined]
        shown = [errors.nth(i).inner_text() for i in range(errors.count()) if errors.nth(i).is_visible()]
        assert shown == []
        assert outside == []
        # the toolbar is in viewer mode: Streamlit's own "Deploy" button is not offered
        assert page.get_by_role("button", name="Deploy").count() == 0  # type: ignore[attr-defined]
        assert page.locator("[data-testid='stAppDeployButton']").count() == 0  # type: ignore[attr-defined]
    finally:
        page.close()  # type: ignore[attr-defined]


def test_api_docs_render_the_operations_from_local_assets(demo: Demo, browser: object) -> None:
    page, outside = _open(browser, f"{demo.api}/docs")
    try:
        page.wait_for_selector(".opblock", timeout=60_000)  # type: ignore[attr-defined]
        operations = page.locator(".opblock-summary-path").all_inner_texts()  # type: ignore[attr-defined]
        assert "/v1/decisions" in [o.replace("\u200b", "") for o in operations]
        assert outside == []
    finally:
        page.close()  # type: ignore[attr-defined]
