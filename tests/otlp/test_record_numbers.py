"""A decision whose record JSON holds a number too long for Python to read (past the default
4300 digits) is a rejected item in ``partial_success``, quarantined, while the rest of the
request is kept, over OTLP/HTTP (spans and log records) and OTLP/gRPC alike."""

from __future__ import annotations

from collections.abc import Callable

import grpc
import httpx
import pytest
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from audit.records import record_text
from audit.telemetry import schema as s
from ingest.otlp import MemorySink, ReceiverCounters, start_server
from tests.otlp.loopback import running_receiver
from tests.otlp.payloads import log, logs, span, traces
from tests.telemetry.records_factory import make_record

GOOD = make_record(0)
BAD = make_record(1)
LONG_SEQ = record_text(BAD).replace(f'"seq":{BAD.seq}', '"seq":1' + "0" * 5000)
ERROR = "DecisionRecord: attribute claimtrail.record is not JSON (Exceeds the limit (4300 digits)"


def _http(path: str, request: Message, answer: type[Message]) -> tuple[Message, MemorySink, ReceiverCounters]:
    with running_receiver() as rx:
        response = httpx.post(rx.url + path, content=request.SerializeToString(),
                              headers={"content-type": "application/x-protobuf"}, timeout=10)
        assert response.status_code == 200
        return answer.FromString(response.content), rx.sink, rx.counters


def _grpc_traces(request: Message) -> tuple[Message, MemorySink, ReceiverCounters]:
    sink, counters = MemorySink(), ReceiverCounters()
    server, port = start_server(sink, counters=counters)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            return trace_service_pb2_grpc.TraceServiceStub(channel).Export(request, timeout=10), sink, counters
    finally:
        server.stop(grace=None)


def _spans() -> Message:
    return traces(span(s.ROOT_SPAN, {s.RECORD: record_text(GOOD)}, span_id=1),
                  span(s.ROOT_SPAN, {s.RECORD: LONG_SEQ}, span_id=2))


def _logs() -> Message:
    return logs(log(s.DECISION_EVENT, {s.RECORD: record_text(GOOD)}), log(s.DECISION_EVENT, {s.RECORD: LONG_SEQ}))


CASES: dict[str, tuple[Callable[[], tuple[Message, MemorySink, ReceiverCounters]], str, str]] = {
    "http-span": (lambda: _http("/v1/traces", _spans(), ExportTraceServiceResponse), "span 'dra.allocate'", "span"),
    "http-log": (lambda: _http("/v1/logs", _logs(), ExportLogsServiceResponse), "log record", "log_record"),
    "grpc-span": (lambda: _grpc_traces(_spans()), "span 'dra.allocate'", "span"),
}


@pytest.mark.parametrize(("send", "where", "kind"), CASES.values(), ids=CASES.keys())
def test_record_with_a_number_too_long_to_read_is_rejected_and_the_rest_kept(
    send: Callable[[], tuple[Message, MemorySink, ReceiverCounters]], where: str, kind: str
) -> None:
    answer, sink, counters = send()
    partial = answer.partial_success  # type: ignore[attr-defined]
    rejected = partial.rejected_spans if kind == "span" else partial.rejected_log_records
    assert rejected == 1
    assert partial.error_message.startswith(f"{where}: {ERROR}")
    (q,) = sink.quarantined
    assert q.kind == kind and q.error.startswith(f"{where}: {ERROR}")
    assert [r.decision_id for r in sink.records] == [GOOD.decision_id]
    assert (counters.records, counters.rejected) == (1, 1)
