"""One simulated day, every surface, one set of figures.

``claimtrail simulate`` sends a day into a real ``claimtrail serve`` (embedded chDB) over HTTP and
prints its summary (what ``make demo`` logs); the API's /v1/stats/fairness, /v1/stats/fallback and
/v1/stats/health for the same window must equal the ``audit.metrics`` reports over the event log
the simulator wrote, value for value; the summary must print those values and the dashboard pages
(Streamlit's AppTest, reading what they render) must show them. The expected figures are the
reference functions' on the ``PodLife`` rows; the server computes them on its columns.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from streamlit.testing.v1 import AppTest

from audit.events import WorldEvent
from audit.metrics import Window, fairness_report, fallback_report, fold_lifecycle, health_report
from audit.metrics.breakdown import regret_breakdown, wait_breakdown
from audit.timestamps import format_time_ms, parse_time_ms
from tests.api.conftest import TOKENS, Server, own_server

REPO = Path(__file__).resolve().parents[2]
DAY_SCENARIO = REPO / "ingest" / "simulate" / "scenarios" / "cluster-day.yaml"
START = parse_time_ms("2026-11-02T00:00:00Z")
HOURS = 24


server = own_server("surfaces")


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
        time.sleep(0.1)
    return run.stdout, log


def _summary_pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _assert_summary_shows(summary: str, fair: dict[str, Any], fb: dict[str, Any]) -> None:
    assert (f"first-choice rate: {_summary_pct(fb['first_choice_rate'])} of {fb['pods_with_preference']:,} DRA pods"
            in summary)
    assert f"fallbacks {fb['fallbacks']:,}, regretted {fb['regretted']:,} ({_summary_pct(fb['regret_rate'])}" in summary
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


@dataclass(frozen=True)
class Day:
    server: Server
    cluster: str
    summary: str
    fair: dict[str, Any]
    fb: dict[str, Any]
    life: Any
    window: Window

    def params(self) -> dict[str, str]:
        return {"cluster": self.cluster, "since": format_time_ms(self.window.since_ms),
                "until": format_time_ms(self.window.until_ms)}


@pytest.fixture(scope="module", params=["drf", "off"])
def day(request: pytest.FixtureRequest, server: Server, tmp_path_factory: pytest.TempPathFactory) -> Day:
    """The default scenario's day, and the same day with fairness off, simulated into the server."""
    tmp = tmp_path_factory.mktemp(f"day-{request.param}")
    scenario = DAY_SCENARIO
    if request.param == "off":
        scenario = tmp / "fairness-off.yaml"
        text = DAY_SCENARIO.read_text()
        assert "mode: drf" in text
        scenario.write_text(text.replace("mode: drf", 'mode: "off"'))
    cluster = f"day-{request.param}"
    summary, log = _simulate(server, tmp, scenario, cluster)
    window = Window(START, START + HOURS * 3_600_000)
    life = dataclasses.replace(fold_lifecycle(log, cluster), columns=None)
    fair, fb = fairness_report(life, window), fallback_report(life, window)
    assert fb["fallbacks"] > 0 and fair["tenants"], "the day must exercise the figures"
    return Day(server, cluster, summary, fair, fb, life, window)


def test_summary_api_and_reference_agree_on_a_simulated_day(day: Day) -> None:
    api_fair = day.server.get("/v1/stats/fairness", **day.params()).json()
    api_fb = day.server.get("/v1/stats/fallback", **day.params()).json()
    assert {k: api_fair[k] for k in day.fair} == day.fair
    assert {k: api_fb[k] for k in day.fb} == day.fb
    _assert_summary_shows(day.summary, day.fair, day.fb)


def test_without_since_and_until_the_figures_cover_the_first_event_through_the_last(day: Day) -> None:
    """A window excludes its end, so the default ends a millisecond past the last event: the
    figures are those of that window (the last instant included) and the answer names it."""
    first, last = day.life.policies[0][0], day.life.end_ms
    window = Window(first, last + 1)
    named = {"since": format_time_ms(first), "until": format_time_ms(last + 1)}
    for kind, reference in (("fairness", fairness_report), ("fallback", fallback_report), ("health", health_report)):
        body = day.server.get(f"/v1/stats/{kind}", cluster=day.cluster).json()
        expected = reference(day.life, window)
        assert {k: body[k] for k in expected} == expected, kind
        assert body["window"] == named, kind
    given = day.params()
    answer = day.server.get("/v1/stats/fairness", **given).json()
    assert answer["window"] == {"since": given["since"], "until": given["until"]}


