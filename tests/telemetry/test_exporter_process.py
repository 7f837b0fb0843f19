"""Export from a child process: same records arrive, errors surface in the caller."""

from __future__ import annotations

import os

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from audit.allocator.outcome import DeviceVerdict, TierEvidence
from audit.records import TierBlocker
from audit.telemetry import ExporterProcess, FlushReport, TelemetryConfigError, TelemetryError
from audit.telemetry import schema as s
from tests.otlp.loopback import running_receiver
from tests.telemetry.records_factory import POD, make_record


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


def test_a_record_that_cannot_be_sent_is_refused_in_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    _env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    with ExporterProcess() as exporter:
        record = make_record()
        record.blockers = [TierBlocker("insufficient_on_node", 0, {"callback": lambda: None})]
        with pytest.raises(TelemetryError, match=rf"DecisionRecord {record.decision_id}: cannot be handed to the export process"):
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


def _verdict_logs(bodies: list[bytes]) -> int:
    return sum(
        1
        for body in bodies
        for rl in ExportLogsServiceRequest.FromString(body).resource_logs
        for sl in rl.scope_logs
        for lr in sl.log_records
        if lr.event_name == s.VERDICT_EVENT
    )


def test_child_process_delivers_every_decision_and_verdict_exactly_once(monkeypatch: pytest.MonkeyPatch) -> None:
    originals = [make_record(i) for i in range(150)]  # more than two batches of 64
    with running_receiver() as rx:
        _env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
        with ExporterProcess() as exporter:
            for record in originals:
                exporter.export(record)
            assert exporter.flush().exported == 150
        log_bodies = [c.plain() for c in rx.capture.bodies("/v1/logs")]
    assert sorted(r.decision_id for r in rx.sink.records) == sorted(r.decision_id for r in originals)
    assert _verdict_logs(log_bodies) == 150 * 3  # every exemplar of every decision, once


def test_child_process_sends_no_byte_with_a_redacted_pod_name(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = [TierEvidence("c", "gpu/h100", 0, [DeviceVerdict("gpu.nvidia.com/node-h1/gpu-7", "in_use", (("holder", f"{POD}-old"),))])]
    with running_receiver() as rx:
        _env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url, "CLAIMTRAIL_OTEL_REDACT": "hash_pod_names"})
        with ExporterProcess() as exporter:
            exporter.export(make_record(), extra, {"owner": POD})
            exporter.observe_replay("gpu-east", matched=True)
            exporter.flush()
        bodies = [c.plain() for c in rx.capture.bodies()]
    assert {c.path for c in rx.capture.bodies()} == {"/v1/traces", "/v1/logs", "/v1/metrics"}
    assert [b for b in bodies if POD.encode() in b] == []
    assert len(rx.sink.records) == 1


def test_the_export_child_runs_at_a_lower_cpu_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    _env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    ours = os.getpriority(os.PRIO_PROCESS, 0)
    with ExporterProcess(niceness=7) as exporter:
        exporter.flush()  # the child lowers its priority before it answers anything
        assert exporter.pid is not None
        child = os.getpriority(os.PRIO_PROCESS, exporter.pid)
    assert child == min(ours + 7, 19)


def test_flush_reports_the_childs_cpu_without_making_reports_unequal(monkeypatch: pytest.MonkeyPatch) -> None:
    with running_receiver() as rx:
        _env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url})
        with ExporterProcess() as exporter:
            first = exporter.flush()
            for i in range(3):
                exporter.export(make_record(i), (), None)
            second = exporter.flush()
    assert 0.0 <= first.cpu_seconds <= second.cpu_seconds
    assert second == FlushReport(3, ())


def test_batches_sent_by_a_caller_that_dies_are_still_exported(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess
    import sys
    import time
    from pathlib import Path

    caller = (
        "import os\n"
        "from audit.telemetry import ExporterProcess\n"
        "from tests.telemetry.records_factory import make_record\n"
        "exporter = ExporterProcess(batch_size=2)\n"
        "for i in range(4):\n"
        "    exporter.export(make_record(i))\n"
        "os._exit(0)  # no flush, no close: the export child only sees its input end\n"
    )
    with running_receiver() as rx:
        _env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url})
        done = subprocess.run([sys.executable, "-c", caller], cwd=Path(__file__).resolve().parents[2], timeout=120)
        assert done.returncode == 0
        deadline = time.monotonic() + 60  # a wait for the orphaned child, not a speed check
        while len(rx.sink.records) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        received = sorted(r.attempt for r in rx.sink.records)
    assert received == [0, 1, 2, 3]
