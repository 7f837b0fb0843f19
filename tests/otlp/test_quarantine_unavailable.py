"""When the store cannot quarantine a refused item, the receiver answers as it does when it
cannot store a record: HTTP 503 with Retry-After, gRPC UNAVAILABLE, counted as a sink error, so
the sender retries instead of meeting a 500 (or UNKNOWN) that drops the request unseen."""

from __future__ import annotations

import grpc
import httpx
import pytest
from fastapi import FastAPI
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from audit.records import DecisionRecord
from audit.telemetry import schema as s
from ingest.otlp import ReceiverCounters, make_router, start_server
from tests.otlp.loopback import serve
from tests.otlp.payloads import span, traces

PB = {"content-type": "application/x-protobuf"}
MESSAGE = "decision store unavailable: OSError: [Errno 28] No space left on device"


class FullDisk:
    """A store that takes records but cannot write quarantine rows."""

    def write_records(self, records: list[DecisionRecord]) -> list[str]:
        return []

    def quarantine(self, source: str, kind: str, error: str, raw: bytes) -> None:
        raise OSError(28, "No space left on device")


REJECTED_SPAN = traces(span(s.ROOT_SPAN, {s.RECORD: "{not json"})).SerializeToString()


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        (b"\xff\xff\xff", PB),  # undecodable: a 400 once quarantined
        (b"hello", {"content-type": "text/plain"}),  # another media type: a 415 once quarantined
        (REJECTED_SPAN, PB),  # a decision refused in partial_success once quarantined
    ],
    ids=["malformed-body", "unsupported-media-type", "rejected-span"],
)
def test_http_quarantine_failure_is_a_503_to_retry(body: bytes, headers: dict[str, str]) -> None:
    counters = ReceiverCounters()
    app = FastAPI()
    app.include_router(make_router(FullDisk(), counters))
    with serve(app) as url:
        response = httpx.post(url + "/v1/traces", content=body, headers=headers, timeout=10)
    assert (response.status_code, response.headers.get("retry-after")) == (503, "1")
    if response.headers["content-type"] == "application/x-protobuf":
        assert status_pb2.Status.FromString(response.content).message == MESSAGE
    else:
        assert response.json()["message"] == MESSAGE
    snapshot = counters.snapshot()
    assert (snapshot["sink_errors"], snapshot["malformed"]) == (1, 0)


@pytest.mark.parametrize("body", [REJECTED_SPAN], ids=["rejected-span"])
def test_grpc_quarantine_failure_is_unavailable(body: bytes) -> None:
    counters = ReceiverCounters()
    server, port = start_server(FullDisk(), counters=counters)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel, pytest.raises(grpc.RpcError) as caught:
            trace_service_pb2_grpc.TraceServiceStub(channel).Export(
                ExportTraceServiceRequest.FromString(body), timeout=10)
    finally:
        server.stop(grace=None)
    assert (caught.value.code(), caught.value.details()) == (grpc.StatusCode.UNAVAILABLE, MESSAGE)
    assert counters.snapshot()["sink_errors"] == 1
