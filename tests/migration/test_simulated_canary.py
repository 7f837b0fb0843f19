"""The simulator's migration cohort (device-plugin pods beside DRA pods on claim templates v1/v2)
goes through ``claimtrail migration report`` with allocation lifetimes from its world events."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audit.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "ingest" / "simulate" / "scenarios" / "cluster-day.yaml"
THRESHOLDS = ROOT / "deploy" / "migration" / "thresholds.yaml"


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("sim")
    records, events = d / "records.jsonl", d / "events.jsonl"
    argv = ["simulate", "--scenario", str(SCENARIO), "--seed", "1", "--hours", "2", "--quiet",
            "--out", str(records), "--events", str(events)]
    assert main(argv) == 0
    return records, events


def test_simulated_canary_forms_cohorts_with_measured_utilisation(
    simulated: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    records, events = simulated
    capsys.readouterr()
    argv = ["migration", "report", "--records", str(records), "--events", str(events),
            "--thresholds", str(THRESHOLDS), "-o", "json"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"device-plugin", "dra/v2"} <= set(out["cohorts"])
    for cohort in ("device-plugin", "dra/v2"):
        util = out["cohorts"][cohort]["gpu_utilisation"]
        assert util["n"] > 0 and 0.0 < util["estimate"] <= 1.0
    # the scenario sends a tenth of the jobs to the device plugin: too few for min_pods 100 in 2 h
    assert out["baseline_pods"] < 100
    assert out["verdict"] == "hold"
    assert any(r.startswith("need at least 100 matched pods per cohort") for r in out["reasons"])
