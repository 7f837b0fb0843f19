"""Directly built spans and log records put the same OTLP bytes on the wire as the Tracer path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from audit.allocator.outcome import DeviceVerdict, TierEvidence
from audit.records import DecisionRecord, Exemplar, Outcome, TierSummary
from audit.telemetry import DecisionTelemetry, Redaction, TelemetrySettings
from audit.telemetry.spans import HashedOnceResource
from tests.telemetry.records_factory import POD, make_record
from tests.telemetry.tracer_reference import TracerBuiltExport

RESOURCE = Resource.create({"service.name": "claimtrail", "deployment.environment": "test"})
ALL_REDACTION = Redaction(hash_pod_names=True, drop_labels=True, drop_tenant=True, salt="pepper")


def _evidence() -> list[TierEvidence]:
    h100 = [DeviceVerdict(f"gpu.nvidia.com/node-h1/gpu-{i}", "in_use", (("claim", f"team-x/{POD}-{i}"),)) for i in range(4)]
    return [
        TierEvidence("team-vision/trainer-7f9c4-gpu", "gpu/h100", 0, h100),
        TierEvidence("team-vision/trainer-7f9c4-gpu", "gpu/l4", 5, [DeviceVerdict("d/p/l4-0", "node_mismatch")]),
    ]


def _multi_request() -> DecisionRecord:
    tiers = [TierSummary(i % 2, f"{name}/gpu/{'h100' if i % 2 == 0 else 'a100'}", "H100", 2, {"in_use": 2},
                         [Exemplar(f"d/p/{name}{i}", "node-a7", "in_use", {"on": POD})])
             for i, name in enumerate(["train", "train", "eval", "eval"])]
    return make_record(tiers=tiers)


def _wire(
    telemetry_export: object, spans: InMemorySpanExporter, logs: InMemoryLogRecordExporter
) -> tuple[bytes, bytes, int, int]:
    finished_spans, finished_logs = spans.get_finished_spans(), logs.get_finished_logs()
    return (
        encode_spans(finished_spans).SerializeToString(),
        encode_logs(finished_logs).SerializeToString(),
        len(finished_spans),
        len(finished_logs),
    )


def _both(
    records: Sequence[DecisionRecord],
    *,
    verdicts: Sequence[TierEvidence] = (),
    labels: Mapping[str, str] | None = None,
    redaction: Redaction = Redaction(),
    max_verdicts: int = 64,
) -> tuple[tuple[bytes, bytes, int, int], tuple[bytes, bytes, int, int]]:
    direct_spans, direct_logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    direct = DecisionTelemetry(
        direct_spans, direct_logs, None, resource=RESOURCE, batch=False,
        settings=TelemetrySettings(max_verdicts=max_verdicts, redaction=redaction),
    )
    ref_spans, ref_logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    reference = TracerBuiltExport(ref_spans, ref_logs, RESOURCE, redaction=redaction, max_verdicts=max_verdicts)
    for record in records:
        direct.export(record, verdicts, labels)
        reference.export(record, verdicts, labels)
    direct.shutdown()
    reference.shutdown()
    return _wire(direct, direct_spans, direct_logs), _wire(reference, ref_spans, ref_logs)


CASES = {
    "fallback-decision": dict(records=[make_record()]),
    "several-decisions-one-request": dict(records=[make_record(i) for i in range(5)]),
    "error-outcome-sets-status": dict(
        records=[make_record(outcome=Outcome.ERROR.value, message="cel_runtime: no such key", devices=[], node="")]),
    "error-without-message": dict(records=[make_record(outcome=Outcome.ERROR.value, message="", devices=[], node="")]),
    "labels": dict(records=[make_record()], labels={"app": "trainer", "team": "vision"}),
    "engine-verdicts-and-an-orphan-tier": dict(records=[make_record()], verdicts=_evidence()),
    "verdict-bound-cuts": dict(records=[make_record()], verdicts=_evidence(), max_verdicts=2),
    "no-verdicts": dict(records=[make_record()], max_verdicts=0),
    "every-redaction": dict(records=[make_record()], verdicts=_evidence(), labels={"owner": POD}, redaction=ALL_REDACTION),
    "several-requests": dict(records=[_multi_request()]),
    "no-tiers": dict(records=[make_record(tiers=[], duration_us=0)]),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_direct_spans_and_logs_encode_byte_identical_to_the_tracer_path(case: dict) -> None:  # type: ignore[type-arg]
    direct, reference = _both(**case)
    assert direct[2:] == reference[2:]  # span and log counts
    assert direct[2] > 0
    assert direct[0] == reference[0]
    assert direct[1] == reference[1]


@settings(max_examples=25, deadline=None)
@given(
    attempt=st.integers(0, 10_000),
    duration_us=st.integers(0, 10**9),
    labels=st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=12), max_size=4),
    max_verdicts=st.integers(0, 8),
    hash_pod_names=st.booleans(),
)
def test_direct_path_matches_the_tracer_path_for_any_decision(
    attempt: int, duration_us: int, labels: dict[str, str], max_verdicts: int, hash_pod_names: bool
) -> None:
    record = make_record(attempt, duration_us=duration_us)
    direct, reference = _both([record], verdicts=_evidence(), labels=labels, max_verdicts=max_verdicts,
                              redaction=Redaction(hash_pod_names=hash_pod_names))
    assert direct == reference


def test_hashed_once_resource_is_equal_to_and_hashes_like_its_resource() -> None:
    frozen = HashedOnceResource(RESOURCE)
    assert frozen == RESOURCE
    assert hash(frozen) == hash(RESOURCE)
    assert frozen.attributes == RESOURCE.attributes
    assert frozen.schema_url == RESOURCE.schema_url
