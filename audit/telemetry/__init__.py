"""OpenTelemetry export of decisions: one trace per decision, verdicts as linked log records, and
decision metrics, all configured by the standard ``OTEL_*`` variables.

The attribute schema (``audit.telemetry.schema``, documented in ``docs/otlp.md``) is shared with
the OTLP receiver in ``ingest.otlp``, which turns such traces back into DecisionRecords.
"""

from audit.telemetry.errors import TelemetryConfigError, TelemetryError
from audit.telemetry.pipeline import DecisionTelemetry, TelemetrySettings, otlp_exporters, protocol_for
from audit.telemetry.process import ExporterProcess, FlushReport
from audit.telemetry.redaction import Redaction
from audit.telemetry.traces import DecisionTracer, ExportedTrace

__all__ = [
    "DecisionTelemetry",
    "DecisionTracer",
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
