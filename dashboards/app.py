"""Entry point of the ClaimTrail dashboards: ``streamlit run dashboards/app.py``.

Declares the seven pages with ``st.navigation`` (each page is a script in ``panels/`` with a
stable URL path), draws the sign-in box, and runs the page the visitor chose. Data comes only
from the audit API named by ``CLAIMTRAIL_API``.
"""

from __future__ import annotations

import streamlit as st

from dashboards.filters import login_box
from dashboards.navigation import PAGES, PAGES_DIR

st.set_page_config(page_title="ClaimTrail", page_icon=":material/memory:", layout="wide")
navigation = st.navigation(
    [
        st.Page(PAGES_DIR / p.script, title=p.title, url_path=p.url_path, icon=p.icon, default=(i == 0))
        for i, p in enumerate(PAGES)
    ]
)
login_box()
navigation.run()
