"""A server restarted on its store answers the stats from the pod tables it wrote, not by folding
the event log again, and gives the same figures; an event stored after the restart is folded in.

The server runs with ``--log-level INFO`` so that its log says when it read a lifecycle back.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from audit.metrics import Window, fairness_report, fallback_report, fold_lifecycle
from audit.timestamps import format_time_ms
from tests.api.conftest import REPO, TOKENS, Server, auth, free_port, stop, wait_ready
from tests.metrics.eventlog import MIN, T0
from tests.metrics.histories import PodPlan, history

READ_BACK = "read back from the pod tables"


def _serve(root: Path) -> tuple[Server, subprocess.Popen[bytes]]:
    (root / "tokens.yaml").write_text(json.dumps({"tokens": [{"token": TOKENS["admin"], "admin": True}]}))
    port = free_port()
    log = root / "serve.log"
    proc = subprocess.Popen([sys.executable, "-m", "audit.cli.main", "--log-level", "INFO", "serve", "--create", "--dsn",
                             f"chdb://{root}/db", "--host", "127.0.0.1", "--port", str(port), "--tokens",
                             str(root / "tokens.yaml")], cwd=REPO, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    return wait_ready(Server(f"http://127.0.0.1:{port}", log), proc)


def _figures(server: Server, window: Window) -> dict[str, Any]:
    params = {"cluster": "c1", "since": format_time_ms(window.since_ms), "until": format_time_ms(window.until_ms)}
    fair = server.get("/v1/stats/fairness", **params).json()
    fb = server.get("/v1/stats/fallback", **params).json()
    return {"fairness": {k: fair[k] for k in ("jain_whole", "jain_contention", "contention_windows", "tenants")},
            "fallback": {k: fb[k] for k in ("pods_with_preference", "first_choice_rate", "fallbacks", "regretted",
                                            "regret_rate", "regret_window_s", "paths")}}


def _expected(events: list[Any], window: Window) -> dict[str, Any]:
    life = fold_lifecycle(events, "c1")
    return {"fairness": fairness_report(life, window), "fallback": fallback_report(life, window)}


def _post(server: Server, events: list[Any]) -> None:
    body = "".join(json.dumps(e.to_dict()) + "\n" for e in events).encode()
    r = httpx.post(server.base + "/v1/ingest/events", content=body, headers=auth("admin"), timeout=60)
    assert r.status_code == 200, r.text


def _eventually(check: Any, seconds: float = 60) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return bool(check())


def test_a_restarted_server_answers_from_the_pod_tables_and_folds_what_comes_later(tmp_path: Path) -> None:
    log = history([PodPlan("a", "one", 2, 0, 10, 30, "bind", 0), PodPlan("b", "two", 1, 5, 20, 40, "bind", 1),
                   PodPlan("c", "dp", 1, 8, 0, 20, "bind", 0), PodPlan("a", "one", 4, 30, 5, 0, "pend", 0)])
    window = Window(T0, T0 + 120 * MIN)
    first, later = log.events[:-3], log.events[-3:]
    server, proc = _serve(tmp_path)
    try:
        _post(server, first)
        assert _eventually(lambda: _figures(server, window) == _expected(first, window))
        assert READ_BACK not in server.log.read_text()  # a fresh store: folded from its events
    finally:
        stop(proc)
    server, proc = _serve(tmp_path)
    try:
        assert _figures(server, window) == _expected(first, window)
        assert READ_BACK in server.log.read_text()
        _post(server, later)  # past the tables: the whole log is folded again, the new events with it
        assert _eventually(lambda: _figures(server, window) == _expected(log.events, window))
    finally:
        stop(proc)
