"""`claimtrail simulate --otel` sends every decision to the OTLP endpoint of the environment."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from audit.cli.main import main
from tests.otlp.loopback import running_receiver

REPO = Path(__file__).resolve().parents[2]


def test_simulate_with_otel_exports_each_decision_with_its_digest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "records.jsonl"
    with running_receiver() as rx:
        for name in [n for n in os.environ if n.startswith("OTEL_")]:
            monkeypatch.delenv(name)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", rx.url)
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "3600000")
        code = main(["simulate", "--seed", "3", "--hours", "1", "--out", str(out), "--quiet", "--otel"])
        assert code == 0
        written = [json.loads(line) for line in out.read_text().splitlines()]
        received = rx.sink.records
    assert written, "the scenario produced no decisions"
    assert sorted(r.output_digest for r in received) == sorted(r["output_digest"] for r in written)


def test_otel_with_an_unsupported_protocol_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
    code = main(["simulate", "--scenario", str(REPO / "tests/fixtures/scenarios/small-cluster.yaml"),
                 "--hours", "0.1", "--quiet", "--otel"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("claimtrail simulate: --otel:") and "Traceback" not in err
