"""The telemetry pipeline: providers, processors and OTLP exporters wired for decisions.

``DecisionTelemetry.from_env()`` follows the standard OpenTelemetry variables: the OTLP exporters
read ``OTEL_EXPORTER_OTLP_*`` (endpoint, headers, compression, timeout, certificates) themselves,
``OTEL_EXPORTER_OTLP_PROTOCOL`` (or the per-signal ``..._TRACES_PROTOCOL`` etc.) picks
``http/protobuf`` (default) or ``grpc``, ``OTEL_SERVICE_NAME``/``OTEL_RESOURCE_ATTRIBUTES`` name the
resource and ``OTEL_BSP_*``/``OTEL_BLRP_*``/``OTEL_METRIC_EXPORT_INTERVAL`` tune batching.
``OTEL_{TRACES,LOGS,METRICS}_EXPORTER`` turn a signal off (``none``). ClaimTrail's own settings:
``CLAIMTRAIL_OTEL_MAX_VERDICTS`` (verdicts per decision, default 64), ``CLAIMTRAIL_OTEL_VERDICTS``
(``logs``, ``events`` or ``both``), ``CLAIMTRAIL_OTEL_ID_SALT`` (new trace ids for a re-export),
``CLAIMTRAIL_API`` (for each trace's why URL) and the redaction variables of
``audit.telemetry.redaction``. The same settings drive ``audit.telemetry.direct.DecisionExporter``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk._logs.export import (
    BatchLogRecordProcessor,
    LogRecordExporter,
    SimpleLogRecordProcessor,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter

from audit.allocator.outcome import TierEvidence
from audit.records import DecisionRecord
from audit.telemetry.attributes import DEFAULT_MAX_VERDICTS
from audit.telemetry.decision_metrics import DecisionMetrics
from audit.telemetry.errors import TelemetryConfigError
from audit.telemetry.redaction import Redaction
from audit.telemetry.shape import ShapeOptions
from audit.telemetry.spans import HashedOnceResource
from audit.telemetry.traces import DecisionTracer, ExportedTrace

ENV_MAX_VERDICTS = "CLAIMTRAIL_OTEL_MAX_VERDICTS"
ENV_VERDICTS = "CLAIMTRAIL_OTEL_VERDICTS"
ENV_ID_SALT = "CLAIMTRAIL_OTEL_ID_SALT"
ENV_API = "CLAIMTRAIL_API"
VERDICT_ROUTES = ("logs", "events", "both")
SIGNALS = ("traces", "logs", "metrics")
# The SDK's default batch queue (2048 items) holds under 700 decisions of spans and drops the rest
# when the backend is slow; ClaimTrail queues about 10,000 decisions unless OTEL_BSP_MAX_QUEUE_SIZE /
# OTEL_BLRP_MAX_QUEUE_SIZE say otherwise.
DEFAULT_QUEUE_ITEMS = 32_768
PROTOCOLS = ("http/protobuf", "grpc")
DEFAULT_SERVICE_NAME = "claimtrail"


def signal_enabled(signal: str, environ: Mapping[str, str]) -> bool:
    """``OTEL_{TRACES,LOGS,METRICS}_EXPORTER``: ``otlp`` (the default) or ``none``, as the SDK
    environment specification names them; other exporters are not offered and are refused."""
    name = f"OTEL_{signal.upper()}_EXPORTER"
    raw = environ.get(name, "").strip()
    chosen = {part.strip() for part in raw.split(",") if part.strip()} or {"otlp"}
    unknown = sorted(chosen - {"otlp", "none"})
    if unknown:
        raise TelemetryConfigError(f"{name}: exporter {unknown[0]!r} is not offered (use 'otlp' or 'none')")
    if chosen == {"otlp", "none"}:
        raise TelemetryConfigError(f"{name}: 'none' cannot be combined with another exporter")
    return chosen == {"otlp"}


@dataclass(frozen=True)
class TelemetrySettings:
    max_verdicts: int = DEFAULT_MAX_VERDICTS
    redaction: Redaction = field(default_factory=Redaction)
    verdicts: str = "logs"  # one of VERDICT_ROUTES
    id_salt: str = ""
    api_url: str = ""
    traces: bool = True  # per signal: exported (otlp) or not (none)
    logs: bool = True
    metrics: bool = True

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> TelemetrySettings:
        raw = environ.get(ENV_MAX_VERDICTS, "")
        max_verdicts = DEFAULT_MAX_VERDICTS
        if raw:
            try:
                max_verdicts = int(raw)
            except ValueError:
                raise TelemetryConfigError(f"{ENV_MAX_VERDICTS}: {raw!r} is not an integer") from None
            if max_verdicts < 0:
                raise TelemetryConfigError(f"{ENV_MAX_VERDICTS}: must be >= 0, got {max_verdicts}")
        traces, logs, metrics = (signal_enabled(signal, environ) for signal in SIGNALS)
        if not (traces or logs):
            # a decision is delivered by its root span or its verdict logs: metrics alone carry none
            raise TelemetryConfigError("OTEL_TRACES_EXPORTER and OTEL_LOGS_EXPORTER are both 'none': no signal "
                                       "carries the decisions (set one of them to 'otlp')")
        route = environ.get(ENV_VERDICTS, "").strip()
        if route and route not in VERDICT_ROUTES:
            raise TelemetryConfigError(f"{ENV_VERDICTS}: {route!r} is not one of {', '.join(VERDICT_ROUTES)}")
        if not route:
            # without a log exporter, verdicts ride on the spans rather than vanish
            route = "logs" if logs else "events"
        elif route != "events" and not logs:
            raise TelemetryConfigError(
                f"{ENV_VERDICTS}: {route!r} sends verdicts as logs, but OTEL_LOGS_EXPORTER is 'none'"
            )
        if route != "logs" and not traces:
            raise TelemetryConfigError(
                f"{ENV_VERDICTS}: {route!r} puts verdicts on spans, but OTEL_TRACES_EXPORTER is 'none'"
            )
        return cls(
            max_verdicts=max_verdicts,
            redaction=Redaction.from_env(environ),
            verdicts=route,
            id_salt=environ.get(ENV_ID_SALT, ""),
            api_url=environ.get(ENV_API, ""),
            traces=traces,
            logs=logs,
            metrics=metrics,
        )

    def shape_options(self) -> ShapeOptions:
        return ShapeOptions(
            max_verdicts=self.max_verdicts,
            redaction=self.redaction,
            verdict_logs=self.logs and self.verdicts in ("logs", "both"),
            verdict_events=self.traces and self.verdicts in ("events", "both"),
            id_salt=self.id_salt,
            api_url=self.api_url,
        )


def protocol_for(signal: str, environ: Mapping[str, str]) -> str:
    """The OTLP protocol for one signal (``traces``/``logs``/``metrics``), per the spec's precedence."""
    specific = f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL"
    name = specific if environ.get(specific) else "OTEL_EXPORTER_OTLP_PROTOCOL"
    value = environ.get(name) or "http/protobuf"
    if value == "http/json":
        raise TelemetryConfigError(
            f"{name}: 'http/json' is not offered by the Python OTLP exporter; use 'http/protobuf' or 'grpc'"
        )
    if value not in PROTOCOLS:
        raise TelemetryConfigError(f"{name}: unknown protocol {value!r} (expected one of {', '.join(PROTOCOLS)})")
    return value


