"""Decision metrics: counts by outcome, fallbacks, durations, retries, health, replay mismatches."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from audit.records import Outcome, RetryClass
from audit.telemetry import DecisionTelemetry, Redaction, TelemetrySettings
from tests.telemetry.records_factory import make_record


def _points(reader: InMemoryMetricReader) -> dict[str, dict[tuple[tuple[str, Any], ...], Any]]:
    data = reader.get_metrics_data()
    out: dict[str, dict[tuple[tuple[str, Any], ...], Any]] = {}
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for p in metric.data.data_points:
                    key = tuple(sorted(p.attributes.items()))
                    value = (p.count, round(p.sum, 9)) if hasattr(p, "bucket_counts") else p.value
                    out.setdefault(metric.name, {})[key] = value
    return out


def _telemetry(redaction: Redaction = Redaction()) -> tuple[DecisionTelemetry, InMemoryMetricReader]:
    reader = InMemoryMetricReader()
    telemetry = DecisionTelemetry(
        InMemorySpanExporter(), InMemoryLogRecordExporter(), reader, settings=TelemetrySettings(redaction=redaction), batch=False
    )
    return telemetry, reader


def _unschedulable(attempt: int, retry: str) -> Any:
    return make_record(attempt, outcome=Outcome.UNSCHEDULABLE.value, devices=[], node="", tier_index=-1,
                       allocated_model="", fallback=False, retry_class=retry, wait_ms=30_000)


def test_decision_metrics_count_what_happened() -> None:
    telemetry, reader = _telemetry()
    telemetry.export(make_record(0))
    telemetry.export(make_record(1, fallback=False, allocated_model="H100", tier_index=0, duration_us=80))
    telemetry.export(_unschedulable(2, RetryClass.BINDING_CONFLICT.value))
    telemetry.export(_unschedulable(3, RetryClass.TERMINAL.value))
    telemetry.metrics.observe_health_transition("gpu-east", "H100", healthy=False)
    telemetry.metrics.observe_health_transition("gpu-east", "H100", healthy=True)
    telemetry.metrics.observe_replay("gpu-east", matched=True)
    telemetry.metrics.observe_replay("gpu-east", matched=False)
    points = _points(reader)
    telemetry.shutdown()

    base = (("cluster", "gpu-east"),)
    assert points["claimtrail.decisions"] == {
        (*base, ("outcome", "allocated"), ("tenant", "vision")): 2,
        (*base, ("outcome", "unschedulable"), ("tenant", "vision")): 2,
    }
    assert points["claimtrail.fallbacks"] == {(("allocated", "A100"), ("preferred", "H100"), ("tenant", "vision")): 1}
    assert points["claimtrail.retries"] == {(("retry_class", "binding_conflict"),): 1}
    assert points["claimtrail.allocation.duration"] == {
        (("outcome", "allocated"),): (2, 0.0005),
        (("outcome", "unschedulable"),): (2, 0.00084),
    }
    assert points["claimtrail.wait.duration"] == {
        (("outcome", "allocated"),): (2, 3.0),
        (("outcome", "unschedulable"),): (2, 60.0),
    }
    assert points["claimtrail.health.transitions"] == {
        (*base, ("model", "H100"), ("to", "unhealthy")): 1,
        (*base, ("model", "H100"), ("to", "healthy")): 1,
    }
    assert points["claimtrail.replay.runs"] == {base: 2}
    assert points["claimtrail.replay.mismatches"] == {base: 1}


@pytest.mark.parametrize("metric", ["claimtrail.decisions", "claimtrail.fallbacks"])
def test_dropped_tenant_is_not_a_metric_label(metric: str) -> None:
    telemetry, reader = _telemetry(Redaction(drop_tenant=True))
    telemetry.export(make_record(0))
    points = _points(reader)
    telemetry.shutdown()
    assert points[metric]
    assert all("tenant" not in dict(key) for key in points[metric])