def test_a_tenant_sees_its_own_row_and_the_others_folded(day: Day) -> None:
    api_fair = day.server.get("/v1/stats/fairness", "team-a", **day.params()).json()
    api_fb = day.server.get("/v1/stats/fallback", "team-a", **day.params()).json()
    assert [t["tenant"] for t in api_fair["tenants"]] == ["team-a", "(others)"]
    assert {k: api_fair[k] for k in day.fair} == fairness_report(day.life, day.window, scope="team-a")
    assert {k: api_fb[k] for k in day.fb} == fallback_report(day.life, day.window, scope="team-a")
    # the folded row pools the other tenants' pods: its counts are their sums
    others = api_fair["tenants"][1]
    rest = [t for t in day.fair["tenants"] if t["tenant"] != "team-a"]
    assert others["pods_started"] == sum(t["pods_started"] for t in rest)
    assert others["starving_pods"] == sum(t["starving_pods"] for t in rest)


@pytest.mark.parametrize("who", ["admin", "team-a"])
def test_rows_per_hour_and_per_model_are_the_days_breakdown(day: Day, who: str) -> None:
    scope = None if who == "admin" else who
    got = {(kind, by): day.server.get(f"/v1/stats/{kind}", who, by=by, **day.params()).json()
           for kind in ("fairness", "fallback") for by in ("hour", "model")}
    for by in ("hour", "model"):
        assert got["fairness", by][f"by_{by}"] == wait_breakdown(day.life, day.window, by, scope)
        assert got["fallback", by][f"by_{by}"] == regret_breakdown(day.life, day.window, by, scope)
    assert len(got["fairness", "hour"]["by_hour"]) == HOURS
    if scope is None:  # every pod of the window is in one hour's row and one model's row
        started = sum(t["pods_started"] for t in day.fair["tenants"])
        for by in ("hour", "model"):
            assert sum(r["pods_started"] for r in got["fairness", by][f"by_{by}"]) == started
            assert sum(r["fallbacks"] for r in got["fallback", by][f"by_{by}"]) == day.fb["fallbacks"]
            assert sum(r["regretted"] for r in got["fallback", by][f"by_{by}"]) == day.fb["regretted"]
        by_model = got["fairness", "model"]["by_model"]
        assert sum(r["pending_at_end"] for r in by_model) == sum(t["pending_at_end"] for t in day.fair["tenants"])


@pytest.mark.parametrize("who", ["admin", "team-a"])
def test_rows_per_tenant_and_hour_in_one_answer_are_each_tenants_hours(day: Day, who: str) -> None:
    """One request gives what a request per tenant with ``by=hour`` gives (the Fairness page asked
    once per tenant): every tenant of the window for an admin, a tenant caller's own only."""
    got = day.server.get("/v1/stats/fairness", who, by="tenant_hour", **day.params()).json()["by_tenant_hour"]
    tenants = [t["tenant"] for t in day.fair["tenants"]] if who == "admin" else [who]
    if who == "admin":
        assert len(tenants) >= 2
    one_by_one = [{"tenant": t, **r} for t in tenants
                  for r in day.server.get("/v1/stats/fairness", who, by="hour", tenant=t, **day.params()).json()["by_hour"]]
    assert got == one_by_one
    assert got == [{"tenant": t, **r} for t in tenants for r in wait_breakdown(day.life, day.window, "hour", t)]
    assert len(got) == HOURS * len(tenants)


@pytest.mark.parametrize(("path", "query", "message"), [
    ("fairness", {"by": "tenant"}, "by 'tenant': expected hour, model or tenant_hour"),
    ("fallback", {"by": "tenant_hour"}, "by: rows per tenant and hour come with /v1/stats/fairness, not "
                                        "/v1/stats/fallback"),
    ("health", {"by": "hour"}, "by: rows per hour or model come with"),
    ("fallback", {"by": "hour", "group_by": "reason"}, "by: rows per hour or model come with"),
], ids=["unknown-grouping", "tenant-hours-of-fallback", "other-endpoint", "with-skip-reasons"])
def test_a_bad_by_is_a_400_naming_it(day: Day, path: str, query: dict[str, str], message: str) -> None:
    r = day.server.get(f"/v1/stats/{path}", **query, **day.params())
    assert r.status_code == 400 and message in r.json()["detail"], r.text


