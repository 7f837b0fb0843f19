"""The dashboards over a simulated cluster: decisions made by the engine replay to a match.

A seeded three-hour simulation (``claimtrail simulate``) is sent to a real API server with its
world event log; the explorer's "Replay now" and the Replay page's window verification must
then report that re-executing the decisions reproduced their recorded digests.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
from streamlit.testing.v1 import AppTest

from tests.dashboards.conftest import REPO, start_api, stop

APP = str(REPO / "dashboards" / "app.py")
SEED, HOURS = "3", "3"


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict]]:
    """(API base URL, the newest fallback decision) for a server holding the simulated day."""
    root = tmp_path_factory.mktemp("simulated")
    records, events = root / "records.jsonl", root / "events.jsonl"
    subprocess.run([sys.executable, "-m", "audit.cli.main", "simulate", "--seed", SEED, "--hours", HOURS,
                    "--out", str(records), "--events", str(events), "--quiet"], cwd=REPO, check=True, capture_output=True)
    base, proc = start_api(root, root / "serve.log")
    try:
        for kind, path in (("events", events), ("records", records)):
            r = httpx.post(f"{base}/v1/ingest/{kind}", content=path.read_bytes(), timeout=300)
            assert r.status_code == 200 and r.json()["quarantined"] == 0, r.text
        newest = httpx.get(f"{base}/v1/decisions", params={"fallback": "true", "limit": 1}, timeout=60).json()["items"][0]
        yield base, newest
    finally:
        stop(proc)


def open_page(script: str, base: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("CLAIMTRAIL_API", base)
    monkeypatch.delenv("CLAIMTRAIL_TOKEN", raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    at.switch_page(f"panels/{script}").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_replay_now_reproduces_an_engine_decision(simulated: tuple[str, dict], monkeypatch: pytest.MonkeyPatch) -> None:
    base, decision = simulated
    at = open_page("5_explorer.py", base, monkeypatch)
    at.radio(key="ex_kind").set_value("Decision id").run()
    at.text_input(key="ex_query").input(decision["decision_id"]).run()
    assert {m.label: m.value for m in at.metric}["Allocated"] == decision["allocated_model"]
    at.button(key="ex_replay").click().run()
    assert [s.value for s in at.success] == [
        f"Match: re-executing {decision['decision_id'][:8]} reproduced the recorded output digest."
    ]
    assert not at.error


def test_verifying_a_window_matches_every_decision(simulated: tuple[str, dict], monkeypatch: pytest.MonkeyPatch) -> None:
    base, decision = simulated
    at = open_page("6_replay.py", base, monkeypatch)
    at.text_input(key="f_cluster").input(decision["cluster"])
    at.text_input(key="f_since").input("2026-01-01T00:00:00Z")
    at.text_input(key="f_until").input("2027-01-01T00:00:00Z")
    at.number_input(key="rp_limit").set_value(40).run()
    at.button(key="rp_verify").click().run()
    assert not at.error, [e.value for e in at.error]
    shown = {m.label: m.value for m in at.metric}
    assert (shown["Replayed"], shown["Matched"], shown["Mismatched"]) == ("40", "40", "0")
