"""``claimtrail migration report`` and ``GET /v1/stats/migration`` judge the same decisions alike:
a real server on a chDB store, started without ``--migration-thresholds``, and the CLI without
``--thresholds``, both fall back to the shipped ``deploy/migration/thresholds.yaml`` and give the
same stratified figures, matched and unmatched pods and verdict. The device-plugin pods' records
name no model: both read what each asked for from the same world events (the server from its
store, the CLI from ``--events`` or, without it, from the server's ``GET /v1/events``)."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from audit import thresholds_file
from audit.cli import cmd_migration
from audit.records import to_jsonl
from tests.api.conftest import REPO, TOKENS, Server, start_server, stop
from tests.migration.strata import ONE_SIDED_STRATA, records, world_events


@pytest.fixture(scope="module")
def default_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    """The server, and the world events file it was given."""
    pytest.importorskip("audit.store.queries", reason="the store is not in this tree yet")
    root = tmp_path_factory.mktemp("strata")
    srv, proc = start_server(root)
    events = root / "events.jsonl"
    events.write_text("".join(json.dumps(e.to_dict()) + "\n" for e in world_events(ONE_SIDED_STRATA)))
    try:
        r = srv.post("/v1/ingest/events", content=events.read_bytes())
        assert r.status_code == 200 and r.json()["quarantined"] == 0, r.text
        r = srv.post("/v1/ingest/records", content=to_jsonl(records(ONE_SIDED_STRATA)).encode())
        assert r.status_code == 200, r.text
        yield srv, events
    finally:
        stop(proc)


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested figures as path → leaf, so floats can be compared within rounding (pods reach the
    sums in another order through the store)."""
    if isinstance(value, dict):
        return {k: v for key, sub in value.items() for k, v in _flat(sub, f"{prefix}.{key}").items()}
    if isinstance(value, list):
        return {k: v for i, sub in enumerate(value) for k, v in _flat(sub, f"{prefix}[{i}]").items()}
    return {prefix: value}


def _report(server: Server, who: str, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "audit.cli.main", "migration", "report", "--server", server.base,
         "--token", TOKENS[who], *extra, "-o", "json"], cwd=REPO, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("events_file", [True, False], ids=["events-file", "server-events"])
def test_cli_and_api_give_the_same_stratified_figures(default_server: tuple[Server, Path], events_file: bool) -> None:
    server, events = default_server
    api = server.get("/v1/stats/migration")
    assert api.status_code == 200, api.text
    body = api.json()
    cli = _report(server, "admin", *(["--events", str(events)] if events_file else []))
    assert cli.returncode == 0, cli.stderr
    assert cli.stderr == ""
    printed = json.loads(cli.stdout)
    del printed["cohorts"]  # the API gives the per-cohort figures as its rows
    expected, got = _flat(printed), _flat(body["comparison"])
    assert sorted(got) == sorted(expected)
    for path, value in expected.items():
        if isinstance(value, float) and not math.isnan(value):
            assert got[path] == pytest.approx(value, rel=1e-12, abs=1e-9), path
        else:
            assert got[path] == value, path
    # the figures by hand (tests/migration/test_stratified.py): equal within 2 strata, 1 + 3 pods unmatched
    latency = next(c for c in printed["comparisons"] if c["metric"] == "scheduling_latency_ms")
    assert latency["regression"]["estimate"] == pytest.approx(0.0, abs=1e-9) and latency["strata"] == 2
    assert (printed["baseline"], printed["candidate"]) == ("device-plugin", "dra/v2")
    assert (printed["strata"], printed["matched_pods"], printed["unmatched_pods"]) == (
        2, {"baseline": 8, "candidate": 8}, {"baseline": 1, "candidate": 3})
    assert printed["verdict"] == "hold"  # the shipped file asks for 100 matched pods per cohort
    rows = {(r["track"], r["template_version"]): (r["matched_pods"], r["unmatched_pods"], r["verdict"])
            for r in body["rows"]}
    assert rows == {("device-plugin", ""): (8, 1, "hold"), ("dra", "v2"): (8, 3, "hold")}


def test_a_tenant_token_without_events_file_is_told_events_need_an_admin_token(
        default_server: tuple[Server, Path]) -> None:
    server, events = default_server
    cli = _report(server, "team-a")
    assert cli.returncode == 2 and cli.stdout == ""
    assert cli.stderr == (f"claimtrail migration: --server {server.base}: GET /v1/events answered 403: the world events "
                          "carry every tenant's pods and need an admin token (--token or CLAIMTRAIL_TOKEN); or give the "
                          "run's world events with --events FILE\n")
    assert _report(server, "team-a", "--events", str(events)).returncode == 0


def test_the_api_default_is_the_file_the_cli_defaults_to() -> None:
    args = argparse.Namespace(thresholds=None, min_pods=None, confidence=None, candidate=None, baseline=None)
    shipped = REPO / "deploy" / "migration" / "thresholds.yaml"
    assert Path(thresholds_file.SHIPPED) == shipped
    assert cmd_migration.thresholds_path(args) == thresholds_file.SHIPPED
    assert cmd_migration._read_thresholds(cmd_migration.thresholds_path(args), args) == thresholds_file.shipped()
