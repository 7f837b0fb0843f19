"""Decision metrics on the OpenTelemetry metrics API: counts, fallbacks, durations, retries,
health transitions and replay mismatches.

Instruments take their attributes from the redacted record, so a dropped tenant never becomes a
metric label. Durations are in seconds (the OpenTelemetry convention) with bucket boundaries
chosen for what is measured: allocation takes microseconds to milliseconds, waiting takes
seconds to hours.
"""

from __future__ import annotations

from opentelemetry.metrics import MeterProvider

from audit.records import DecisionRecord, RetryClass
from audit.telemetry import schema as s

DECISIONS = "claimtrail.decisions"
FALLBACKS = "claimtrail.fallbacks"
ALLOCATION_DURATION = "claimtrail.allocation.duration"
WAIT_DURATION = "claimtrail.wait.duration"
HEALTH_TRANSITIONS = "claimtrail.health.transitions"
RETRIES = "claimtrail.retries"
REPLAYS = "claimtrail.replay.runs"
REPLAY_MISMATCHES = "claimtrail.replay.mismatches"

ALLOCATION_BUCKETS_S = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
WAIT_BUCKETS_S = (0.1, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0, 600.0, 1800.0, 3600.0, 14400.0, 86400.0)

# Terminal and "no retry" classes end the claim's attempts; every other class backs off and retries.
_NOT_RETRIED = {RetryClass.NONE.value, RetryClass.TERMINAL.value}


class DecisionMetrics:
    def __init__(self, meter_provider: MeterProvider) -> None:
        meter = meter_provider.get_meter(s.INSTRUMENTATION_SCOPE)
        self._decisions = meter.create_counter(DECISIONS, unit="{decision}", description="Allocation decisions by outcome")
        self._fallbacks = meter.create_counter(
            FALLBACKS, unit="{decision}", description="Allocations that used a model other than the preferred one"
        )
        self._duration = meter.create_histogram(
            ALLOCATION_DURATION,
            unit="s",
            description="Engine time per allocation decision",
            explicit_bucket_boundaries_advisory=ALLOCATION_BUCKETS_S,
        )
        self._wait = meter.create_histogram(
            WAIT_DURATION,
            unit="s",
            description="Time a claim waited before this decision",
            explicit_bucket_boundaries_advisory=WAIT_BUCKETS_S,
        )
        self._health = meter.create_counter(
            HEALTH_TRANSITIONS, unit="{transition}", description="Device health changes (healthy <-> unhealthy)"
        )
        self._retries = meter.create_counter(
            RETRIES, unit="{decision}", description="Failed attempts that will be retried, by retry class"
        )
        self._replays = meter.create_counter(REPLAYS, unit="{replay}", description="Decisions re-executed by replay")
        self._mismatches = meter.create_counter(
            REPLAY_MISMATCHES, unit="{replay}", description="Replays whose output digest differed from the record"
        )

    def observe_decision(self, record: DecisionRecord) -> None:
        base = {"cluster": record.cluster, "outcome": record.outcome}
        if record.tenant:
            base["tenant"] = record.tenant
        self._decisions.add(1, base)
        if record.fallback:
            fb = {"preferred": record.preferred_model, "allocated": record.allocated_model}
            if record.tenant:
                fb["tenant"] = record.tenant
            self._fallbacks.add(1, fb)
        self._duration.record(record.duration_us / 1e6, {"outcome": record.outcome})
        self._wait.record(record.wait_ms / 1e3, {"outcome": record.outcome})
        if record.retry_class not in _NOT_RETRIED:
            self._retries.add(1, {"retry_class": record.retry_class})

    def observe_health_transition(self, cluster: str, model: str, healthy: bool) -> None:
        self._health.add(1, {"cluster": cluster, "model": model, "to": "healthy" if healthy else "unhealthy"})

    def observe_replay(self, cluster: str, matched: bool) -> None:
        self._replays.add(1, {"cluster": cluster})
        if not matched:
            self._mismatches.add(1, {"cluster": cluster})
