"""OTLP receiver: decision spans and log records sent by instrumented schedulers become
DecisionRecords.

``make_router(sink)`` serves OTLP/HTTP at ``/v1/traces`` and ``/v1/logs`` (protobuf or JSON,
gzip); ``start_server(sink)`` serves OTLP/gRPC. The attribute schema is ``audit.telemetry.schema``
(documented in ``docs/otlp.md``).
"""

from ingest.otlp.grpc_receiver import LogsServiceServicer, TraceServiceServicer, start_server
from ingest.otlp.http_receiver import make_router
from ingest.otlp.receiver import OtlpReceiver, ReceiverCounters
from ingest.otlp.sink import MemorySink, RecordSink

__all__ = [
    "LogsServiceServicer",
    "MemorySink",
    "OtlpReceiver",
    "ReceiverCounters",
    "RecordSink",
    "TraceServiceServicer",
    "make_router",
    "start_server",
]