def _page(day: Day, script: str, monkeypatch: pytest.MonkeyPatch) -> AppTest:
    monkeypatch.setenv("CLAIMTRAIL_API", day.server.base)
    monkeypatch.setenv("CLAIMTRAIL_TOKEN", TOKENS["admin"])
    at = AppTest.from_file(str(REPO / "dashboards" / "app.py"), default_timeout=180)
    at.run()
    at.switch_page(f"panels/{script}").run()
    p = day.params()
    at.text_input(key="f_cluster").input(p["cluster"]).run()
    at.text_input(key="f_since").input(p["since"]).run()
    at.text_input(key="f_until").input(p["until"]).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100.0 * x:.1f} %"


def test_the_dashboard_pages_show_the_same_figures(day: Day, monkeypatch: pytest.MonkeyPatch) -> None:
    fair, fb = day.fair, day.fb
    at = _page(day, "3_fairness.py", monkeypatch)
    shown = {m.label: m.value for m in at.metric}
    assert shown["Jain's index, whole window"] == f"{fair['jain_whole']:.3f}"
    assert shown["Jain's index under contention"] == (
        "–" if fair["jain_contention"] is None else f"{fair['jain_contention']:.3f}")
    assert shown["Contended hours"] == f"{fair['contention_windows']:,}"
    table = next(f.value for f in at.dataframe if "pods started" in f.value.columns).to_dict("records")
    assert [(r["tenant"], r["pods started"], r["wait p50 (s)"], r["wait p95 (s)"], r["wait p99 (s)"],
             r["pending at end"], r["failed"], r["starving"], r["H100-eq-hours"], r["entitlement (H100-eq-h)"])
            for r in table] == [
        (t["tenant"], t["pods_started"], t["wait_p50_s"], t["wait_p95_s"], t["wait_p99_s"], t["pending_at_end"],
         t["failed"], t["starving_pods"], t["h100_eq_hours"], t["entitlement_h100_eq_hours"]) for t in fair["tenants"]]
    hourly = next(f.value for f in at.dataframe if "hour" in f.value.columns).to_dict("records")
    want = sorted(({"tenant": t["tenant"], **r} for t in fair["tenants"]
                   for r in wait_breakdown(day.life, day.window, "hour", t["tenant"])),
                  key=lambda r: (r["hour"], r["tenant"]))
    assert [(r["hour"], r["tenant"], r["pods started"], r["wait p95 (s)"], r["pending at end"], r["starving"])
            for r in hourly] == [(w["hour"], w["tenant"], w["pods_started"], w["wait_p95_s"], w["pending_at_end"],
                                  w["starving_pods"]) for w in want]

    at = _page(day, "2_fallback.py", monkeypatch)
    shown = {m.label: m.value for m in at.metric}
    assert (shown["First-choice rate"], shown["Fallbacks (pods)"], shown["Regretted"], shown["Regret rate"]) == (
        _pct(fb["first_choice_rate"]), f"{fb['fallbacks']:,}", f"{fb['regretted']:,}", _pct(fb["regret_rate"]))

    at = _page(day, "1_overview.py", monkeypatch)
    shown = {m.label: m.value for m in at.metric}
    assert (shown["First-choice rate"], shown["Fallbacks (pods)"], shown["Pending at window end"]) == (
        _pct(fb["first_choice_rate"]), f"{fb['fallbacks']:,}",
        f"{sum(t['pending_at_end'] for t in fair['tenants']):,}")

    health = day.server.get("/v1/stats/health", **day.params()).json()
    expected = health_report(day.life, day.window)
    assert {k: health[k] for k in expected} == expected
    at = _page(day, "4_health.py", monkeypatch)
    shown = {m.label: m.value for m in at.metric}
    assert (shown["Unhealthy devices"], shown["Unhealthy device-hours"]) == (
        f"{expected['unhealthy_devices']:,}", f"{expected['unhealthy_device_hours']:,.1f}")
