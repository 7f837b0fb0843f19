"""OpenTelemetry export of decisions: one trace per decision, verdicts as linked log records or
span events, and decision metrics, all configured by the standard ``OTEL_*`` variables.
``DecisionExporter`` encodes OTLP protobuf itself; ``DecisionTelemetry`` goes through the SDK.

The attribute schema (``audit.telemetry.schema``, documented in ``docs/otlp.md``) is shared with
the OTLP receiver in ``ingest.otlp``, which turns such traces back into DecisionRecords.
"""

from audit.telemetry.direct import DecisionExporter, ExportReport
from audit.telemetry.errors import TelemetryConfigError, TelemetryError
from audit.telemetry.pipeline import DecisionTelemetry, TelemetrySettings, otlp_exporters, protocol_for
from audit.telemetry.process import ExporterProcess, FlushReport
from audit.telemetry.redaction import Redaction
from audit.telemetry.traces import DecisionTracer, ExportedTrace

__all__ = [
    "DecisionExporter",
    "DecisionTelemetry",
    "DecisionTracer",
    "ExportReport",
    "ExportedTrace",
    "ExporterProcess",
    "FlushReport",
    "Redaction",
    "TelemetryConfigError",
    "TelemetryError",
    "TelemetrySettings",
    "otlp_exporters",
    "protocol_for",
]
