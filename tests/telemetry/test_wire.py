"""The engine-to-export-child encoding: what arrives is what was sent, exported byte for byte alike."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from audit.allocator.outcome import DeviceVerdict, TierEvidence
from audit.records import DecisionRecord, TierBlocker
from audit.telemetry import DecisionTelemetry, TelemetryError
from audit.telemetry.wire import decode_decision, encode_decision
from tests.otlp.test_round_trip_property import records
from tests.telemetry.records_factory import make_record

EVIDENCE = [
    TierEvidence("team-vision/trainer-gpu", "gpu/h100", 0, [
        DeviceVerdict("gpu.nvidia.com/node-h1/gpu-0", "in_use", (("holder", "team-vision/old"),)),
        DeviceVerdict("gpu.nvidia.com/node-h1/gpu-1", "not_reached"),
    ]),
]


def exported_bytes(record: DecisionRecord, verdicts: Sequence[TierEvidence], labels: Mapping[str, str] | None) -> tuple[bytes, bytes]:
    """The OTLP protobuf of the decision's spans and verdict logs, as the exporters would send them."""
    spans, logs = InMemorySpanExporter(), InMemoryLogRecordExporter()
    telemetry = DecisionTelemetry(spans, logs, None, resource=Resource.create({"service.name": "claimtrail"}), batch=False)
    telemetry.export(record, verdicts, labels)
    telemetry.shutdown()
    return (encode_spans(spans.get_finished_spans()).SerializeToString(),
            encode_logs(logs.get_finished_logs()).SerializeToString())


def _round_trip(record: DecisionRecord, verdicts: Sequence[TierEvidence] = (), labels: Mapping[str, str] | None = None) -> tuple[bytes, Any]:
    data = encode_decision(record, verdicts, labels)
    return data[:1], decode_decision(data)


def _with_blocker_detail(detail: dict[Any, Any]) -> DecisionRecord:
    return _changed(blockers=[TierBlocker("insufficient_on_node", 0, detail)])


def _changed(**fields: Any) -> DecisionRecord:
    # set after sealing: the output digest itself refuses some of these values
    record = make_record()
    for name, value in fields.items():
        setattr(record, name, value)
    return record


@pytest.mark.parametrize(
    ("case", "record", "labels", "path"),
    [
        ("engine record", make_record(), None, b"J"),
        ("record with labels", make_record(), {"team": "vision", "cost-center": "ml-7"}, b"J"),
        ("empty labels stay empty, not absent", make_record(), {}, b"J"),
        ("NaN would be written as null", _with_blocker_detail({"share": float("nan")}), None, b"P"),
        ("infinity would be written as null", _with_blocker_detail({"share": float("inf")}), None, b"P"),
        ("a real None in a detail", _with_blocker_detail({"node": None}), None, b"P"),
        ("an integer beyond 64 bits", _with_blocker_detail({"bytes": 2**70}), None, b"P"),
        ("a non-string key", _with_blocker_detail({7: "seven"}), None, b"P"),
        ("a lone surrogate", _changed(message="bad \ud800 text"), None, b"P"),
        ("a string containing null", make_record(pod="null-runner"), None, b"P"),
        ("finite floats round-trip as JSON", _with_blocker_detail({"share": 0.1 + 0.2, "neg": -0.0}), None, b"J"),
    ],
)
def test_decisions_arrive_equal_by_the_path_that_carries_them_exactly(
    case: str, record: DecisionRecord, labels: Mapping[str, str] | None, path: bytes
) -> None:
    taken, (got, verdicts, got_labels) = _round_trip(record, EVIDENCE, labels)
    assert taken == path, case
    assert repr(got) == repr(record)  # repr, not ==: a NaN is unequal to itself
    assert verdicts == EVIDENCE
    assert got_labels == labels


def test_floats_keep_their_sign_and_every_bit() -> None:
    _, (got, _, _) = _round_trip(_with_blocker_detail({"neg": -0.0, "third": 1 / 3}))
    detail = got.blockers[0].detail
    assert str(detail["neg"]) == "-0.0" and detail["third"] == 1 / 3


def test_a_record_holds_its_fields_and_nothing_else_so_the_text_is_the_whole_record() -> None:
    # records are slotted: nothing can ride along on an instance and travel in its JSON
    record = make_record()
    with pytest.raises(AttributeError):
        record.cached_text = "not a field"  # type: ignore[attr-defined]
    taken, (got, _, _) = _round_trip(record)
    assert taken == b"J" and got == record


def test_verdict_details_come_back_as_tuples_like_the_engine_makes_them() -> None:
    _, (_, verdicts, _) = _round_trip(make_record(), EVIDENCE)
    assert verdicts[0].verdicts[0].detail == (("holder", "team-vision/old"),)
    assert dataclasses.astuple(verdicts[0].verdicts[0]) == dataclasses.astuple(EVIDENCE[0].verdicts[0])


@settings(max_examples=60, deadline=None)
@given(records(), st.none() | st.dictionaries(st.text(max_size=8), st.text(max_size=8), max_size=3))
def test_any_decision_exports_the_same_bytes_after_the_trip(record: DecisionRecord, labels: dict[str, str] | None) -> None:
    _, (got, verdicts, got_labels) = _round_trip(record, EVIDENCE, labels)
    assert got == record and got_labels == labels
    assert exported_bytes(got, verdicts, got_labels) == exported_bytes(record, EVIDENCE, labels)


def test_a_value_no_path_can_carry_is_refused_naming_the_decision() -> None:
    record = _with_blocker_detail({"callback": lambda: None})
    with pytest.raises(TelemetryError, match=rf"DecisionRecord {record.decision_id}: cannot be handed to the export process"):
        encode_decision(record, (), None)
