"""The transport-independent OTLP receiver: decode, write to the sink, quarantine, count.

HTTP (``ingest.otlp.http``) and gRPC (``ingest.otlp.grpc``) both hand decoded export requests
here. Items that claim to be decisions but fail validation, or the store's admission of a
record (``ingest.otlp.decode``), are quarantined one by one and reported in the OTLP
``partial_success`` of the response; the rest of the batch is kept. So are
decisions the sink refuses because their id is already taken by a different record (stored, or
earlier in the same request): the sender learns that its copy was not kept.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsPartialSuccess,
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from audit.telemetry import schema as s
from ingest.otlp.decode import DecodeResult, records_from_logs, records_from_traces
from ingest.otlp.sink import RecordSink

COUNTER_NAMES = (
    "requests",
    "records",
    "parts",
    "ignored",
    "rejected",
    "malformed",
    "too_large",
    "sink_errors",
)


class ReceiverCounters:
    """Counts of what arrived: requests answered, records kept, decision parts, ignored items,
    rejects, requests refused as malformed or too large, and failed writes.

    Each count is a plain public attribute (``counters.records``), so metric renderers that read
    an object's attributes see them; ``snapshot()`` gives a consistent copy.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.records = 0
        self.parts = 0
        self.ignored = 0
        self.rejected = 0
        self.malformed = 0
        self.too_large = 0  # refused with 413, unread: never quarantined, so counted only here
        self.sink_errors = 0

    def add(self, name: str, n: int = 1) -> None:
        if name not in COUNTER_NAMES:
            raise KeyError(f"ReceiverCounters: unknown counter {name!r}")
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {name: getattr(self, name) for name in COUNTER_NAMES}


class SinkUnavailable(RuntimeError):
    """The sink failed to write; the sender should retry (HTTP 503, gRPC UNAVAILABLE)."""


@dataclass
class OtlpReceiver:
    sink: RecordSink
    source: str
    counters: ReceiverCounters

    def traces(self, request: ExportTraceServiceRequest) -> ExportTraceServiceResponse:
        errors = self._store(records_from_traces(request), f"span {s.ROOT_SPAN!r}")
        response = ExportTraceServiceResponse()
        if errors:
            response.partial_success.CopyFrom(
                ExportTracePartialSuccess(rejected_spans=len(errors), error_message=_summary(errors))
            )
        return response

    def logs(self, request: ExportLogsServiceRequest) -> ExportLogsServiceResponse:
        errors = self._store(records_from_logs(request), "log record")
        response = ExportLogsServiceResponse()
        if errors:
            response.partial_success.CopyFrom(
                ExportLogsPartialSuccess(rejected_log_records=len(errors), error_message=_summary(errors))
            )
        return response

    def malformed(self, kind: str, error: str, raw: bytes) -> None:
        """A request refused as undecodable: its body quarantined as received (``SinkUnavailable``
        when the store cannot take it, so the sender retries rather than losing it unseen)."""
        self.counters.add("requests")
        self._quarantine(kind, error, raw)
        self.counters.add("malformed")

    def too_large(self) -> None:
        """A request refused for its size (as sent, or once inflated)."""
        self.counters.add("requests")
        self.counters.add("too_large")

    def _store(self, result: DecodeResult, where: str) -> list[str]:
        """Quarantine the invalid items, write the records; the errors of every item not kept
        (``where`` names the kind of item a refused record came in)."""
        self.counters.add("requests")
        for item in result.rejected:
            self._quarantine(item.kind, item.error, item.raw)
        self.counters.add("rejected", len(result.rejected))
        self.counters.add("ignored", result.ignored)
        self.counters.add("parts", result.parts)
        errors = [item.error for item in result.rejected]
        if result.records:
            try:
                refused = self.sink.write_records(result.records)
            except Exception as exc:  # any store failure: the sender keeps the batch and retries
                raise self._unavailable(exc) from exc
            self.counters.add("records", len(result.records) - len(refused))
            self.counters.add("rejected", len(refused))
            errors += [f"{where}: {error}" for error in refused]
        return errors

    def _quarantine(self, kind: str, error: str, raw: bytes) -> None:
        try:
            self.sink.quarantine(self.source, kind, error, raw)
        except Exception as exc:  # the store cannot keep the item: as for records, the sender retries
            raise self._unavailable(exc) from exc

    def _unavailable(self, exc: Exception) -> SinkUnavailable:
        self.counters.add("sink_errors")
        return SinkUnavailable(f"decision store unavailable: {type(exc).__name__}: {exc}")


def _summary(errors: list[str]) -> str:
    more = len(errors) - 1
    return errors[0] if more == 0 else f"{errors[0]} (and {more} more rejected)"
