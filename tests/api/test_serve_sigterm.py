"""``claimtrail serve`` ends on SIGTERM as a service should: a graceful shutdown, the store closed
(its writers acknowledged, its parser child stopped, its pods tables folded), exit status 0, and
nothing for an operator to wonder about in its log."""

from __future__ import annotations

import signal
from pathlib import Path

from audit.store.queries import AuditStore
from tests.api.conftest import seed, start_server


def test_sigterm_closes_the_store_and_exits_zero(tmp_path: Path) -> None:
    srv, proc = start_server(tmp_path)
    seed(srv)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0  # not -15: the process did not die of the signal
    log = srv.log.read_text()
    assert "Traceback" not in log
    assert "leaked semaphore" not in log  # the parser child was stopped by close, not left behind
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:  # the data directory is free again
        assert store.client.query("SELECT count() FROM decisions").result_rows[0][0] > 0
