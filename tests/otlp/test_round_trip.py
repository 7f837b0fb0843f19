"""Decisions exported by our exporter come back from our receiver with the same output digest."""

from __future__ import annotations

import pytest

from audit.records import Outcome, RetryClass
from ingest.otlp import MemorySink, start_server
from tests.otlp.loopback import running_receiver, telemetry_from_env
from tests.telemetry.records_factory import make_record


def _decisions() -> list:
    return [
        make_record(0),
        make_record(
            1,
            outcome=Outcome.UNSCHEDULABLE.value,
            devices=[],
            node="",
            tier_index=-1,
            allocated_model="",
            fallback=False,
            retry_class=RetryClass.BINDING_CONFLICT.value,
            backoff_ms=2000,
        ),
        make_record(2, pod="inference-ü-0", message="naïve unicode ✓ survives"),
    ]


@pytest.mark.parametrize(
    "compression", ["none", "gzip"], ids=["http-protobuf-plain", "http-protobuf-gzip"]
)
def test_http_round_trip_keeps_output_digest(monkeypatch: pytest.MonkeyPatch, compression: str) -> None:
    originals = _decisions()
    with running_receiver() as rx:
        telemetry = telemetry_from_env(
            monkeypatch,
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": rx.url,
                "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
                "OTEL_EXPORTER_OTLP_COMPRESSION": compression,
            },
        )
        for record in originals:
            telemetry.export(record)
        telemetry.shutdown()
        encodings = {c.content_encoding for c in rx.capture.bodies("/v1/traces")}
    assert encodings == ({"gzip"} if compression == "gzip" else {""})
    received = sorted(rx.sink.records, key=lambda r: r.attempt)
    assert [r.output_digest for r in received] == [r.output_digest for r in originals]
    assert [r.compute_output_digest() for r in received] == [r.output_digest for r in originals]
    assert [r.to_dict() for r in received] == [r.to_dict() for r in originals]
    counts = rx.counters.snapshot()
    assert counts["records"] == 3
    assert counts["parts"] == 3 * (2 + 1 + 3)  # per decision: two tier spans, the wait span, three verdict logs
    assert counts["malformed"] == counts["rejected"] == counts["ignored"] == 0


def test_grpc_round_trip_keeps_output_digest(monkeypatch: pytest.MonkeyPatch) -> None:
    originals = _decisions()
    sink = MemorySink()
    server, port = start_server(sink)
    try:
        telemetry = telemetry_from_env(
            monkeypatch,
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
                "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
                "OTEL_EXPORTER_OTLP_INSECURE": "true",
            },
        )
        # the receiver has no metrics service; traces and logs are what round-trips
        telemetry.meter_provider.shutdown()
        for record in originals:
            telemetry.export(record)
        telemetry.tracer_provider.shutdown()
        telemetry.logger_provider.shutdown()
    finally:
        server.stop(grace=None)
    received = sorted(sink.records, key=lambda r: r.attempt)
    assert [r.output_digest for r in received] == [r.output_digest for r in originals]
    assert [r.to_dict() for r in received] == [r.to_dict() for r in originals]


@pytest.mark.parametrize(
    ("env", "grpc_signals"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, {"traces", "logs"}),
        ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, {"traces"}),
        ({}, set()),
    ],
    ids=["grpc-everywhere", "grpc-traces-only", "http-default"],
)
def test_from_env_builds_the_exporters_the_protocol_names(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], grpc_signals: set[str]
) -> None:
    telemetry = telemetry_from_env(monkeypatch, env)
    try:
        kinds = {
            "traces": type(telemetry.span_exporter).__module__,
            "logs": type(telemetry.log_exporter).__module__,
        }
    finally:
        telemetry.shutdown()
    assert {signal for signal, module in kinds.items() if ".proto.grpc." in module} == grpc_signals
    assert {signal for signal, module in kinds.items() if ".proto.http." in module} == {"traces", "logs"} - grpc_signals
