"""``kill`` or a closed terminal stops the demo as Ctrl-C does: both servers go and the store is free."""

from __future__ import annotations

import signal
import socket
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from audit.cli import cmd_demo
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


def test_a_stop_signal_dropped_in_a_finalizer_stops_the_demo_at_its_next_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # Python runs a signal handler wherever the main thread is; an exception raised inside a
    # finalizer is handed to sys.unraisablehook and dropped, and the demo would go on.
    dropped: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: dropped.append(u.exc_value))
    monkeypatch.setattr(cmd_demo._Signalled, "name", "")

    class Doomed:
        def __del__(self) -> None:
            cmd_demo._stop_on(signal.SIGTERM, None)

    Doomed()
    assert [type(e) for e in dropped] == [KeyboardInterrupt]
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"):
        cmd_demo._step("simulating the next thing")
