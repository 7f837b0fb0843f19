"""Entry point of the ClaimTrail dashboards: ``streamlit run dashboards/app.py``.

Declares the seven pages with ``st.navigation`` (each page is a script in ``panels/`` with a
stable URL path), draws the sign-in box, and runs the page the visitor chose. Data comes only
from the audit API named by ``CLAIMTRAIL_API``.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboards.filters import login_box
from dashboards.navigation import PAGES, PAGES_DIR

# A local icon: a :material/…: page icon makes the browser fetch the favicon from Google's font
# servers, and the dashboards must work on a machine without internet access.
st.set_page_config(page_title="ClaimTrail", page_icon=str(Path(__file__).with_name("favicon.svg")), layout="wide",
                   menu_items={"Get help": None, "Report a bug": None, "About": "ClaimTrail: DRA allocation audit"})
st.set_option("client.toolbarMode", "viewer")  # no "Deploy" button, however the app is started
navigation = st.navigation(
    [
        st.Page(PAGES_DIR / p.script, title=p.title, url_path=p.url_path, icon=p.icon, default=(i == 0))
        for i, p in enumerate(PAGES)
    ]
)
login_box()
navigation.run()
