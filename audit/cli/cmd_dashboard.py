"""``claimtrail dashboard``: start the Streamlit dashboards from the installed package.

``streamlit run dashboards/app.py`` needs a source checkout; this command finds ``app.py``
wherever the ``dashboards`` package is installed (the container image holds no sources) and
starts Streamlit with the settings a shared deployment wants: headless, no usage statistics,
and the toolbar in viewer mode, which hides Streamlit's "Deploy" button. The process becomes
Streamlit (``exec``), so signals reach it directly.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

from audit.cli.apiurl import api_url
from audit.errors import UserError


def register(sub: Any) -> None:
    p = sub.add_parser("dashboard", help="serve the dashboards (Streamlit) over the audit API")
    p.add_argument("--api", default=None, help="audit API URL (default: CLAIMTRAIL_API, else http://127.0.0.1:8080)")
    p.add_argument("--address", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8501)
    p.set_defaults(func=run)


def app_path() -> Path:
    spec = importlib.util.find_spec("dashboards")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("the dashboards package is not installed next to claimtrail")
    return Path(next(iter(spec.submodule_search_locations))) / "app.py"


def streamlit_argv(address: str, port: int) -> list[str]:
    return [sys.executable, "-m", "streamlit", "run", str(app_path()),
            f"--server.address={address}", f"--server.port={port}", "--server.headless=true",
            "--browser.gatherUsageStats=false", "--client.toolbarMode=viewer"]


def run(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:
        raise UserError(f"--port {args.port}: expected 1..65535")
    os.environ["CLAIMTRAIL_API"] = api_url(args.api, "--api")
    argv = streamlit_argv(args.address, args.port)
    sys.stdout.flush()
    os.execv(argv[0], argv)
    return 0  # not reached: the process is Streamlit now
