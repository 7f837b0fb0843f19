"""Verdict log records are bounded per decision, and what was left out is counted."""

from __future__ import annotations

import pytest

from audit.allocator.outcome import DeviceVerdict, TierEvidence
from audit.telemetry import schema as s
from tests.telemetry.capture import attrs, export_over_http
from tests.telemetry.records_factory import make_record


def _engine_verdicts() -> list[TierEvidence]:
    # ten verdicts for the H100 tier; the first two repeat the record's exemplars
    devices = [f"gpu.nvidia.com/node-h1/gpu-{i}" for i in range(10)]
    return [
        TierEvidence(
            claim="team-vision/trainer-7f9c4-gpu",
            request="gpu/h100",
            subrequest_index=0,
            verdicts=[DeviceVerdict(d, "in_use", (("claim", "team-x/other"),)) for d in devices],
        )
    ]


@pytest.mark.parametrize(
    ("limit", "logs", "dropped", "dropped_tier0", "dropped_tier1"),
    [
        (64, 11, 0, 0, 0),
        (4, 4, 7, 7, 0),
        (2, 2, 9, 8, 1),
        (0, 0, 11, 10, 1),
    ],
    ids=["under-the-bound-keeps-all", "bound-keeps-exemplars-first", "bound-cuts-into-exemplars", "zero-sends-none"],
)
def test_verdicts_per_decision_are_bounded_and_the_rest_counted(
    monkeypatch: pytest.MonkeyPatch, limit: int, logs: int, dropped: int, dropped_tier0: int, dropped_tier1: int
) -> None:
    wire = export_over_http(
        monkeypatch, [make_record()], verdicts=_engine_verdicts(), env={"CLAIMTRAIL_OTEL_MAX_VERDICTS": str(limit)}
    )
    assert len(wire.logs) == logs
    root = attrs(wire.root())
    assert (root[s.VERDICTS_EXPORTED], root[s.VERDICTS_DROPPED]) == (logs, dropped)
    tiers = {attrs(t)[s.TIER_INDEX]: attrs(t)[s.TIER_VERDICTS_DROPPED] for t in wire.tiers()}
    assert tiers == {0: dropped_tier0, 1: dropped_tier1}


def test_engine_verdicts_do_not_repeat_exemplars(monkeypatch: pytest.MonkeyPatch) -> None:
    wire = export_over_http(monkeypatch, [make_record()], verdicts=_engine_verdicts())
    sources = sorted((attrs(lr)[s.VERDICT_DEVICE], attrs(lr)[s.VERDICT_SOURCE]) for lr in wire.logs if attrs(lr)[s.TIER_INDEX] == 0)
    assert sources[:3] == [
        ("gpu.nvidia.com/node-h1/gpu-0", "exemplar"),
        ("gpu.nvidia.com/node-h1/gpu-1", "exemplar"),
        ("gpu.nvidia.com/node-h1/gpu-2", "engine"),
    ]
    assert len(sources) == 10
    engine = next(lr for lr in wire.logs if attrs(lr)[s.VERDICT_SOURCE] == "engine")
    assert attrs(engine)[s.VERDICT_NODE] == "node-a7"  # engine verdicts were evaluated on the decision's node


def test_verdicts_of_a_tier_without_span_link_to_the_root_span(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = [TierEvidence("team-vision/trainer-7f9c4-gpu", "gpu/l4", 5, [DeviceVerdict("gpu.nvidia.com/node-a7/l4-0", "node_mismatch")])]
    wire = export_over_http(monkeypatch, [make_record()], verdicts=extra)
    (orphan,) = [lr for lr in wire.logs if attrs(lr)[s.TIER_INDEX] == 5]
    assert orphan.span_id == wire.root().span_id


@pytest.mark.parametrize(
    ("claim", "request_name", "subrequest", "expected"),
    [
        ("team-vision/trainer-7f9c4-gpu", "gpu/a100", 1, 1),
        ("team-vision/eval", "gpu/h100", 0, 0),
        ("team-vision/x", "gpu/l4", 1, 1),
        ("team-vision/x", "gpu/l4", 7, None),
    ],
    ids=["by-request-name", "name-wins-over-claim", "by-unique-index", "no-tier"],
)
def test_engine_evidence_joins_its_tier(claim: str, request_name: str, subrequest: int, expected: int | None) -> None:
    from audit.telemetry.attributes import tier_position

    assert tier_position(make_record(), TierEvidence(claim, request_name, subrequest)) == expected


def test_engine_evidence_joins_a_multi_claim_tier_by_claim_prefixed_name() -> None:
    from audit.records import TierSummary
    from audit.telemetry.attributes import tier_position

    record = make_record(tiers=[TierSummary(0, "train/gpu/h100", "H100", 1), TierSummary(0, "eval/gpu/h100", "H100", 1)])
    assert tier_position(record, TierEvidence("ns/eval", "gpu/h100", 0)) == 1
    assert tier_position(record, TierEvidence("ns/other", "gpu/x", 0)) is None  # index 0 is ambiguous
