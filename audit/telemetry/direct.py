"""ClaimTrail's decision exporter: OTLP protobuf encoded from each record, batched, sent over HTTP.

``DecisionExporter.export()`` lays the decision's trace out (``audit.telemetry.shape``), writes
its spans and verdict log records as OTLP protobuf (``audit.telemetry.otlpwire``) on the caller's
thread and appends them to the current batch; a sender thread wraps full batches in an export
request and POSTs them (``audit.telemetry.delivery``). Batches follow the SDK's variables:
``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` / ``OTEL_BLRP_MAX_EXPORT_BATCH_SIZE`` items per request
(default 512), ``OTEL_BSP_SCHEDULE_DELAY`` / ``OTEL_BLRP_SCHEDULE_DELAY`` ms at most between
sends (default 5,000) and ``OTEL_BSP_MAX_QUEUE_SIZE`` items waiting (default 32,768); a full
queue blocks the caller instead of dropping decisions. Decision metrics still go through the
OpenTelemetry SDK (a periodic reader, counted by ``CountingMetricExporter``).

``flush()`` and ``close()`` return an ``ExportReport``: per signal, what was sent, delivered and
refused, with the first errors, so a caller can tell an export that reached nobody.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    MetricExporter,
    MetricExportResult,
    MetricsData,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import SERVICE_NAME, Resource

from audit.allocator.outcome import TierEvidence
from audit.records import DecisionRecord
from audit.telemetry import otlpwire
from audit.telemetry.decision_metrics import DecisionMetrics
from audit.telemetry.delivery import HttpSignal, SignalReport
from audit.telemetry.errors import TelemetryConfigError, TelemetryError
from audit.telemetry.pipeline import (
    DEFAULT_QUEUE_ITEMS,
    DEFAULT_SERVICE_NAME,
    TelemetrySettings,
    protocol_for,
)
from audit.telemetry.shape import AttemptLinks, decision_shape

DEFAULT_BATCH_ITEMS = 512
DEFAULT_DELAY_MS = 5000


def _int_env(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name, "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise TelemetryConfigError(f"{name}: {raw!r} is not an integer") from None
    if value <= 0:
        raise TelemetryConfigError(f"{name}: must be > 0, got {value}")
    return value


class CountingMetricExporter(MetricExporter):
    """Wraps the SDK's OTLP metric exporter and records in a ``SignalReport`` whether each
    export was accepted (the SDK itself only logs a failure)."""

    def __init__(self, inner: MetricExporter, report: SignalReport, endpoint: str) -> None:
        super().__init__(preferred_temporality=inner._preferred_temporality,
                         preferred_aggregation=inner._preferred_aggregation)
        self._inner = inner
        self._report = report
        self._endpoint = endpoint
        self._lock = threading.Lock()

    def export(self, metrics_data: MetricsData, timeout_millis: float = 10_000, **kwargs: Any) -> MetricExportResult:
        points = sum(len(m.data.data_points) for rm in metrics_data.resource_metrics
                     for sm in rm.scope_metrics for m in sm.metrics)
        result = self._inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        with self._lock:
            self._report.requests += 1
            self._report.items += points
            if result is not MetricExportResult.SUCCESS:
                self._report.failed(points, f"refused or unreachable: {self._endpoint}")
        return result

    def force_flush(self, timeout_millis: float = 10_000) -> bool:
        return self._inner.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: float = 30_000, **kwargs: Any) -> None:
        self._inner.shutdown(timeout_millis=timeout_millis, **kwargs)


@dataclass(frozen=True)
class ExportReport:
    """What an export achieved. ``decisions_delivered`` counts decisions whose spans (or, with
    traces off, whose verdict logs) an endpoint accepted; ``errors`` are decisions that could not
    be encoded at all."""

    decisions: int
    decisions_delivered: int
    traces: SignalReport
    logs: SignalReport
    metrics: SignalReport
    errors: tuple[str, ...] = ()

    @property
    def nothing_delivered(self) -> bool:
        return self.decisions > 0 and self.decisions_delivered == 0

    def lines(self) -> list[str]:
        return [
            f"decisions: {self.decisions_delivered:,} of {self.decisions:,} delivered",
            self.traces.line("spans"),
            self.logs.line("verdict log records"),
            self.metrics.line("metric points"),
        ]


class _Batch:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.items: list[bytes] = []
        self.decisions = 0


class DecisionExporter:
    """Exports decisions as OTLP traces (and verdict logs) over HTTP, from the caller's process."""

    def __init__(self, environ: Mapping[str, str] | None = None, *, api_url: str = "",
                 resource: Resource | None = None) -> None:
        env = dict(os.environ if environ is None else environ)
        if api_url and not env.get("CLAIMTRAIL_API"):
            env["CLAIMTRAIL_API"] = api_url
        self.settings = TelemetrySettings.from_env(env)
        for signal, on in (("traces", self.settings.traces), ("logs", self.settings.logs)):
            if on and protocol_for(signal, env) != "http/protobuf":
                raise TelemetryConfigError(
                    f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL: ClaimTrail sends {signal} over 'http/protobuf' only")
        self._options = self.settings.shape_options()
        self._links = AttemptLinks()
        resource = resource or _resource(env)
        self._envelope = otlpwire.Envelope(resource.attributes, schema_url=resource.schema_url)
        self._traces = HttpSignal("traces", env) if self.settings.traces else None
        self._logs = HttpSignal("logs", env) if self.settings.logs else None
        self._span_batch = _Batch(_int_env(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_BATCH_ITEMS))
        self._log_batch = _Batch(_int_env(env, "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", DEFAULT_BATCH_ITEMS))
        delay_ms = min(_int_env(env, "OTEL_BSP_SCHEDULE_DELAY", DEFAULT_DELAY_MS),
                       _int_env(env, "OTEL_BLRP_SCHEDULE_DELAY", DEFAULT_DELAY_MS))
        queued = _int_env(env, "OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_QUEUE_ITEMS)
        self._metrics_report = SignalReport("metrics", enabled=self.settings.metrics)
        self._meter_provider: MeterProvider | None = None
        self.metrics: DecisionMetrics | None = None
        if self.settings.metrics:
            if protocol_for("metrics", env) == "grpc":
                from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as Grpc

                inner: MetricExporter = Grpc()
            else:
                from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as Http

                inner = Http()
            from audit.telemetry.delivery import endpoint_url

            counted = CountingMetricExporter(inner, self._metrics_report, endpoint_url("metrics", env))
            self._meter_provider = MeterProvider(resource=resource,
                                                 metric_readers=[PeriodicExportingMetricReader(counted)])
            self.metrics = DecisionMetrics(self._meter_provider)
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[str, Any, int, int] | None] = queue.Queue(
            maxsize=max(2, queued // self._span_batch.limit))
        self._decisions = 0
        self._delivered = 0
        self._errors: list[str] = []
        self._closed = False
        self._delay_s = delay_ms / 1000
        self._sender = threading.Thread(target=self._send_loop, name="claimtrail-otlp-sender", daemon=True)
        self._sender.start()

    # ---- the caller's side ------------------------------------------------------------------------

    def export(self, record: DecisionRecord, verdicts: Sequence[TierEvidence] = (),
               labels: Mapping[str, str] | None = None) -> None:
        if self._closed:
            raise TelemetryError("DecisionExporter: closed")
        try:
            shape = decision_shape(record, verdicts, labels, self._options, self._links)
            spans, logs = otlpwire.decision(shape, self._traces is not None, self._logs is not None)
        except (TypeError, ValueError, OverflowError) as exc:
            if isinstance(exc, TelemetryError):
                raise
            raise TelemetryError(f"DecisionRecord {record.decision_id}: cannot be encoded for OTLP: {exc}") from None
        if self.metrics is not None:
            self.metrics.observe_decision(shape.record)
        full: list[tuple[str, list[bytes], int]] = []
        with self._lock:
            self._decisions += 1
            for kind, batch, items in (("traces", self._span_batch, spans), ("logs", self._log_batch, logs)):
                if items:
                    batch.items += items
                    batch.decisions += 1
                    if len(batch.items) >= batch.limit:
                        full.append(self._cut(kind, batch))
        for request in full:
            self._queue.put((request[0], request[1], len(request[1]), request[2]))

    def observe_health_transition(self, cluster: str, model: str, healthy: bool) -> None:
        if self.metrics is not None:
            self.metrics.observe_health_transition(cluster, model, healthy)

    def observe_replay(self, cluster: str, matched: bool) -> None:
        if self.metrics is not None:
            self.metrics.observe_replay(cluster, matched)

    def flush(self, timeout_s: float = 120.0) -> ExportReport:
        """Send everything exported so far and wait for the answers (metrics included)."""
        self._cut_all()
        done = threading.Event()
        self._queue.put(("flush", done, 0, 0))
        done.wait(timeout_s)
        if self._meter_provider is not None:
            self._meter_provider.force_flush()
        return self.report()

    def close(self) -> ExportReport:
        if self._closed:
            raise TelemetryError("DecisionExporter: already closed")
        report = self.flush()
        self._closed = True
        self._queue.put(None)
        self._sender.join(timeout=30)
        if self._meter_provider is not None:
            self._meter_provider.shutdown()
            report = self.report()
        for signal in (self._traces, self._logs):
            if signal is not None:
                signal.close()
        return report

    def report(self) -> ExportReport:
        with self._lock:
            off = SignalReport
            return ExportReport(
                self._decisions,
                self._delivered,
                _copy(self._traces.report) if self._traces else off("traces", enabled=False),
                _copy(self._logs.report) if self._logs else off("logs", enabled=False),
                _copy(self._metrics_report),
                tuple(self._errors),
            )

    def __enter__(self) -> DecisionExporter:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._closed:
            self.close()

    def _cut(self, kind: str, batch: _Batch) -> tuple[str, list[bytes], int]:
        items, decisions = batch.items, batch.decisions
        batch.items, batch.decisions = [], 0
        return kind, items, decisions

    def _cut_all(self) -> None:
        with self._lock:
            requests = [self._cut(kind, batch) for kind, batch in (("traces", self._span_batch), ("logs", self._log_batch))
                        if batch.items]
        for kind, items, decisions in requests:
            self._queue.put((kind, items, len(items), decisions))

    # ---- the sender thread ------------------------------------------------------------------------

    def _send_loop(self) -> None:
        while True:
            try:
                job = self._queue.get(timeout=self._delay_s)
            except queue.Empty:
                self._cut_all()  # the schedule delay passed: send what has gathered
                continue
            if job is None:
                return
            kind, payload, items, decisions = job
            if kind == "flush":
                payload.set()
                continue
            signal = self._traces if kind == "traces" else self._logs
            if signal is None:
                continue
            accepted = signal.send(self._envelope.request(payload), items)
            # decisions are counted by their spans, or by their verdict logs when no spans are sent
            if accepted and (kind == "traces" or self._traces is None):
                with self._lock:
                    self._delivered += decisions


def _copy(report: SignalReport) -> SignalReport:
    return SignalReport(report.signal, report.enabled, report.requests, report.requests_failed, report.items,
                        report.items_failed, list(report.errors))


def _resource(environ: Mapping[str, str]) -> Resource:
    # explicit resource attributes win over the environment, so name the service only when
    # neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES does
    named = bool(environ.get("OTEL_SERVICE_NAME")) or "service.name=" in environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    return Resource.create() if named else Resource.create({SERVICE_NAME: DEFAULT_SERVICE_NAME})
