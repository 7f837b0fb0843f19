"""Standard OTEL_* variables pick the protocol; ClaimTrail's own settings are checked."""

from __future__ import annotations

import pytest

from audit.records import DecisionRecord
from audit.telemetry import TelemetryConfigError, TelemetryError, TelemetrySettings, protocol_for
from audit.telemetry.redaction import Redaction
from audit.telemetry.traces import time_ns
from tests.telemetry.records_factory import make_record


@pytest.mark.parametrize(
    ("env", "signal", "expected"),
    [
        ({}, "traces", "http/protobuf"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "traces", "grpc"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/protobuf"}, "logs", "http/protobuf"),
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/protobuf"}, "traces", "grpc"),
        ({"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL": "grpc"}, "metrics", "grpc"),
    ],
    ids=["default-http", "general-grpc", "signal-overrides-general", "other-signal-keeps-general", "metrics-only-grpc"],
)
def test_protocol_follows_the_standard_precedence(env: dict[str, str], signal: str, expected: str) -> None:
    assert protocol_for(signal, env) == expected


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, r"OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' is not offered"),
        ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "thrift"}, r"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: unknown protocol 'thrift'"),
    ],
    ids=["http-json", "unknown"],
)
def test_unusable_protocol_is_refused_naming_the_variable(env: dict[str, str], message: str) -> None:
    with pytest.raises(TelemetryConfigError, match=message):
        protocol_for("traces", env)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, TelemetrySettings(64, Redaction())),
        ({"CLAIMTRAIL_OTEL_MAX_VERDICTS": "8"}, TelemetrySettings(8, Redaction())),
        (
            {"CLAIMTRAIL_OTEL_REDACT": "hash_pod_names, drop_tenant", "CLAIMTRAIL_OTEL_REDACT_SALT": "s"},
            TelemetrySettings(64, Redaction(hash_pod_names=True, drop_tenant=True, salt="s")),
        ),
    ],
    ids=["defaults", "max-verdicts", "redaction"],
)
def test_settings_from_env(env: dict[str, str], expected: TelemetrySettings) -> None:
    assert TelemetrySettings.from_env(env) == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [("many", r"CLAIMTRAIL_OTEL_MAX_VERDICTS: 'many' is not an integer"), ("-1", r"CLAIMTRAIL_OTEL_MAX_VERDICTS: must be >= 0")],
    ids=["not-a-number", "negative"],
)
def test_bad_max_verdicts_is_refused(value: str, message: str) -> None:
    with pytest.raises(TelemetryConfigError, match=message):
        TelemetrySettings.from_env({"CLAIMTRAIL_OTEL_MAX_VERDICTS": value})


@pytest.mark.parametrize(
    ("time", "expected"),
    [
        ("2026-03-14T09:26:53Z", 1773480413_000_000_000),
        ("2026-03-14T10:26:53.000001+01:00", 1773480413_000_001_000),
        ("2026-03-14T09:26:53", 1773480413_000_000_000),
    ],
    ids=["zulu", "offset-and-micros", "naive-is-utc"],
)
def test_record_time_becomes_unix_nanoseconds(time: str, expected: int) -> None:
    assert time_ns(make_record(time=time)) == expected


def test_unreadable_record_time_names_the_decision_and_field() -> None:
    record: DecisionRecord = make_record(time="yesterday")
    with pytest.raises(TelemetryError, match=rf"DecisionRecord {record.decision_id}: time: 'yesterday'"):
        time_ns(record)
