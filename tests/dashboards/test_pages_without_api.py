"""With the API down, every page still renders and says which data it could not load."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from dashboards.navigation import PAGES
from tests.dashboards.conftest import REPO, free_port

APP = str(REPO / "dashboards" / "app.py")


@pytest.mark.parametrize("script", [p.script for p in PAGES], ids=[p.url_path for p in PAGES])
def test_page_reports_an_unreachable_api_without_a_traceback(script: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAIMTRAIL_API", f"http://127.0.0.1:{free_port()}")
    at = AppTest.from_file(APP, default_timeout=30)
    at.run()
    at.switch_page(f"panels/{script}").run()
    assert not at.exception
    errors = [e.value for e in at.error]
    assert errors, "the page showed no error for an unreachable API"
    assert all("is not reachable" in e for e in errors)
