"""What a trace points to: the attempt before it, the API's why answer, and ids a salt renews."""

from __future__ import annotations

import pytest

from audit.records import Outcome, TierSummary
from audit.telemetry import schema as s
from audit.telemetry.attributes import tier_results
from audit.telemetry.ids import root_span_id_for, trace_id_for
from audit.telemetry.shape import AttemptLinks
from tests.telemetry.capture import attrs, export_over_http
from tests.telemetry.records_factory import make_record

UNSCHEDULABLE = dict(outcome=Outcome.UNSCHEDULABLE.value, devices=[], node="", tier_index=-1, allocated_model="",
                     fallback=False, retry_class="unschedulable")


def _links(wire: object) -> dict[int, list[tuple[bytes, bytes, dict]]]:  # type: ignore[type-arg]
    roots = [sp for sp in wire.spans if sp.name == s.ROOT_SPAN]  # type: ignore[attr-defined]
    return {attrs(r)[s.ATTEMPT]: [(ln.trace_id, ln.span_id, attrs(ln)) for ln in r.links] for r in roots}


def _ids(decision_id: str, salt: str = "") -> tuple[bytes, bytes]:
    return trace_id_for(decision_id, salt).to_bytes(16, "big"), root_span_id_for(decision_id, salt).to_bytes(8, "big")


def test_each_retry_links_to_the_attempt_before_it(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts = [make_record(0, **UNSCHEDULABLE), make_record(1, **UNSCHEDULABLE), make_record(2)]
    links = _links(export_over_http(monkeypatch, attempts))
    previous = {"claimtrail.link.kind": "previous_attempt"}
    assert links == {
        0: [],
        1: [(*_ids(attempts[0].decision_id), {**previous, "claimtrail.link.attempt": 0})],
        2: [(*_ids(attempts[1].decision_id), {**previous, "claimtrail.link.attempt": 1})],
    }


@pytest.mark.parametrize(("order", "expected"), [
    ([0, 1, 2, 3], {0: None, 1: 0, 2: 1, 3: 2}),
    ([0, 2, 1, 3], {0: None, 2: 0, 1: 0, 3: 2}),
    ([3, 1, 2, 0], {3: None, 1: None, 2: 1, 0: None}),
    ([0, 1, 1, 2], {0: None, 1: 0, 2: 1}),  # the second export of attempt 1 links the same way
], ids=["in-order", "one-late", "reversed-start", "exported-twice"])
def test_a_retry_links_to_the_highest_earlier_attempt_whatever_the_export_order(
        order: list[int], expected: dict[int, int | None]) -> None:
    links = AttemptLinks()
    found = {}
    for attempt in order:
        record = make_record(attempt, **UNSCHEDULABLE)
        previous = links.previous(record, trace_id_for(record.decision_id), root_span_id_for(record.decision_id))
        found[attempt] = previous.attempt if previous else None
        if previous:
            earlier = make_record(previous.attempt, **UNSCHEDULABLE).decision_id
            assert (previous.trace_id, previous.span_id) == (trace_id_for(earlier), root_span_id_for(earlier))
    assert found == expected


def test_other_pods_and_a_pods_next_life_are_not_linked(monkeypatch: pytest.MonkeyPatch) -> None:
    other_pod = make_record(1, pod_uid="0a1b2c3d-0000-4000-8000-0000000000bb", **UNSCHEDULABLE)
    records = [make_record(0), other_pod, make_record(1, **UNSCHEDULABLE)]  # allocated at 0: its attempts ended
    assert _links(export_over_http(monkeypatch, records)) == {0: [], 1: []}


def test_why_url_points_at_the_api_answer_for_the_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    record = make_record()
    root = attrs(export_over_http(monkeypatch, [record], env={"CLAIMTRAIL_API": "https://claimtrail.example:8443/"}).root())
    assert root[s.WHY_URL] == f"https://claimtrail.example:8443/v1/decisions/{record.decision_id}/why?model=H100"


def test_without_an_api_there_is_no_why_url(monkeypatch: pytest.MonkeyPatch) -> None:
    assert s.WHY_URL not in attrs(export_over_http(monkeypatch, [make_record()]).root())


def test_an_id_salt_gives_every_span_new_ids_and_keeps_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    record = make_record()
    plain = export_over_http(monkeypatch, [record])
    salted = export_over_http(monkeypatch, [record], env={"CLAIMTRAIL_OTEL_ID_SALT": "second-run"})
    assert (plain.root().trace_id, plain.root().span_id) == _ids(record.decision_id)
    assert (salted.root().trace_id, salted.root().span_id) == _ids(record.decision_id, "second-run")
    assert not {sp.span_id for sp in plain.spans} & {sp.span_id for sp in salted.spans}
    assert {lr.trace_id for lr in salted.logs} == {salted.root().trace_id}
    assert [attrs(sp) for sp in plain.spans] == [attrs(sp) for sp in salted.spans]


def _tier(index: int, considered: int = 4, reasons: dict[str, int] | None = None) -> TierSummary:
    return TierSummary(index, f"gpu/t{index}", f"M{index}", considered, reasons if reasons is not None else {"in_use": considered})


@pytest.mark.parametrize(
    ("tier_index", "tiers", "blocked", "expected"),
    [
        (1, [_tier(0), _tier(1), _tier(2)], [], ["exhausted", "selected", "not_tried"]),
        (0, [_tier(0), _tier(1)], [], ["selected", "not_tried"]),
        (-1, [_tier(0), _tier(1)], [], ["exhausted", "exhausted"]),
        (-1, [_tier(0), _tier(1, 0, {})], [], ["exhausted", "not_tried"]),
        (-1, [_tier(0, 0, {})], [0], ["exhausted"]),
    ],
    ids=["fallback", "first-choice", "nothing-fits", "search-stopped-before-a-tier", "blocked-by-quota"],
)
def test_tier_results(tier_index: int, tiers: list[TierSummary], blocked: list[int], expected: list[str]) -> None:
    from audit.records import TierBlocker

    record = make_record(tier_index=tier_index, tiers=tiers, blockers=[TierBlocker("quota_exhausted", t) for t in blocked])
    assert tier_results(record) == expected
