"""Three routes, one set of bytes: OTLP protobuf written by ClaimTrail itself, SDK span and log
objects built directly, and the SDK's own Tracer and Logger all encode a decision identically."""

from __future__ import annotations

import dataclasses
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
from audit.telemetry import DecisionTelemetry, Redaction, TelemetrySettings, decision_wire, otlpwire
from audit.telemetry.shape import AttemptLinks
from audit.telemetry.spans import HashedOnceResource
from tests.otlp.test_round_trip_property import records
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


def _wire(spans: InMemorySpanExporter, logs: InMemoryLogRecordExporter) -> tuple[bytes, bytes, int, int]:
    finished_spans, finished_logs = spans.get_finished_spans(), logs.get_finished_logs()
    return (
        encode_spans(finished_spans).SerializeToString(),
        encode_logs(finished_logs).SerializeToString(),
        len(finished_spans),
        len(finished_logs),
    )


def _written(records: Sequence[DecisionRecord], verdicts: Sequence[TierEvidence],
             labels: Mapping[str, str] | None, settings: TelemetrySettings) -> tuple[bytes, bytes, int, int]:
    """What ClaimTrail's own encoder writes for the same decisions, in one request per signal, by
    the route the exporter takes (from the record directly when it can, else from the shape)."""
    envelope = otlpwire.Envelope(RESOURCE.attributes)
    links = AttemptLinks()
    spans: list[bytes] = []
    logs: list[bytes] = []
    for record in records:
        decision_spans, decision_logs, _ = decision_wire.fields(
            record, verdicts, labels, settings.shape_options(), links)
        spans += decision_spans
        logs += decision_logs
    # an empty log batch is never sent; the SDK encodes no log records as an empty request
    return envelope.request(spans), envelope.request(logs) if logs else b"", len(spans), len(logs)


Wire = tuple[bytes, bytes, int, int]


def _three(
    records: Sequence[DecisionRecord],
    *,
    verdicts: Sequence[TierEvidence] = (),
    labels: Mapping[str, str] | None = None,
    redaction: Redaction = Redaction(),
    max_verdicts: int = 64,
    route: str = "logs",
    api_url: str = "",
    id_salt: str = "",
) -> tuple[Wire, Wire, Wire]:
    settings = TelemetrySettings(max_verdicts=max_verdicts, redaction=redaction, verdicts=route, api_url=api_url,
                                 id_salt=id_salt)
    direct_spans, direct_logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    direct = DecisionTelemetry(direct_spans, direct_logs, None, resource=RESOURCE, batch=False, settings=settings)
    ref_spans, ref_logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    reference = TracerBuiltExport(ref_spans, ref_logs, RESOURCE, options=settings.shape_options())
    for record in records:
        direct.export(record, verdicts, labels)
        reference.export(record, verdicts, labels)
    direct.shutdown()
    reference.shutdown()
    return _wire(direct_spans, direct_logs), _wire(ref_spans, ref_logs), _written(records, verdicts, labels, settings)


def _retries() -> list[DecisionRecord]:
    unschedulable = dict(outcome=Outcome.UNSCHEDULABLE.value, devices=[], node="", tier_index=-1, allocated_model="",
                         fallback=False, retry_class="unschedulable")
    return [make_record(0, **unschedulable), make_record(1, **unschedulable), make_record(2)]


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
    "no-wait-no-duration": dict(records=[make_record(wait_ms=0, duration_us=0)]),
    "texts-longer-than-the-cached-heads": dict(records=[make_record(message="no device: " + "in_use " * 3000,
                                                                     claims=["c" * 5000, "trainer-gpu"])]),
    "verdicts-as-span-events": dict(records=[make_record()], verdicts=_evidence(), route="events"),
    "verdicts-as-logs-and-events": dict(records=[make_record()], verdicts=_evidence(), route="both"),
    "retries-link-to-the-attempt-before": dict(records=_retries()),
    "why-url-and-id-salt": dict(records=[make_record()], api_url="http://claimtrail:8000", id_salt="run-2"),
    # no blockers, no labels, no engine verdicts: written straight from the record
    "usual-decisions-in-one-pass": dict(records=[make_record(i, blockers=[]) for i in range(3)],
                                        api_url="http://claimtrail:8000", id_salt="run-2"),
    "usual-retries-in-one-pass": dict(records=[dataclasses.replace(r, blockers=[]) for r in _retries()]),
    "usual-error-in-one-pass": dict(records=[make_record(outcome=Outcome.ERROR.value, message="", devices=[], node="",
                                                         blockers=[])]),
}


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_written_protobuf_sdk_objects_and_the_tracer_encode_byte_identical(case: dict) -> None:  # type: ignore[type-arg]
    direct, reference, written = _three(**case)
    assert direct[2:] == reference[2:] == written[2:]  # span and log counts
    assert direct[2] > 0
    assert direct[0] == reference[0] == written[0]
    if direct[3]:
        assert direct[1] == reference[1] == written[1]


@settings(max_examples=25, deadline=None)
@given(
    attempt=st.integers(0, 10_000),
    duration_us=st.integers(0, 10**9),
    labels=st.dictionaries(st.text(min_size=1, max_size=8), st.text(max_size=12), max_size=4),
    max_verdicts=st.integers(0, 8),
    hash_pod_names=st.booleans(),
)
def test_all_three_routes_agree_for_any_decision(
    attempt: int, duration_us: int, labels: dict[str, str], max_verdicts: int, hash_pod_names: bool
) -> None:
    record = make_record(attempt, duration_us=duration_us)
    direct, reference, written = _three([record], verdicts=_evidence(), labels=labels, max_verdicts=max_verdicts,
                                        redaction=Redaction(hash_pod_names=hash_pod_names), route="both")
    assert direct == reference
    assert (written[0], written[2:]) == (direct[0], direct[2:])
    if direct[3]:
        assert written[1] == direct[1]


@settings(max_examples=40, deadline=None)
@given(record=records())
def test_written_protobuf_equals_the_sdk_encoding_for_any_record(record: DecisionRecord) -> None:
    direct, _, written = _three([record], route="both")
    assert (written[0], written[2:]) == (direct[0], direct[2:])
    if direct[3]:
        assert written[1] == direct[1]


def test_hashed_once_resource_is_equal_to_and_hashes_like_its_resource() -> None:
    frozen = HashedOnceResource(RESOURCE)
    assert frozen == RESOURCE
    assert hash(frozen) == hash(RESOURCE)
    assert frozen.attributes == RESOURCE.attributes
    assert frozen.schema_url == RESOURCE.schema_url
