"""One simulated day, every surface, one set of figures.

``claimtrail simulate`` sends a day into a real ``claimtrail serve`` (embedded chDB) over HTTP and
prints its summary (what ``make demo`` logs); the API's /v1/stats/fairness and /v1/stats/fallback
for the same window must equal the ``audit.metrics`` reports over the event log the simulator
wrote, value for value, and the summary must print those same values.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from audit.events import WorldEvent
from audit.metrics import Window, fairness_report, fallback_report, fold_lifecycle
from audit.world import format_time_ms, parse_time_ms
from tests.api.conftest import TOKENS, Server, start_server, stop

REPO = Path(__file__).resolve().parents[2]
DAY_SCENARIO = REPO / "ingest" / "simulate" / "scenarios" / "cluster-day.yaml"
START = parse_time_ms("2026-11-02T00:00:00Z")
HOURS = 24


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv, proc = start_server(tmp_path_factory.mktemp("surfaces"))
    try:
        yield srv
    finally:
        stop(proc)


def _simulate(server: Server, tmp: Path, scenario: Path, cluster: str) -> tuple[str, list[WorldEvent]]:
    events = tmp / f"{cluster}.events.jsonl"
    text = scenario.read_text().replace("cluster: demo", f"cluster: {cluster}")
    assert f"cluster: {cluster}" in text
    sc = tmp / f"{cluster}.yaml"
    sc.write_text(text)
    run = subprocess.run([sys.executable, "-m", "audit.cli.main", "simulate", "--scenario", str(sc), "--hours",
                          str(HOURS), "--seed", "1", "--quiet", "--out", server.base, "--events", str(events)],
                         cwd=REPO, capture_output=True, text=True, timeout=900,
                         env={**os.environ, "CLAIMTRAIL_TOKEN": TOKENS["admin"], "PYTHONPATH": str(REPO)})
    assert run.returncode == 0, run.stderr[-2000:]
    log = [WorldEvent.from_dict(json.loads(line)) for line in events.read_text().splitlines()]
    deadline = time.monotonic() + 300
    while server.get("/v1/ingest/events/last-seq", cluster=cluster).json()["last_seq"] != log[-1].seq:
        assert time.monotonic() < deadline, "the server did not store the whole event log"
        time.sleep(0.5)
    return run.stdout, log


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _assert_summary_shows(summary: str, fair: dict[str, Any], fb: dict[str, Any]) -> None:
    assert (f"first-choice rate: {_pct(fb['first_choice_rate'])} of {fb['pods_with_preference']:,} DRA pods"
            in summary)
    assert f"fallbacks {fb['fallbacks']:,}, regretted {fb['regretted']:,} ({_pct(fb['regret_rate'])}" in summary
    assert f"whole window {fair['jain_whole']:.3f}" in summary
    rows = {line.split()[0]: line.split() for line in summary.splitlines()[-len(fair["tenants"]):]}
    for t in fair["tenants"]:
        cells = rows[t["tenant"]]
        assert [int(c.replace(",", "")) for c in (cells[1], cells[5], cells[6], cells[7])] == [
            t["pods_started"], t["pending_at_end"], t["failed"], t["starving_pods"]]
        assert cells[8:] == [f"{t['device_hours']:.1f}", f"{t['h100_eq_hours']:.1f}",
                             f"{t['entitlement_h100_eq_hours']:.1f}"]
    for path in fb["paths"]:
        assert any(line.startswith(f"{path['preferred']} -> {path['allocated']} ")
                   and line.split()[-1] == f"{path['pods']:,}" for line in summary.splitlines())


@pytest.mark.parametrize("variant", ["drf", "off"])
def test_summary_api_and_reference_agree_on_a_simulated_day(server: Server, tmp_path: Path, variant: str) -> None:
    scenario = DAY_SCENARIO
    if variant == "off":
        scenario = tmp_path / "fairness-off.yaml"
        text = DAY_SCENARIO.read_text()
        assert "mode: drf" in text
        scenario.write_text(text.replace("mode: drf", 'mode: "off"'))
    cluster = f"day-{variant}"
    summary, log = _simulate(server, tmp_path, scenario, cluster)
    window = Window(START, START + HOURS * 3_600_000)
    life = fold_lifecycle(log, cluster)
    fair, fb = fairness_report(life, window), fallback_report(life, window)
    assert fb["fallbacks"] > 0 and fair["tenants"], "the day must exercise the figures"
    since, until = format_time_ms(window.since_ms), format_time_ms(window.until_ms)
    api_fair = server.get("/v1/stats/fairness", cluster=cluster, since=since, until=until).json()
    api_fb = server.get("/v1/stats/fallback", cluster=cluster, since=since, until=until).json()
    assert {k: api_fair[k] for k in fair} == fair
    assert {k: api_fb[k] for k in fb} == fb
    _assert_summary_shows(summary, fair, fb)
