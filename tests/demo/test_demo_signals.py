"""``kill`` or a closed terminal stops the demo as Ctrl-C does: both servers go and the store is free."""

from __future__ import annotations

import signal
import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from audit.store.queries import AuditStore
from tests.demo.conftest import start_demo

pytestmark = pytest.mark.slow


def _answers(url: str) -> bool:
    parts = urlsplit(url)
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex((parts.hostname or "", parts.port or 0)) == 0


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_stops_the_api_and_the_dashboard_and_frees_the_store(tmp_path: Path, signum: int) -> None:
    demo = start_demo(tmp_path / "data", hours=0.5)
    try:
        assert _answers(demo.api) and _answers(demo.dashboard)
        assert demo.stop(signum) == 130
        assert not _answers(demo.api), "the API server still listens"
        assert not _answers(demo.dashboard), "the dashboard still listens"
    finally:
        demo.kill_group()
    with AuditStore.open(f"chdb://{demo.data_dir}/db", create=False) as store:  # the lock is released
        assert store.client.query("SELECT count() > 0 FROM decisions").result_rows[0][0] == 1
