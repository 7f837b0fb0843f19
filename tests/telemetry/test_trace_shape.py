"""The exported protobuf: span tree, deterministic ids and times, attribute names, log links.

What changed deliberately from the first trace layout: tier spans are named after their model
and say what became of the tier, a wait span and the pod's creation time open the trace, tier
spans follow one another in preference order, failed preferred tiers carry an error status, and
the record attribute lists the record's fields in declared order (the canonical JSON's value, not
its bytes: written natively, it costs an exporter half as much)."""

from __future__ import annotations

import calendar
import dataclasses
import json

import pytest

from audit.canonical import canonical_text
from audit.records import DecisionRecord, Outcome, TierBlocker
from audit.telemetry import schema as s
from audit.telemetry.ids import root_span_id_for, tier_span_id_for, trace_id_for, wait_span_id_for
from tests.telemetry.capture import attrs, export_over_http
from tests.telemetry.records_factory import NAMESPACE, POD, TENANT, make_record

START_NS = calendar.timegm((2026, 3, 14, 9, 26, 53)) * 1_000_000_000 + 589_793_000


def _id(value: int, size: int) -> bytes:
    return value.to_bytes(size, "big")


def test_one_root_span_with_a_child_span_per_tier(monkeypatch: pytest.MonkeyPatch) -> None:
    record = make_record()
    wire = export_over_http(monkeypatch, [record])
    root = wire.root()
    assert root.name == s.ROOT_SPAN
    assert [t.name for t in wire.tiers()] == ["dra.allocate.tier H100", "dra.allocate.tier A100"]
    assert {t.parent_span_id for t in [*wire.tiers(), wire.wait()]} == {root.span_id}
    assert wire.wait().span_id == _id(wait_span_id_for(record.decision_id), 8)
    assert {sp.trace_id for sp in wire.spans} == {_id(trace_id_for(record.decision_id), 16)}
    assert root.span_id == _id(root_span_id_for(record.decision_id), 8)
    assert sorted(t.span_id for t in wire.tiers()) == sorted(
        _id(tier_span_id_for(record.decision_id, i), 8) for i in (0, 1)
    )


MS, US = 1_000_000, 1000


@pytest.mark.parametrize(
    ("overrides", "root", "wait", "tiers", "logs"),
    [
        # 1.5 s of waiting, then 420 µs of measured engine time shared by the two tiers tried
        ({}, (START_NS - 1500 * MS, START_NS + 420 * US), (START_NS - 1500 * MS, START_NS),
         [(START_NS, START_NS + 210 * US), (START_NS + 210 * US, START_NS + 420 * US)],
         [START_NS, START_NS, START_NS + 210 * US]),
        # nothing measured (a simulated record): each tried tier is drawn as one nominal millisecond
        ({"wait_ms": 0, "duration_us": 0}, (START_NS, START_NS + 2 * MS), None,
         [(START_NS, START_NS + MS), (START_NS + MS, START_NS + 2 * MS)], [START_NS, START_NS, START_NS + MS]),
        # the first tier allocated: the second was never tried and is a zero-length mark after it
        ({"wait_ms": 0, "duration_us": 0, "tier_index": 0, "fallback": False, "allocated_model": "H100"},
         (START_NS, START_NS + MS), None, [(START_NS, START_NS + MS), (START_NS + MS, START_NS + MS)],
         [START_NS, START_NS, START_NS + MS]),
    ],
    ids=["measured-with-wait", "unmeasured-nominal-tiers", "tier-not-tried"],
)
def test_span_times_show_the_wait_and_the_tiers_in_preference_order(
    monkeypatch: pytest.MonkeyPatch, overrides: dict, root: tuple[int, int],  # type: ignore[type-arg]
    wait: tuple[int, int] | None, tiers: list[tuple[int, int]], logs: list[int],
) -> None:
    wire = export_over_http(monkeypatch, [make_record(**overrides)])
    span_root = wire.root()
    assert (span_root.start_time_unix_nano, span_root.end_time_unix_nano) == root
    waits = [sp for sp in wire.spans if sp.name == s.WAIT_SPAN]
    assert [(sp.start_time_unix_nano, sp.end_time_unix_nano) for sp in waits] == ([wait] if wait else [])
    assert [(sp.start_time_unix_nano, sp.end_time_unix_nano) for sp in wire.tiers()] == tiers
    assert sorted(lr.time_unix_nano for lr in wire.logs) == logs


