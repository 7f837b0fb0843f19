"""Export from a child process: same records arrive, errors surface in the caller."""

from __future__ import annotations

import pytest

from audit.telemetry import ExporterProcess, FlushReport, TelemetryConfigError, TelemetryError
from tests.otlp.loopback import running_receiver
from tests.telemetry.records_factory import make_record


def _env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "3600000")


def test_child_process_export_delivers_every_decision_with_its_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    originals = [make_record(i) for i in range(5)]
    with running_receiver() as rx:
        _env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
        exporter = ExporterProcess(batch_size=2)
        for record in originals:
            exporter.export(record)
        exporter.observe_replay("gpu-east", matched=False)
        assert exporter.flush() == FlushReport(5, ())
        assert exporter.close() == FlushReport(5, ())
    received = sorted(rx.sink.records, key=lambda r: r.attempt)
    assert [r.output_digest for r in received] == [r.output_digest for r in originals]
    assert len(rx.capture.bodies("/v1/metrics")) >= 1


def test_bad_record_time_is_raised_in_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    _env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    with ExporterProcess() as exporter:
        record = make_record(time="soon")
        with pytest.raises(TelemetryError, match=rf"DecisionRecord {record.decision_id}: time: 'soon'"):
            exporter.export(record)
        assert exporter.flush() == FlushReport(0, ())


def test_bad_configuration_is_raised_before_a_process_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    _env(monkeypatch, {"OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/json"})
    with pytest.raises(TelemetryConfigError, match="OTEL_EXPORTER_OTLP_LOGS_PROTOCOL: 'http/json'"):
        ExporterProcess()


def test_closed_exporter_refuses_more_work(monkeypatch: pytest.MonkeyPatch) -> None:
    _env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    exporter = ExporterProcess()
    exporter.close()
    with pytest.raises(TelemetryError, match="ExporterProcess: closed"):
        exporter.export(make_record())


def test_a_dead_export_process_is_reported_not_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import signal

    _env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    exporter = ExporterProcess(batch_size=1)
    assert exporter.pid is not None
    os.kill(exporter.pid, signal.SIGKILL)
    with pytest.raises(TelemetryError, match=r"ExporterProcess: export process exited with code -9"):
        for _ in range(50):  # the first sends may still fit in the pipe before the death is seen
            exporter.export(make_record())
        exporter.flush()
