"""The dashboard's pages: script, title, URL path and icon, in menu order.

Kept apart from ``app.py`` so tools (tests, the benchmark) can list the pages without running
the app. The URL paths are what links and the browser test open (``/fallback``, ``/explorer``).
The page scripts live in ``panels/``, not ``pages/``: with a ``pages/`` directory next to the
entry script, ``streamlit run`` switches to its older directory-driven navigation and never
executes ``app.py``, so ``st.navigation``, the page titles and the sign-in box would be lost.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

PAGES_DIR = Path(__file__).resolve().parent / "panels"


class PageSpec(NamedTuple):
    script: str
    title: str
    url_path: str
    icon: str


PAGES = [
    PageSpec("1_overview.py", "Overview", "overview", ":material/dashboard:"),
    PageSpec("2_fallback.py", "Fallback", "fallback", ":material/swap_horiz:"),
    PageSpec("3_fairness.py", "Fairness", "fairness", ":material/balance:"),
    PageSpec("4_health.py", "Health & failures", "health", ":material/monitor_heart:"),
    PageSpec("5_explorer.py", "Decision explorer", "explorer", ":material/search:"),
    PageSpec("6_replay.py", "Replay", "replay", ":material/replay:"),
    PageSpec("7_migration.py", "Migration", "migration", ":material/conversion_path:"),
]
