"""Decision metrics counted in plain dictionaries and written as one OTLP metrics request.

The SDK's instruments cost tens of microseconds per decision (attribute validation, locks, an
aggregation object per point); ``DecisionExporter`` instead counts each decision with a few
dictionary updates and, every ``OTEL_METRIC_EXPORT_INTERVAL`` and at flush, builds an
``ExportMetricsServiceRequest`` with the ``opentelemetry-proto`` messages: the same instruments,
attributes, units and bucket boundaries as ``audit.telemetry.decision_metrics`` (which stays the
SDK route), cumulative temporality as the SDK's OTLP exporter defaults to.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, InstrumentationScope, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    AggregationTemporality,
    Histogram,
    HistogramDataPoint,
    Metric,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)

from audit.records import DecisionRecord
from audit.telemetry import decision_metrics as m
from audit.telemetry import otlpwire
from audit.telemetry import schema as s

Attrs = tuple[tuple[str, str], ...]
_CUMULATIVE = AggregationTemporality.AGGREGATION_TEMPORALITY_CUMULATIVE
_NOT_RETRIED = {"", "terminal"}

# name -> (unit, description), as decision_metrics declares them
COUNTERS = {
    m.DECISIONS: ("{decision}", "Allocation decisions by outcome"),
    m.FALLBACKS: ("{decision}", "Allocations that used a model other than the preferred one"),
    m.HEALTH_TRANSITIONS: ("{transition}", "Device health changes (healthy <-> unhealthy)"),
    m.RETRIES: ("{decision}", "Failed attempts that will be retried, by retry class"),
    m.REPLAYS: ("{replay}", "Decisions re-executed by replay"),
    m.REPLAY_MISMATCHES: ("{replay}", "Replays whose output digest differed from the record"),
}
HISTOGRAMS = {
    m.ALLOCATION_DURATION: ("s", "Engine time per allocation decision", m.ALLOCATION_BUCKETS_S),
    m.WAIT_DURATION: ("s", "Time a claim waited before this decision", m.WAIT_BUCKETS_S),
}


_ALLOCATION_BOUNDS, _WAIT_BOUNDS = HISTOGRAMS[m.ALLOCATION_DURATION][2], HISTOGRAMS[m.WAIT_DURATION][2]


class _Histogram:
    __slots__ = ("counts", "sum", "count", "min", "max")

    def __init__(self, buckets: int) -> None:
        self.counts = [0] * (buckets + 1)
        self.sum = 0.0
        self.count = 0
        self.min = float("inf")
        self.max = float("-inf")

    def record(self, bounds: tuple[float, ...], value: float) -> None:
        # explicit buckets are upper-inclusive: (bound[i-1], bound[i]], as the OTLP spec says
        self.counts[bisect.bisect_left(bounds, value)] += 1
        self.sum += value
        self.count += 1
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value


class DecisionCounts:
    """The decision instruments' cumulative state, updated per decision without the SDK."""

    def __init__(self) -> None:
        self.counters: dict[str, dict[Attrs, int]] = {name: {} for name in COUNTERS}
        self.histograms: dict[str, dict[Attrs, _Histogram]] = {name: {} for name in HISTOGRAMS}
        self._points: dict[tuple[str, str, str], tuple[tuple[dict[Attrs, int], Attrs], _Histogram, _Histogram]] = {}

    def _add(self, name: str, attrs: Attrs) -> None:
        points = self.counters[name]
        points[attrs] = points.get(attrs, 0) + 1

    def observe_decision(self, record: DecisionRecord) -> None:
        outcome, tenant, cluster = record.outcome, record.tenant, record.cluster
        # a decision's points, by the values that pick them: a handful of combinations in a run
        known = self._points.get((cluster, outcome, tenant))
        if known is None:
            known = self._points_for(cluster, outcome, tenant)
        decisions, duration, wait = known
        decisions[0][decisions[1]] = decisions[0].get(decisions[1], 0) + 1
        if record.fallback:
            by_tenant = (("tenant", tenant),) if tenant else ()
            self._add(m.FALLBACKS, (("allocated", record.allocated_model), ("preferred", record.preferred_model),
                                    *by_tenant))
        duration.record(_ALLOCATION_BOUNDS, record.duration_us / 1e6)
        wait.record(_WAIT_BOUNDS, record.wait_ms / 1e3)
        if record.retry_class not in _NOT_RETRIED:
            self._add(m.RETRIES, (("retry_class", record.retry_class),))

    def _points_for(self, cluster: str, outcome: str, tenant: str) -> tuple[tuple[dict[Attrs, int], Attrs],
                                                                            _Histogram, _Histogram]:
        by_tenant = (("tenant", tenant),) if tenant else ()
        by_outcome = (("outcome", outcome),)
        histograms = []
        for name in (m.ALLOCATION_DURATION, m.WAIT_DURATION):
            points = self.histograms[name]
            point = points.get(by_outcome)
            if point is None:
                point = points[by_outcome] = _Histogram(len(HISTOGRAMS[name][2]))
            histograms.append(point)
        known = self._points[(cluster, outcome, tenant)] = (
            (self.counters[m.DECISIONS], (("cluster", cluster), ("outcome", outcome), *by_tenant)),
            histograms[0], histograms[1])
        return known

    def observe_health_transition(self, cluster: str, model: str, healthy: bool) -> None:
        self._add(m.HEALTH_TRANSITIONS, (("cluster", cluster), ("model", model), ("to", "healthy" if healthy else "unhealthy")))

    def observe_replay(self, cluster: str, matched: bool) -> None:
        self._add(m.REPLAYS, (("cluster", cluster),))
        if not matched:
            self._add(m.REPLAY_MISMATCHES, (("cluster", cluster),))

    def points(self) -> int:
        return sum(map(len, self.counters.values())) + sum(map(len, self.histograms.values()))

    def request(self, resource_attributes: Mapping[str, Any], start_ns: int, now_ns: int) -> ExportMetricsServiceRequest:
        """Every point so far, cumulative from ``start_ns``; instruments without points are left out."""
        metrics = []
        for name, points in self.counters.items():
            if points:
                unit, description = COUNTERS[name]
                data = [NumberDataPoint(attributes=_kvs(a), start_time_unix_nano=start_ns, time_unix_nano=now_ns,
                                        as_int=v) for a, v in points.items()]
                metrics.append(Metric(name=name, unit=unit, description=description,
                                      sum=Sum(data_points=data, aggregation_temporality=_CUMULATIVE, is_monotonic=True)))
        for name, hist_points in self.histograms.items():
            if hist_points:
                unit, description, bounds = HISTOGRAMS[name]
                hist = [HistogramDataPoint(attributes=_kvs(a), start_time_unix_nano=start_ns, time_unix_nano=now_ns,
                                           count=h.count, sum=h.sum, bucket_counts=h.counts, explicit_bounds=bounds,
                                           min=h.min, max=h.max) for a, h in hist_points.items()]
                metrics.append(Metric(name=name, unit=unit, description=description,
                                      histogram=Histogram(data_points=hist, aggregation_temporality=_CUMULATIVE)))
        scope = ScopeMetrics(scope=InstrumentationScope(name=s.INSTRUMENTATION_SCOPE), metrics=metrics)
        return ExportMetricsServiceRequest(resource_metrics=[ResourceMetrics(resource=otlpwire.resource(resource_attributes),
                                                                             scope_metrics=[scope])])


def _kvs(attrs: Attrs) -> list[KeyValue]:
    return [KeyValue(key=k, value=AnyValue(string_value=v)) for k, v in attrs]


