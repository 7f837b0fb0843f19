"""Every span of a decision's trace lies within its parent's [start, end], and every verdict within
its span: explorers draw a child past its parent's end as if the decision went on after it ended.

Tiers tried follow one another from the decision's start; a tier not tried is a zero-length mark
where the tiers tried before it ended, even when several requests of one pod each have tiers
that were not tried."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from audit.records import DecisionRecord, Exemplar, Outcome, TierBlocker, TierSummary
from audit.telemetry import TelemetrySettings, decision_wire, otlpwire
from audit.telemetry.shape import AttemptLinks, decision_shape
from tests.telemetry.capture import attrs, export_over_http
from tests.telemetry.records_factory import make_record
from tests.telemetry.test_trace_shape import MS, START_NS, US

H100, A100, L40S = (TierSummary(0, "gpu/h100", "H100", 0), TierSummary(1, "gpu/a100", "A100", 0),
                    TierSummary(2, "gpu/l40s", "L40S", 0))
SEEN = {"considered": 4, "reasons": {"in_use": 4}}


def _record(tiers: list[TierSummary], tier_index: int, duration_us: int, **overrides: Any) -> DecisionRecord:
    return make_record(tiers=tiers, tier_index=tier_index, duration_us=duration_us, wait_ms=0, blockers=[],
                       **overrides)


NESTED = {
    # the QA case: three tiers, the first selected; the two marks used to sit at +1 ms and +2 ms
    "first-of-three-selected": (
        _record([H100, A100, L40S], 0, 0), (START_NS, START_NS + MS),
        [("selected", START_NS, START_NS + MS), ("not_tried", START_NS + MS, START_NS + MS),
         ("not_tried", START_NS + MS, START_NS + MS)]),
    "first-of-three-selected-measured": (
        _record([H100, A100, L40S], 0, 300), (START_NS, START_NS + 300 * US),
        [("selected", START_NS, START_NS + 300 * US), ("not_tried", START_NS + 300 * US, START_NS + 300 * US),
         ("not_tried", START_NS + 300 * US, START_NS + 300 * US)]),
    # two requests of one pod, each allocated from its first tier: the second request's tried tier
    # used to start at +2 slots and end past the decision
    "two-requests-each-with-a-tier-not-tried": (
        _record([H100, A100, dataclasses.replace(H100, request="nic/h100"), dataclasses.replace(A100, request="nic/a100")],
                0, 400), (START_NS, START_NS + 400 * US),
        [("selected", START_NS, START_NS + 200 * US), ("not_tried", START_NS + 200 * US, START_NS + 200 * US),
         ("selected", START_NS + 200 * US, START_NS + 400 * US), ("not_tried", START_NS + 400 * US, START_NS + 400 * US)]),
    # nothing selected: the first tier met nothing and was not tried, the second was tried
    "unschedulable-first-tier-not-tried": (
        _record([H100, dataclasses.replace(A100, **SEEN)], -1, 0, outcome=Outcome.UNSCHEDULABLE.value, devices=[],
                node="", allocated_model="", fallback=False), (START_NS, START_NS + MS),
        [("not_tried", START_NS, START_NS), ("exhausted", START_NS, START_NS + MS)]),
    "error-before-any-tier": (
        _record([H100, A100], -1, 50, outcome=Outcome.ERROR.value, devices=[], node="", allocated_model="",
                fallback=False), (START_NS, START_NS + 50 * US),
        [("not_tried", START_NS, START_NS), ("not_tried", START_NS, START_NS)]),
}


@pytest.mark.parametrize(("record", "root", "tiers"), NESTED.values(), ids=NESTED.keys())
def test_every_tier_lies_within_the_decision_span(
    monkeypatch: pytest.MonkeyPatch, record: DecisionRecord, root: tuple[int, int], tiers: list[tuple[str, int, int]],
) -> None:
    wire = export_over_http(monkeypatch, [record])
    span_root = wire.root()
    assert (span_root.start_time_unix_nano, span_root.end_time_unix_nano) == root
    assert [(attrs(sp)["claimtrail.tier.result"], sp.start_time_unix_nano, sp.end_time_unix_nano)
            for sp in wire.tiers()] == tiers
    _assert_nested(wire.spans, wire.logs)


def _assert_nested(spans: list[Span], logs: list[LogRecord]) -> None:
    by_id = {sp.span_id: sp for sp in spans}
    for sp in spans:
        assert sp.start_time_unix_nano <= sp.end_time_unix_nano, sp.name
        for event in sp.events:
            assert sp.start_time_unix_nano <= event.time_unix_nano <= sp.end_time_unix_nano, (sp.name, event.name)
        if sp.parent_span_id:
            parent = by_id[sp.parent_span_id]
            assert parent.start_time_unix_nano <= sp.start_time_unix_nano, sp.name
            assert sp.end_time_unix_nano <= parent.end_time_unix_nano, sp.name
    for log in logs:
        owner = by_id[log.span_id]
        assert owner.start_time_unix_nano <= log.time_unix_nano <= owner.end_time_unix_nano, owner.name


# tier indexes repeat (a pod of several requests), results of every kind, durations shorter than
# one nanosecond per tier, with or without a wait
tiers = st.builds(
    TierSummary,
    index=st.integers(0, 3),
    request=st.sampled_from(["gpu/h100", "gpu/a100", "nic/h100"]),
    model=st.sampled_from(["H100", "A100", ""]),
    considered=st.integers(0, 2),
    reasons=st.dictionaries(st.sampled_from(["in_use", "unhealthy", "selected"]), st.integers(1, 3), max_size=2),
    exemplars=st.lists(st.builds(Exemplar, device=st.just("gpu.nvidia.com/n/gpu-0"), node=st.just("n"),
                                 reason=st.sampled_from(["in_use", "selected"])), max_size=2),
)


@st.composite
def decisions(draw: st.DrawFn) -> DecisionRecord:
    return make_record(
        draw(st.integers(0, 3)),
        tiers=draw(st.lists(tiers, max_size=6)),
        tier_index=draw(st.integers(-1, 3)),
        outcome=draw(st.sampled_from([o.value for o in Outcome])),
        blockers=draw(st.lists(st.builds(TierBlocker, code=st.just("quota"), tier=st.integers(0, 3)), max_size=2)),
        wait_ms=draw(st.sampled_from([0, 1, 1500])),
        duration_us=draw(st.sampled_from([0, 1, 7, 420, 10**6])),
    ).seal()


def _decode(spans: list[bytes], logs: list[bytes]) -> tuple[list[Span], list[LogRecord]]:
    envelope = otlpwire.Envelope({"service.name": "claimtrail"})
    traces = ExportTraceServiceRequest.FromString(envelope.request(spans))
    log_request = ExportLogsServiceRequest.FromString(envelope.request(logs))
    return ([sp for rs in traces.resource_spans for ss in rs.scope_spans for sp in ss.spans],
            [lr for rl in log_request.resource_logs for sl in rl.scope_logs for lr in sl.log_records])


@settings(max_examples=150, deadline=None)
@given(decisions(), st.sampled_from(["logs", "events", "both"]))
def test_every_child_span_lies_within_its_parent(record: DecisionRecord, verdicts: str) -> None:
    options = TelemetrySettings(verdicts=verdicts).shape_options()
    _assert_nested(*_decode(*otlpwire.decision(decision_shape(record, (), None, options, AttemptLinks()))))
    one_pass = decision_wire.encode(record, options, AttemptLinks())
    if one_pass is not None:  # the usual decision, written straight from the record
        _assert_nested(*_decode(*one_pass))
