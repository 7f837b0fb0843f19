"""Metrics counted without the SDK give the points the SDK's instruments give for the same decisions."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from audit.records import DecisionRecord, Outcome
from audit.telemetry.decision_metrics import DecisionMetrics
from audit.telemetry.metric_points import DecisionCounts
from tests.telemetry.records_factory import make_record


def _points(request: ExportMetricsServiceRequest) -> dict[tuple[str, str, str], Any]:
    """Every data point by (instrument, unit, attributes), without its timestamps."""
    out: dict[tuple[str, str, str], Any] = {}
    for rm in request.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                kind = metric.WhichOneof("data")
                data = getattr(metric, kind)
                for p in data.data_points:
                    key = (metric.name, metric.unit, str(sorted((kv.key, kv.value.string_value) for kv in p.attributes)))
                    if kind == "sum":
                        out[key] = ("sum", p.as_int, data.is_monotonic, data.aggregation_temporality)
                    else:
                        out[key] = ("histogram", p.count, round(p.sum, 9), list(p.bucket_counts), list(p.explicit_bounds),
                                    p.min, p.max, data.aggregation_temporality)
    return out


def _both(records: list[DecisionRecord]) -> tuple[dict[Any, Any], dict[Any, Any]]:
    reader = InMemoryMetricReader()
    sdk = DecisionMetrics(MeterProvider(metric_readers=[reader]))
    counts = DecisionCounts()
    for record in records:
        sdk.observe_decision(record)
        counts.observe_decision(record)
    for target in (sdk, counts):
        target.observe_health_transition("gpu-east", "H100", False)
        target.observe_replay("gpu-east", False)
        target.observe_replay("gpu-east", True)
    data = reader.get_metrics_data()
    assert data is not None
    return _points(counts.request({}, 1, 2)), _points(encode_metrics(data))


def test_counted_points_equal_the_sdk_instruments_points() -> None:
    records = [make_record(0), make_record(1, tenant="", duration_us=100_000),
               make_record(2, outcome=Outcome.UNSCHEDULABLE.value, retry_class="binding_conflict", fallback=False,
                           wait_ms=0, duration_us=250)]
    ours, sdk = _both(records)
    assert ours == sdk
    assert len(ours) == 13  # decisions 3, fallbacks 2, histograms 2 + 2, retries, health, replays, mismatches


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2_000_000), st.integers(0, 10**8), st.sampled_from(["", "unschedulable", "terminal"])),
                min_size=1, max_size=12))
def test_any_decisions_count_as_the_sdk_counts_them(values: list[tuple[int, int, str]]) -> None:
    records = [make_record(i, duration_us=d, wait_ms=w, retry_class=r) for i, (d, w, r) in enumerate(values)]
    ours, sdk = _both(records)
    assert ours == sdk
