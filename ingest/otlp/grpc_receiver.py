"""OTLP/gRPC receiver: the TraceService and LogsService servicers over the same receiver core.

Rejected items come back in ``partial_success``; a sink failure aborts with UNAVAILABLE, which
OTLP senders retry. ``start_server`` binds loopback (or any given address) and returns the port.

A message over ``max_message_bytes`` is refused by gRPC's core with RESOURCE_EXHAUSTED as soon
as its length prefix arrives, before it is held. That refusal is not counted (``too_large``
counts OTLP/HTTP's 413s only): grpcio tells the application nothing of it. No handler is called
(an interceptor sees the call start, never its end); a streaming handler's request iterator
would raise a bare ``grpc.RpcError``, as it does when the sender cancels; and the core's
close-on-server reports only that the call was cancelled, not why. Only a C++ server call
tracer (the hook grpcio-observability plugs into) sees the status.
"""

from __future__ import annotations

from concurrent import futures

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from ingest.otlp.receiver import OtlpReceiver, ReceiverCounters, SinkUnavailable
from ingest.otlp.sink import RecordSink

SOURCE = "otlp/grpc"
# gRPC's own default limit, and the OpenTelemetry Collector's OTLP receiver's (max_recv_msg_size_mib)
MAX_MESSAGE_BYTES = 4 * 1024 * 1024


class TraceServiceServicer(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(self, request: ExportTraceServiceRequest, context: grpc.ServicerContext) -> ExportTraceServiceResponse:  # noqa: N802 (gRPC method name)
        try:
            return self._receiver.traces(request)
        except SinkUnavailable as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
            raise  # abort raises; this line only satisfies the type checker


class LogsServiceServicer(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(self, request: ExportLogsServiceRequest, context: grpc.ServicerContext) -> ExportLogsServiceResponse:  # noqa: N802 (gRPC method name)
        try:
            return self._receiver.logs(request)
        except SinkUnavailable as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, str(exc))
            raise


def start_server(
    sink: RecordSink, address: str = "127.0.0.1:0", counters: ReceiverCounters | None = None, workers: int = 4,
    max_message_bytes: int = MAX_MESSAGE_BYTES,
) -> tuple[grpc.Server, int]:
    """Start a gRPC server with both services; returns it (call ``stop``) and the bound port.
    A request message over ``max_message_bytes`` is refused with RESOURCE_EXHAUSTED, uncounted."""
    receiver = OtlpReceiver(sink, SOURCE, counters or ReceiverCounters())
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=workers),
                         options=[("grpc.max_receive_message_length", max_message_bytes)])
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(TraceServiceServicer(receiver), server)
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(LogsServiceServicer(receiver), server)
    port = server.add_insecure_port(address)
    if port == 0:
        raise OSError(f"OTLP gRPC receiver: cannot bind {address}")
    server.start()
    return server, port
