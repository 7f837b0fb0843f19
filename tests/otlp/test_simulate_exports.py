"""`claimtrail simulate --otel` sends every decision to the OTLP endpoint of the environment, says
in its summary what the endpoints accepted, and fails when nothing was delivered."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.responses import Response

from audit.cli.main import main
from tests.otlp.loopback import receiver_app, running_receiver, serve, set_otel_env

REPO = Path(__file__).resolve().parents[2]
SIMULATE = ["simulate", "--seed", "2", "--hours", "1", "--quiet", "--otel"]


class Refusing:
    """ASGI wrapper answering 405 on some paths, as a trace-only backend does for logs and metrics."""

    def __init__(self, app: Any, paths: set[str]) -> None:
        self.app, self.paths, self.refused = app, paths, 0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] in self.paths:
            self.refused += 1
            while (await receive()).get("more_body"):
                pass
            await Response(status_code=405)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _expected(out: Path) -> tuple[int, int, int]:
    """Decisions, spans and verdict log records the written records make."""
    written = [json.loads(line) for line in out.read_text().splitlines()]
    spans = sum(1 + len(r["tiers"]) + (1 if r["wait_ms"] else 0) for r in written)
    verdicts = sum(min(64, sum(len(t["exemplars"]) for t in r["tiers"])) for r in written)
    return len(written), spans, verdicts


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends: nothing listens


def test_simulate_with_otel_exports_each_decision_with_its_digest(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "records.jsonl"
    with running_receiver() as rx:
        set_otel_env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url})
        code = main([*SIMULATE, "--out", str(out)])
        written = [json.loads(line) for line in out.read_text().splitlines()]
        received = rx.sink.records
    assert code == 0
    assert written, "the scenario produced no decisions"
    assert sorted(r.output_digest for r in received) == sorted(r["output_digest"] for r in written)
    decisions, spans, verdicts = _expected(out)
    summary = capsys.readouterr().out.split("OpenTelemetry export:\n")[1].splitlines()
    assert summary == [
        f"  decisions: {decisions:,} of {decisions:,} delivered",
        f"  traces: {spans:,} of {spans:,} spans delivered",
        f"  logs: {verdicts:,} of {verdicts:,} verdict log records delivered",
        "  metrics: 1 of 1 metric requests delivered",
    ]


def test_a_backend_refusing_logs_and_metrics_is_counted_in_the_summary(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "records.jsonl"
    app = receiver_app()
    refusing = Refusing(app.capture, {"/v1/logs", "/v1/metrics"})
    with serve(refusing) as url:
        set_otel_env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": url})
        code = main([*SIMULATE, "--out", str(out)])
    decisions, spans, verdicts = _expected(out)
    assert code == 0  # the traces arrived
    assert len(app.sink.records) == decisions == 124
    assert refusing.refused == 2  # one log request, one metrics request: refused requests are not retried
    summary = capsys.readouterr().out.split("OpenTelemetry export:\n")[1].splitlines()
    assert summary == [
        f"  decisions: {decisions} of {decisions} delivered",
        f"  traces: {spans} of {spans} spans delivered",
        f"  logs: 0 of {verdicts} verdict log records delivered; 1 of 1 requests failed "
        f"(HTTP 405 Method Not Allowed from {url}/v1/logs)",
        f"  metrics: 0 of 1 metric requests delivered; 1 of 1 requests failed "
        f"(HTTP 405 Method Not Allowed from {url}/v1/metrics)",
    ]


def test_an_endpoint_that_is_down_fails_the_command_with_the_counts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "records.jsonl"
    url = f"http://127.0.0.1:{_closed_port()}"
    set_otel_env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": url})
    code = main([*SIMULATE, "--out", str(out)])
    captured = capsys.readouterr()
    decisions, spans, verdicts = _expected(out)
    assert code == 1
    assert captured.err == (f"claimtrail simulate: --otel: none of the {decisions} decisions was delivered: "
                            f"{url}/v1/traces: Connection refused\n")
    summary = captured.out.split("OpenTelemetry export:\n")[1].splitlines()
    assert summary[:2] == [f"  decisions: 0 of {decisions} delivered",
                           f"  traces: 0 of {spans} spans delivered; 1 of 1 requests failed "
                           f"({url}/v1/traces: Connection refused)"]
    assert summary[2].startswith(f"  logs: 0 of {verdicts} verdict log records delivered; 1 of 1 requests failed")
    assert out.read_text().count("\n") == decisions  # the records themselves are kept


def test_otel_with_an_unsupported_protocol_is_one_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
    code = main(["simulate", "--scenario", str(REPO / "tests/fixtures/scenarios/small-cluster.yaml"),
                 "--hours", "0.1", "--quiet", "--otel"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("claimtrail simulate: --otel:") and "Traceback" not in err


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OTEL_LOGS_EXPORTER": "console"}, "OTEL_LOGS_EXPORTER: exporter 'console' is not offered (use 'otlp' or 'none')"),
        ({"OTEL_LOGS_EXPORTER": "none", "CLAIMTRAIL_OTEL_VERDICTS": "logs"},
         "CLAIMTRAIL_OTEL_VERDICTS: 'logs' sends verdicts as logs, but OTEL_LOGS_EXPORTER is 'none'"),
        ({"CLAIMTRAIL_OTEL_VERDICTS": "spans"}, "CLAIMTRAIL_OTEL_VERDICTS: 'spans' is not one of logs, events, both"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
         "OTEL_EXPORTER_OTLP_PROTOCOL: ClaimTrail exports over 'http/protobuf' only"),
    ],
    ids=["unknown-exporter", "logs-route-without-logs", "unknown-route", "grpc"],
)
def test_unusable_export_settings_are_one_line_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], env: dict[str, str], message: str) -> None:
    set_otel_env(monkeypatch, env)
    code = main([*SIMULATE])
    assert code == 2
    assert capsys.readouterr().err == f"claimtrail simulate: --otel: {message}\n"


@pytest.mark.parametrize(
    ("variable", "value"),
    [("OTEL_EXPORTER_OTLP_TIMEOUT", "-5"), ("OTEL_EXPORTER_OTLP_TIMEOUT", "0"),
     ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "-1")],
    ids=["negative", "zero", "per-signal-negative"],
)
def test_simulate_refuses_a_timeout_that_is_not_positive_in_one_line(variable: str, value: str) -> None:
    done = _simulate_child({variable: value})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"claimtrail simulate: --otel: {variable}: must be > 0 milliseconds, got {value}"]


def _simulate_child(variables: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``simulate --otel`` in a child process: a setting that killed the exporter's sender thread
    left the command waiting for it forever, which the child's timeout turns into a failure."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "CLAIMTRAIL_OTEL_"))}
    env.update({"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{_closed_port()}", "PYTHONPATH": str(REPO),
                **variables})
    return subprocess.run([sys.executable, "-m", "audit.cli.main", *SIMULATE, "--hours", "0.05"],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=60)


_LINE_BREAK = "the value of 'x-token' holds a line break or NUL, which HTTP cannot carry"


@pytest.mark.parametrize(
    ("variable", "value", "error"),
    [
        ("OTEL_EXPORTER_OTLP_HEADERS", "x-token=a%0Ab", _LINE_BREAK),
        ("OTEL_EXPORTER_OTLP_METRICS_HEADERS", "x-token=a%0Db", _LINE_BREAK),
        ("OTEL_EXPORTER_OTLP_HEADERS", "bad%20name=1", "'bad name' is not an HTTP header name"),
    ],
    ids=["line-feed-in-value", "carriage-return-in-metrics-value", "space-in-name"],
)
def test_simulate_refuses_a_header_http_cannot_carry_in_one_line(variable: str, value: str, error: str) -> None:
    done = _simulate_child({variable: value})
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [f"claimtrail simulate: --otel: {variable}: {error}"]


@pytest.mark.parametrize(
    ("variables", "error"),
    [
        ({"OTEL_EXPORTER_OTLP_CERTIFICATE": "/nonexistent/ca.pem"},
         "OTEL_EXPORTER_OTLP_CERTIFICATE: '/nonexistent/ca.pem': No such file or directory"),
        ({"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": str(REPO / "README.md")},
         f"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE: '{REPO / 'README.md'}': not a usable certificate or key"),
        ({"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/nonexistent/client.pem", "OTEL_EXPORTER_OTLP_CLIENT_KEY": "/k"},
         "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE: '/nonexistent/client.pem' (key OTEL_EXPORTER_OTLP_CLIENT_KEY: '/k'): "
         "No such file or directory"),
    ],
    ids=["missing-ca", "ca-not-pem", "missing-client-certificate"],
)
def test_simulate_refuses_an_unusable_certificate_in_one_line(variables: dict[str, str], error: str) -> None:
    done = _simulate_child({"OTEL_EXPORTER_OTLP_ENDPOINT": f"https://127.0.0.1:{_closed_port()}", **variables})
    assert done.returncode == 2
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"claimtrail simulate: --otel: {error}")
