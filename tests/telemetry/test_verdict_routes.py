"""Verdicts as log records, span events or both, and the OTEL_*_EXPORTER switches for each signal."""

from __future__ import annotations

import pytest

from audit.allocator.outcome import DeviceVerdict, TierEvidence
from audit.telemetry import TelemetryConfigError, TelemetrySettings
from audit.telemetry import schema as s
from tests.telemetry.capture import attrs, export_over_http
from tests.telemetry.records_factory import make_record


def _engine_verdicts() -> list[TierEvidence]:
    # two more H100 devices from the engine, one repeating an exemplar, and one of a tier the record lacks
    h100 = [DeviceVerdict(f"gpu.nvidia.com/node-h1/gpu-{i}", "in_use", (("claim", "team-x/other"),)) for i in (1, 2, 3)]
    return [TierEvidence("team-vision/trainer-7f9c4-gpu", "gpu/h100", 0, h100),
            TierEvidence("team-vision/trainer-7f9c4-gpu", "gpu/l4", 5, [DeviceVerdict("d/p/l4-0", "node_mismatch")])]


# (span it belongs to, device, reason) for every verdict of the decision: the record's three
# exemplars, then the engine's verdicts that are not exemplars already
EVERY_VERDICT = sorted([
    ("dra.allocate.tier H100", "gpu.nvidia.com/node-h1/gpu-0", "in_use"),
    ("dra.allocate.tier H100", "gpu.nvidia.com/node-h1/gpu-1", "unhealthy"),
    ("dra.allocate.tier A100", "gpu.nvidia.com/node-a7/gpu-3", "selected"),
    ("dra.allocate.tier H100", "gpu.nvidia.com/node-h1/gpu-2", "in_use"),
    ("dra.allocate.tier H100", "gpu.nvidia.com/node-h1/gpu-3", "in_use"),
    ("dra.allocate", "d/p/l4-0", "node_mismatch"),
])


def _events(wire: object) -> list[tuple[str, str, str]]:
    return sorted((sp.name, attrs(e)[s.VERDICT_DEVICE], attrs(e)[s.VERDICT_REASON])
                  for sp in wire.spans for e in sp.events)  # type: ignore[attr-defined]


def _logs(wire: object) -> list[tuple[str, str, str]]:
    names = {sp.span_id: sp.name for sp in wire.spans}  # type: ignore[attr-defined]
    return sorted((names[lr.span_id], attrs(lr)[s.VERDICT_DEVICE], attrs(lr)[s.VERDICT_REASON])
                  for lr in wire.logs)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("env", "events", "logs"),
    [
        ({}, [], EVERY_VERDICT),
        ({"CLAIMTRAIL_OTEL_VERDICTS": "events"}, EVERY_VERDICT, []),
        ({"CLAIMTRAIL_OTEL_VERDICTS": "both"}, EVERY_VERDICT, EVERY_VERDICT),
        ({"OTEL_LOGS_EXPORTER": "none"}, EVERY_VERDICT, []),
    ],
    ids=["logs-by-default", "events", "both", "events-when-logs-are-off"],
)
def test_every_verdict_of_a_decision_is_on_its_spans_or_in_its_logs(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], events: list[tuple[str, str, str]],
    logs: list[tuple[str, str, str]],
) -> None:
    wire = export_over_http(monkeypatch, [make_record()], verdicts=_engine_verdicts(), env=env)
    assert _events(wire) == events
    assert _logs(wire) == logs
    assert attrs(wire.root())[s.VERDICTS_EXPORTED] == len(EVERY_VERDICT)


