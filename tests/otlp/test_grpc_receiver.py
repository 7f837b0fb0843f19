"""OTLP/gRPC receiver on loopback: partial success for rejected items, UNAVAILABLE when the store fails,
RESOURCE_EXHAUSTED for a message over its size limit."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from audit.records import DecisionRecord
from audit.telemetry import schema as s
from ingest.otlp import MemorySink, ReceiverCounters, start_server
from tests.otlp.payloads import exported, log, logs, span
from tests.telemetry.records_factory import make_record


@pytest.fixture
def grpc_receiver() -> Iterator[tuple[MemorySink, ReceiverCounters, grpc.Channel]]:
    sink, counters = MemorySink(), ReceiverCounters()
    server, port = start_server(sink, counters=counters)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield sink, counters, channel
    finally:
        channel.close()
        server.stop(grace=None)


def test_grpc_traces_keep_good_decisions_and_report_rejected_spans(grpc_receiver) -> None:  # noqa: ANN001
    sink, counters, channel = grpc_receiver
    request, _ = exported([make_record(0)])
    request.resource_spans[0].scope_spans[0].spans.append(span(s.ROOT_SPAN, {s.DECISION_ID: "d"}, span_id=5))
    response = trace_service_pb2_grpc.TraceServiceStub(channel).Export(request, timeout=10)
    assert response.partial_success.rejected_spans == 1
    assert [r.attempt for r in sink.records] == [0]
    assert [(q.source, q.kind) for q in sink.quarantined] == [("otlp/grpc", "span")]
    assert counters.snapshot()["rejected"] == 1


def test_grpc_logs_service_accepts_verdict_logs(grpc_receiver) -> None:  # noqa: ANN001
    sink, counters, channel = grpc_receiver
    _, verdicts = exported([make_record(0)])
    response = logs_service_pb2_grpc.LogsServiceStub(channel).Export(verdicts, timeout=10)
    assert not response.HasField("partial_success")
    assert counters.snapshot()["parts"] == 3
    bad = logs(log(s.DECISION_EVENT, {s.RECORD: "[]"}))
    response = logs_service_pb2_grpc.LogsServiceStub(channel).Export(bad, timeout=10)
    assert response.partial_success.rejected_log_records == 1
    assert "expected a JSON object, got list" in sink.quarantined[0].error


class FailingSink:
    def write_records(self, records: list[DecisionRecord]) -> None:
        raise OSError("disk full")

    def quarantine(self, source: str, kind: str, error: str, raw: bytes) -> None:
        raise AssertionError("a store failure is not the payload's fault")


def test_grpc_store_failure_is_unavailable() -> None:
    server, port = start_server(FailingSink())
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            request, _ = exported([make_record()])
            with pytest.raises(grpc.RpcError) as err:
                trace_service_pb2_grpc.TraceServiceStub(channel).Export(request, timeout=10)
    finally:
        server.stop(grace=None)
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert err.value.details() == "decision store unavailable: OSError: disk full"


LIMIT = 64 * 1024


def _sized(size: int) -> ExportTraceServiceRequest:
    """A decision and a span outside the schema, padded so the request is exactly ``size`` bytes."""
    request, _ = exported([make_record(0)])
    request.resource_spans[0].scope_spans[0].spans.append(span("padding", {"pad": ""}, span_id=9))
    pad = request.resource_spans[0].scope_spans[0].spans[-1].attributes[0].value
    for _ in range(3):  # the first step lengthens the length prefixes around the text; the next ones settle
        pad.string_value = "x" * (len(pad.string_value) + size - request.ByteSize())
    assert request.ByteSize() == size
    return request


@pytest.mark.parametrize(("size", "kept"), [(LIMIT, 1), (LIMIT + 1, 0)], ids=["at-the-limit", "one-byte-over"])
def test_grpc_refuses_a_message_over_its_limit_with_resource_exhausted_uncounted(size: int, kept: int) -> None:
    sink, counters = MemorySink(), ReceiverCounters()
    server, port = start_server(sink, counters=counters, max_message_bytes=LIMIT)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            try:
                trace_service_pb2_grpc.TraceServiceStub(channel).Export(_sized(size), timeout=10)
                status = (grpc.StatusCode.OK, "")
            except grpc.RpcError as err:
                status = (err.code(), err.details())
    finally:
        server.stop(grace=None)
    if kept:
        assert status == (grpc.StatusCode.OK, "")
    else:
        assert status == (grpc.StatusCode.RESOURCE_EXHAUSTED, f"SERVER: Received message larger than max ({size} vs. {LIMIT})")
    assert len(sink.records) == kept
    # grpcio refuses the message in its core, telling the receiver nothing: counted nowhere (docs/otlp.md)
    assert (counters.requests, counters.ignored, counters.too_large) == (kept, kept, 0)
