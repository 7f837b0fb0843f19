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


def _table(at: AppTest, first_column: str, column: str) -> list[dict]:
    """The rows of the page's table whose first column is ``first_column`` and that has ``column``."""
    for frame in at.dataframe:
        df = frame.value
        if list(df.columns)[:1] == [first_column] and column in df.columns:
            return df.to_dict("records")
    raise AssertionError(f"no table starting with {first_column!r}: {[list(f.value.columns) for f in at.dataframe]}")


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100.0 * x:.1f} %"


def test_fairness_page_shows_the_apis_waits_per_hour_and_tenant(simulated: tuple[str, dict],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    base, _ = simulated
    tenants = [t["tenant"] for t in httpx.get(f"{base}/v1/stats/fairness", timeout=120).json()["tenants"]]
    expected = []
    for tenant in tenants:
        rows = httpx.get(f"{base}/v1/stats/fairness", params={"tenant": tenant, "by": "hour"}, timeout=120).json()["by_hour"]
        expected += [(r["hour"], tenant, r["pods_started"], r["wait_p50_s"], r["wait_p95_s"], r["wait_p99_s"],
                      r["pending_at_end"], r["failed"], r["starving_pods"], r["longest_wait_s"]) for r in rows]
    expected.sort(key=lambda r: (r[0], r[1]))
    # the day exercises the rows: several tenants over three hours, some of them waiting
    assert len(tenants) >= 3 and len({r[0] for r in expected}) == int(HOURS)
    assert any(r[4] > 0 for r in expected)
    at = open_page("3_fairness.py", base, monkeypatch)
    assert not at.error, [e.value for e in at.error]
    shown = _table(at, "hour", "wait p95 (s)")
    assert [(r["hour"], r["tenant"], r["pods started"], r["wait p50 (s)"], r["wait p95 (s)"], r["wait p99 (s)"],
             r["pending at end"], r["failed"], r["starving"], r["longest wait (s)"]) for r in shown] == expected
    peak = max(expected, key=lambda r: (r[5], r[0], r[1]))
    at.radio(key="fair_hour_q").set_value("p99").run()
    assert [c.value for c in at.caption if c.value.startswith("Reading: The longest hourly")] == [
        f"Reading: The longest hourly wait p99 is {peak[1]}'s at {peak[0]} ({peak[5]:,.0f} s over {peak[2]:,} pods started)."]


def test_fallback_page_shows_the_apis_regret_per_model_and_hour(simulated: tuple[str, dict],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    base, _ = simulated
    api = {by: httpx.get(f"{base}/v1/stats/fallback", params={"by": by}, timeout=120).json()[f"by_{by}"]
           for by in ("model", "hour")}
    assert len(api["hour"]) == int(HOURS) and sum(r["fallbacks"] for r in api["model"]) > 0
    at = open_page("2_fallback.py", base, monkeypatch)
    assert not at.error, [e.value for e in at.error]
    for by, first in (("model", "preferred"), ("hour", "hour")):
        shown = _table(at, first, "regret rate")
        assert [(r[first], r["pods with alternatives"], r["first-choice rate"], r["fallbacks"], r["regretted"],
                 r["regret rate"]) for r in shown] == [
            (r[first], r["pods_with_preference"], _pct(r["first_choice_rate"]), r["fallbacks"], r["regretted"],
             _pct(r["regret_rate"])) for r in api[by]]