def test_root_span_attributes_follow_the_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    record = make_record()
    root = attrs(export_over_http(monkeypatch, [record]).root())
    expected = {
        "k8s.cluster.name": "gpu-east",
        "k8s.namespace.name": NAMESPACE,
        "k8s.pod.name": POD,
        "k8s.pod.uid": record.pod_uid,
        "k8s.node.name": "node-a7",
        "claimtrail.decision_id": record.decision_id,
        "claimtrail.schema_version": 1,
        "claimtrail.seq": 1042,
        "claimtrail.attempt": 0,
        "claimtrail.tenant": TENANT,
        "claimtrail.outcome": "allocated",
        "claimtrail.preferred_model": "H100",
        "claimtrail.allocated_model": "A100",
        "claimtrail.tier_index": 1,
        "claimtrail.fallback": True,
        "claimtrail.policy_version": "2026-03-01",
        "claimtrail.policy_digest": "a" * 64,
        "claimtrail.input_digest": "b" * 64,
        "claimtrail.output_digest": record.output_digest,
        "claimtrail.wait_ms": 1500,
        "claimtrail.steps": 17,
        "claimtrail.duration_us": 420,
        "claimtrail.track": "dra",
        "claimtrail.template_version": "v3",
        "claimtrail.engine_version": "0.1.0",
        "claimtrail.message": record.message,
        "claimtrail.claims": [f"{NAMESPACE}/{POD}-gpu"],
        "claimtrail.claim_uids": record.claim_uids,
        "claimtrail.preference": ["h100", "a100"],
        "claimtrail.devices": ["gpu.nvidia.com/node-a7/gpu-3"],
        "claimtrail.blockers": ["insufficient_on_node@0"],
        "claimtrail.verdicts.exported": 3,
        "claimtrail.verdicts.dropped": 0,
        "claimtrail.backoff_ms": 0,
    }
    record_json = root.pop(s.RECORD)
    assert root == expected
    assert json.loads(record_json) == record.to_dict()


CANONICAL_CASES = {
    "usual decision": make_record(),
    "non-ASCII text": make_record(message="Knoten ausgefallen: GPU nicht verfügbar ✓"),
    # a float orjson writes otherwise than json ("0.00001" against "1e-05") and a null
    "blocker detail json writes itself": make_record(
        blockers=[TierBlocker("quota_exhausted", 0, {"share": 1e-05, "limit": None})]),
}


@pytest.mark.parametrize("record", CANONICAL_CASES.values(), ids=CANONICAL_CASES.keys())
def test_the_record_attribute_is_the_canonical_json_value_in_declared_field_order(
    monkeypatch: pytest.MonkeyPatch, record: DecisionRecord,
) -> None:
    text = attrs(export_over_http(monkeypatch, [record]).root())[s.RECORD]
    assert json.loads(text) == json.loads(canonical_text(record.to_dict()))
    assert list(json.loads(text)) == [f.name for f in dataclasses.fields(DecisionRecord)]


def test_tier_spans_count_devices_per_reason_code_and_carry_their_blockers(monkeypatch: pytest.MonkeyPatch) -> None:
    spans = export_over_http(monkeypatch, [make_record()]).tiers()
    tiers = {attrs(t)[s.TIER_INDEX]: attrs(t) for t in spans}
    assert tiers[0] == {
        "claimtrail.decision_id": make_record().decision_id,
        "claimtrail.tier_index": 0,
        "claimtrail.tier.request": "gpu/h100",
        "claimtrail.tier.model": "H100",
        "claimtrail.tier.considered": 8,
        "claimtrail.tier.nodes_evaluated": 2,
        "claimtrail.tier.verdicts.dropped": 0,
        "claimtrail.tier.result": "exhausted",
        "claimtrail.tier.reason.in_use": 6,
        "claimtrail.tier.reason.unhealthy": 2,
        "claimtrail.tier.blockers": ["insufficient_on_node"],
        "claimtrail.tier.blocker.insufficient_on_node.free": 0,
    }
    assert (tiers[1]["claimtrail.tier.reason.selected"], tiers[1]["claimtrail.tier.reason.not_reached"]) == (1, 3)
    assert tiers[1]["claimtrail.tier.result"] == "selected"


def test_a_tier_closed_by_several_quotas_keeps_each_blockers_parameters(monkeypatch: pytest.MonkeyPatch) -> None:
    quota = {"used": 4, "requested": 2, "nominal": 4, "limit": 4, "lendable": 0}
    record = make_record(blockers=[
        TierBlocker("quota_exhausted", 0, {"model": "A100", **quota, "over_quota": 8}),
        TierBlocker("quota_exhausted", 0, {"model": "H100", **quota, "used": 2, "over_quota": 4}),
    ])
    tier = next(attrs(t) for t in export_over_http(monkeypatch, [record]).tiers() if attrs(t)[s.TIER_INDEX] == 0)
    assert {k: v for k, v in tier.items() if k.startswith("claimtrail.tier.blocker")} == {
        "claimtrail.tier.blockers": ["quota_exhausted", "quota_exhausted"],
        **{f"claimtrail.tier.blocker.quota_exhausted.{k}": v for k, v in
           {"model": "A100", **quota, "over_quota": 8}.items()},
        **{f"claimtrail.tier.blocker.quota_exhausted.2.{k}": v for k, v in
           {"model": "H100", **quota, "used": 2, "over_quota": 4}.items()},
    }