def test_a_verdict_event_carries_the_log_records_attributes_at_its_tier_start(monkeypatch: pytest.MonkeyPatch) -> None:
    wire = export_over_http(monkeypatch, [make_record()], env={"CLAIMTRAIL_OTEL_VERDICTS": "both"})
    h100 = next(sp for sp in wire.tiers() if sp.name.endswith("H100"))
    unhealthy_event = next(e for e in h100.events if attrs(e)[s.VERDICT_REASON] == "unhealthy")
    unhealthy_log = next(lr for lr in wire.logs if attrs(lr)[s.VERDICT_REASON] == "unhealthy")
    assert unhealthy_event.name == s.VERDICT_EVENT
    assert attrs(unhealthy_event) == attrs(unhealthy_log)
    assert unhealthy_event.time_unix_nano == unhealthy_log.time_unix_nano == h100.start_time_unix_nano


@pytest.mark.parametrize(
    ("env", "paths", "delivered"),
    [
        ({"OTEL_TRACES_EXPORTER": "none"}, {"/v1/logs", "/v1/metrics"}, 2),
        ({"OTEL_LOGS_EXPORTER": "none"}, {"/v1/traces", "/v1/metrics"}, 2),
        ({"OTEL_METRICS_EXPORTER": "none"}, {"/v1/traces", "/v1/logs"}, 2),
        ({"OTEL_LOGS_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}, {"/v1/traces"}, 2),
    ],
    ids=["no-traces", "no-logs", "no-metrics", "traces-only"],
)
def test_a_signal_set_to_none_sends_nothing(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], paths: set[str], delivered: int
) -> None:
    wire = export_over_http(monkeypatch, [make_record(0), make_record(1)], env=env)
    assert {c.path for c in wire.rx.capture.bodies()} == paths
    assert wire.report.decisions_delivered == delivered  # by their spans, or by their logs without traces
    off = {"/v1/traces": wire.report.traces, "/v1/logs": wire.report.logs, "/v1/metrics": wire.report.metrics}
    assert {path for path, report in off.items() if not report.enabled} == set(off) - paths


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER: exporter 'zipkin' is not offered"),
        ({"OTEL_METRICS_EXPORTER": "otlp,none"}, "OTEL_METRICS_EXPORTER: 'none' cannot be combined"),
        ({"OTEL_TRACES_EXPORTER": "none", "CLAIMTRAIL_OTEL_VERDICTS": "events"},
         "CLAIMTRAIL_OTEL_VERDICTS: 'events' puts verdicts on spans, but OTEL_TRACES_EXPORTER is 'none'"),
        ({"OTEL_LOGS_EXPORTER": "none", "CLAIMTRAIL_OTEL_VERDICTS": "both"},
         "CLAIMTRAIL_OTEL_VERDICTS: 'both' sends verdicts as logs, but OTEL_LOGS_EXPORTER is 'none'"),
        # no verdict route was asked for: the refusal names the two settings that were given
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_LOGS_EXPORTER": "none"},
         "OTEL_TRACES_EXPORTER and OTEL_LOGS_EXPORTER are both 'none': no signal carries the decisions"),
    ],
    ids=["unknown-exporter", "none-and-otlp", "events-without-traces", "both-without-logs", "traces-and-logs-off"],
)
def test_contradicting_signal_settings_are_refused(env: dict[str, str], message: str) -> None:
    with pytest.raises(TelemetryConfigError, match=message):
        TelemetrySettings.from_env(env)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, ("logs", True, True, True)),
        ({"OTEL_LOGS_EXPORTER": "none"}, ("events", True, False, True)),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": " none "}, ("logs", False, True, False)),
        ({"CLAIMTRAIL_OTEL_VERDICTS": "both", "OTEL_TRACES_EXPORTER": "otlp"}, ("both", True, True, True)),
    ],
    ids=["defaults", "logs-off-routes-events", "traces-and-metrics-off", "both"],
)
def test_signal_and_verdict_settings_from_env(env: dict[str, str], expected: tuple[str, bool, bool, bool]) -> None:
    settings = TelemetrySettings.from_env(env)
    assert (settings.verdicts, settings.traces, settings.logs, settings.metrics) == expected
