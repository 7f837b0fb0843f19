"""A stalled backend does not cost decisions: the batch queues hold thousands of decisions."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from audit.telemetry import DecisionTelemetry
from tests.telemetry.records_factory import make_record

DECISIONS = 1000  # 4,000 spans (root, wait, two tiers): more than the SDK's default queue of 2,048


class StalledUntilReleased(SpanExporter):
    """Holds every export call until released, like a backend that stopped answering for a while."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.spans: list[ReadableSpan] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.release.wait(timeout=60)
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        self.release.set()


@pytest.mark.parametrize(("queue_env", "all_kept"), [("", True), ("100", False)], ids=["claimtrail-default", "env-small-queue"])
def test_spans_queued_during_a_stall_are_exported_afterwards(
    monkeypatch: pytest.MonkeyPatch, queue_env: str, all_kept: bool
) -> None:
    monkeypatch.delenv("OTEL_BSP_MAX_QUEUE_SIZE", raising=False)
    if queue_env:
        monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", queue_env)
        monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", queue_env)
    backend = StalledUntilReleased()
    telemetry = DecisionTelemetry(backend, InMemoryLogRecordExporter(), None)
    for i in range(DECISIONS):
        telemetry.export(make_record(i))
    backend.release.set()
    telemetry.shutdown()
    assert (len(backend.spans) == 4 * DECISIONS) is all_kept