def otlp_exporters(environ: Mapping[str, str]) -> tuple[SpanExporter, LogRecordExporter, MetricExporter]:
    """OTLP exporters for the configured protocols; they read endpoints and headers themselves."""
    span: SpanExporter
    log: LogRecordExporter
    metric: MetricExporter
    if protocol_for("traces", environ) == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans

        span = GrpcSpans()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpans

        span = HttpSpans()
    if protocol_for("logs", environ) == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs

        log = GrpcLogs()
    else:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogs

        log = HttpLogs()
    if protocol_for("metrics", environ) == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetrics

        metric = GrpcMetrics()
    else:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetrics

        metric = HttpMetrics()
    return span, log, metric


class DecisionTelemetry:
    """Exports decisions as traces + verdict logs and counts them in metrics."""

    def __init__(
        self,
        span_exporter: SpanExporter,
        log_exporter: LogRecordExporter,
        metric_reader: MetricReader | None = None,
        *,
        settings: TelemetrySettings | None = None,
        resource: Resource | None = None,
        batch: bool = True,
    ) -> None:
        self.settings = settings or TelemetrySettings()
        self.span_exporter = span_exporter
        self.log_exporter = log_exporter
        resource = HashedOnceResource(resource or Resource.create({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
        self.tracer_provider = TracerProvider(resource=resource)
        self.logger_provider = LoggerProvider(resource=resource)
        # Decisions go to these processors directly; they are registered on the providers too, so
        # flush/shutdown of a provider covers them and other spans on the providers still export.
        self.span_processor: SpanProcessor
        self.log_processor: LogRecordProcessor
        if batch:
            spans_queue = None if os.environ.get("OTEL_BSP_MAX_QUEUE_SIZE") else DEFAULT_QUEUE_ITEMS
            logs_queue = None if os.environ.get("OTEL_BLRP_MAX_QUEUE_SIZE") else DEFAULT_QUEUE_ITEMS
            self.span_processor = BatchSpanProcessor(span_exporter, max_queue_size=spans_queue)
            self.log_processor = BatchLogRecordProcessor(log_exporter, max_queue_size=logs_queue)
        else:
            self.span_processor = SimpleSpanProcessor(span_exporter)
            self.log_processor = SimpleLogRecordProcessor(log_exporter)
        self.tracer_provider.add_span_processor(self.span_processor)
        self.logger_provider.add_log_record_processor(self.log_processor)
        self.meter_provider = MeterProvider(resource=resource, metric_readers=[metric_reader] if metric_reader else [])
        self.tracer = DecisionTracer(
            self.span_processor if self.settings.traces else None,
            self.log_processor if self.settings.logs else None,
            resource,
            options=self.settings.shape_options(),
        )
        self.metrics = DecisionMetrics(self.meter_provider)

    @classmethod
    def from_env(cls) -> DecisionTelemetry:
        """Build from the process environment (the OTLP exporters and resource read it too)."""
        env = os.environ
        settings = TelemetrySettings.from_env(env)
        span, log, metric = otlp_exporters(env)
        # explicit resource attributes win over the environment, so name the service only when
        # neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES does
        named = bool(env.get("OTEL_SERVICE_NAME")) or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", "")
        resource = Resource.create() if named else Resource.create({SERVICE_NAME: DEFAULT_SERVICE_NAME})
        return cls(span, log, PeriodicExportingMetricReader(metric), settings=settings, resource=resource)

    def export(
        self,
        record: DecisionRecord,
        verdicts: Sequence[TierEvidence] = (),
        labels: Mapping[str, str] | None = None,
    ) -> ExportedTrace:
        exported = self.tracer.export(record, verdicts, labels)
        self.metrics.observe_decision(exported.record)
        return exported

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Hand everything queued to the exporters. True does not prove delivery (see stack notes)."""
        results = [
            self.tracer_provider.force_flush(timeout_millis),
            self.logger_provider.force_flush(timeout_millis),
            self.meter_provider.force_flush(timeout_millis),
        ]
        return all(results)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.logger_provider.shutdown()
        self.meter_provider.shutdown()