def test_a_failed_preferred_tier_is_an_error_with_its_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    h100, a100 = export_over_http(monkeypatch, [make_record()]).tiers()
    assert (h100.status.code, h100.status.message) == (2, "H100 exhausted: in_use 6, unhealthy 2; blocked: insufficient_on_node")
    assert (a100.status.code, a100.status.message) == (0, "")


def test_every_attribute_key_is_k8s_semconv_or_under_the_one_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    wire = export_over_http(monkeypatch, [make_record()], labels={"app": "trainer"})
    keys = {k for item in [*wire.spans, *wire.logs] for k in attrs(item)}
    outside = {k for k in keys if not k.startswith(s.PREFIX)}
    assert outside == {"k8s.cluster.name", "k8s.namespace.name", "k8s.pod.name", "k8s.pod.uid", "k8s.node.name",
                       "k8s.pod.label.app"}


def test_verdict_log_records_link_to_their_tier_span(monkeypatch: pytest.MonkeyPatch) -> None:
    record = make_record()
    wire = export_over_http(monkeypatch, [record])
    tier_span = {attrs(t)[s.TIER_INDEX]: t.span_id for t in wire.tiers()}
    assert all(not sp.events for sp in wire.spans)  # logs by default: no span events
    got = sorted(
        (attrs(lr)[s.TIER_INDEX], attrs(lr)[s.VERDICT_DEVICE], attrs(lr)[s.VERDICT_REASON], lr.span_id == tier_span[attrs(lr)[s.TIER_INDEX]])
        for lr in wire.logs
    )
    assert got == [
        (0, "gpu.nvidia.com/node-h1/gpu-0", "in_use", True),
        (0, "gpu.nvidia.com/node-h1/gpu-1", "unhealthy", True),
        (1, "gpu.nvidia.com/node-a7/gpu-3", "selected", True),
    ]
    assert {lr.trace_id for lr in wire.logs} == {_id(trace_id_for(record.decision_id), 16)}
    assert {lr.event_name for lr in wire.logs} == {s.VERDICT_EVENT}
    unhealthy = next(lr for lr in wire.logs if attrs(lr)[s.VERDICT_REASON] == "unhealthy")
    assert attrs(unhealthy)["claimtrail.detail.taint"] == "gpu.nvidia.com/unhealthy"
    assert unhealthy.body.string_value == "tier 0: gpu.nvidia.com/node-h1/gpu-1 on node-h1: unhealthy"


def test_an_error_outcome_marks_the_root_span_as_error(monkeypatch: pytest.MonkeyPatch) -> None:
    record = make_record(outcome=Outcome.ERROR.value, message="cel_runtime: no such key", devices=[], node="")
    root = export_over_http(monkeypatch, [record]).root()
    assert (root.status.code, root.status.message) == (2, "cel_runtime: no such key")  # STATUS_CODE_ERROR


def test_exporting_a_decision_twice_gives_byte_identical_spans_and_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    first = export_over_http(monkeypatch, [make_record()])
    second = export_over_http(monkeypatch, [make_record()])
    assert sorted(sp.SerializeToString() for sp in first.spans) == sorted(sp.SerializeToString() for sp in second.spans)
    assert sorted(lr.SerializeToString() for lr in first.logs) == sorted(lr.SerializeToString() for lr in second.logs)


def test_tiers_of_several_requests_get_distinct_spans_and_their_own_verdicts(monkeypatch: pytest.MonkeyPatch) -> None:
    from audit.records import Exemplar, TierSummary

    def tier(index: int, request: str, device: str) -> TierSummary:
        return TierSummary(index, request, "H100" if index == 0 else "A100", 2, {"in_use": 2},
                           [Exemplar(device, "node-a7", "in_use")])

    tiers = [tier(0, "train/gpu/h100", "d/p/t0"), tier(1, "train/gpu/a100", "d/p/t1"),
             tier(0, "eval/gpu/h100", "d/p/e0"), tier(1, "eval/gpu/a100", "d/p/e1")]
    record = make_record(tiers=tiers)
    wire = export_over_http(monkeypatch, [record])
    span_of_request = {attrs(t)[s.TIER_REQUEST]: t.span_id for t in wire.tiers()}
    assert len(set(span_of_request.values())) == 4
    assert span_of_request["eval/gpu/h100"] == _id(tier_span_id_for(record.decision_id, 2), 8)
    linked = {attrs(lr)[s.VERDICT_DEVICE]: lr.span_id for lr in wire.logs}
    assert linked == {
        "d/p/t0": span_of_request["train/gpu/h100"],
        "d/p/t1": span_of_request["train/gpu/a100"],
        "d/p/e0": span_of_request["eval/gpu/h100"],
        "d/p/e1": span_of_request["eval/gpu/a100"],
    }
