"""Where a command finds the audit API and what it authenticates with.

``--server`` (``--api`` for the dashboards), else ``CLAIMTRAIL_API``, else the local default, and
``--token``, else ``CLAIMTRAIL_TOKEN``. One home, so every command reads the same settings and
refuses a URL it could not use with the same line, before it sends anything or starts a server
whose every page would fail.
"""

from __future__ import annotations

import os
from urllib.parse import urlsplit

from audit.errors import UserError

DEFAULT_API = "http://127.0.0.1:8080"


def api_url(value: str | None, flag: str = "--server", default: str = DEFAULT_API) -> str:
    """The API's base URL without a trailing slash; UserError naming ``flag`` (or the variable it
    came from) unless it is an http(s) URL with a host. ``default`` '' leaves no default."""
    url = value or os.environ.get("CLAIMTRAIL_API") or default
    where = flag if value else "CLAIMTRAIL_API" if os.environ.get("CLAIMTRAIL_API") else flag
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UserError(f"{where} {url!r}: expected an http(s):// URL of the audit API, e.g. {DEFAULT_API}")
    return url.rstrip("/")


def auth_headers(token: str | None) -> dict[str, str]:
    """The bearer header for ``token`` (else ``CLAIMTRAIL_TOKEN``); none without one."""
    token = token or os.environ.get("CLAIMTRAIL_TOKEN", "")
    return {"Authorization": f"Bearer {token}"} if token else {}
