"""Property: any valid record survives export -> OTLP protobuf -> receiver unchanged."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.canonical import canonical_json
from audit.records import (
    DecisionRecord,
    DeviceRef,
    Exemplar,
    Outcome,
    TierBlocker,
    TierSummary,
    record_dict,
    record_text,
)
from ingest.otlp.decode import records_from_logs, records_from_traces
from tests.otlp.payloads import exported

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
small = st.integers(min_value=0, max_value=2**31)
# the store's UInt64 columns (seq, wait_ms), past what OTLP's int_value holds, and its UInt32 duration_us
uint64 = st.integers(min_value=0, max_value=2**64 - 1)
# a tenant name is any text but the reserved "(others)" and control characters (validate_record)
tenant_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12).filter(
    lambda t: t != "(others)")
# a cluster name is any text but the empty one and control characters (validate_record)
cluster_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12)
# a policy version is any text without control characters (validate_record)
versions = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12)
reasons = st.sampled_from(["in_use", "unhealthy", "not_reached", "selected", "quota_exhausted"])

exemplars = st.builds(Exemplar, device=text, node=text, reason=reasons, detail=st.dictionaries(text, text, max_size=2))
tiers = st.builds(
    TierSummary,
    index=st.integers(0, 7),
    request=text,
    model=text,
    considered=small,
    reasons=st.dictionaries(reasons, small, max_size=3),
    exemplars=st.lists(exemplars, max_size=3),
    nodes_evaluated=small,
)


@st.composite
def records(draw: st.DrawFn) -> DecisionRecord:
    record = DecisionRecord(
        decision_id=draw(st.uuids()).hex,
        cluster=draw(cluster_names),
        seq=draw(uint64),
        time="2026-01-02T03:04:05.123456+00:00",
        attempt=draw(st.integers(0, 50)),
        tenant=draw(tenant_names),
        namespace=draw(text),
        pod=draw(text),
        pod_uid=draw(text),
        claims=draw(st.lists(text, max_size=2)),
        claim_uids=draw(st.lists(text, max_size=2)),
        preference=draw(st.lists(text, max_size=3)),
        policy_version=draw(versions),
        policy_digest=draw(text),
        outcome=draw(st.sampled_from([o.value for o in Outcome])),
        node=draw(text),
        devices=draw(st.lists(st.builds(DeviceRef, device=text, node=text, model=text, request=text), max_size=2)),
        tier_index=draw(st.integers(-1, 7)),
        fallback=draw(st.booleans()),
        tiers=draw(st.lists(tiers, max_size=3, unique_by=lambda t: t.index)),
        blockers=draw(st.lists(st.builds(TierBlocker, code=text, tier=st.integers(0, 7), detail=st.dictionaries(text, small, max_size=2)), max_size=2)),
        wait_ms=draw(uint64),
        duration_us=draw(st.integers(0, 2**32 - 1)),
        message=draw(text),
    )
    return record.seal()


@settings(max_examples=40, deadline=None)
@given(records())
def test_any_record_round_trips_with_the_same_output_digest(record: DecisionRecord) -> None:
    spans, verdict_logs = exported([record])
    decoded = records_from_traces(spans)
    assert decoded.rejected == [] and decoded.ignored == 0
    assert [r.to_dict() for r in decoded.records] == [record.to_dict()]
    assert decoded.parts == len(record.tiers) + (1 if record.wait_ms else 0)  # tier spans and the wait span
    logs_decoded = records_from_logs(verdict_logs)
    assert logs_decoded.parts == min(64, sum(len(t.exemplars) for t in record.tiers))


@settings(max_examples=40, deadline=None)
@given(records())
def test_fast_record_dict_equals_to_dict(record: DecisionRecord) -> None:
    assert record_dict(record) == record.to_dict()


@settings(max_examples=40, deadline=None)
@given(records())
def test_record_json_is_the_canonical_json_of_to_dict(record: DecisionRecord) -> None:
    assert record_text(record).encode() == canonical_json(record.to_dict())
