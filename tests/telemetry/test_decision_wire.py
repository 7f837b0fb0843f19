"""Writing a usual decision straight from its record gives the bytes its trace shape gives, and
every decision the one-pass writer does not cover goes the general way untouched."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.records import DecisionRecord, Exemplar, Outcome, TierBlocker
from audit.telemetry import Redaction, TelemetrySettings, decision_wire, otlpwire
from audit.telemetry.shape import AttemptLinks, decision_shape
from tests.otlp.test_round_trip_property import records
from tests.telemetry.records_factory import TENANT, make_record
from tests.telemetry.test_direct_spans import _evidence

LOGS = TelemetrySettings(verdicts="logs").shape_options()


def _usual(attempt: int = 0, **overrides: object) -> DecisionRecord:
    """The factory's fallback decision without blockers: what an engine exports most."""
    return make_record(attempt, **{"blockers": [], **overrides})


def _general(records: list[DecisionRecord], options: object = LOGS) -> list[tuple[list[bytes], list[bytes]]]:
    links = AttemptLinks()
    return [otlpwire.decision(decision_shape(r, (), None, options, links)) for r in records]  # type: ignore[arg-type]


def _one_pass(records: list[DecisionRecord], options: object = LOGS) -> list[tuple[list[bytes], list[bytes]] | None]:
    """Each decision written twice, the second time from the groups of values the first one cached."""
    links = AttemptLinks()
    first = [decision_wire.encode(r, options, links) for r in records]  # type: ignore[arg-type]
    links = AttemptLinks()
    second = [decision_wire.encode(r, options, links) for r in records]  # type: ignore[arg-type]
    assert second == first
    return first


def _unschedulable(attempt: int, **overrides: object) -> DecisionRecord:
    return _usual(attempt, **{"outcome": Outcome.UNSCHEDULABLE.value, "devices": [], "node": "", "tier_index": -1,
                              "allocated_model": "", "fallback": False, "retry_class": "unschedulable", **overrides})


WRITTEN_IN_ONE_PASS = {
    "fallback-decision": [_usual()],
    "retries-link-to-the-attempt-before": [_unschedulable(0), _unschedulable(1), _usual(2)],
    "error-with-message": [_usual(outcome=Outcome.ERROR.value, message="cel_runtime: no such key", devices=[], node="")],
    "error-without-message": [_usual(outcome=Outcome.ERROR.value, message="", devices=[], node="")],
    "no-wait-no-duration": [_usual(wait_ms=0, duration_us=0)],
    "a-tier-not-tried": [_usual(tier_index=0, allocated_model="H100", fallback=False)],
    "no-tiers": [_usual(tiers=[], duration_us=0)],
    "long-texts-and-lists": [_usual(message="no device: " + "in_use " * 3000, claims=["c" * 5000, "trainer-gpu"],
                                    claim_uids=["u" * 200], seq=2**40, steps=70_000)],
    "counts-of-one-two-and-three-byte-varints": [_usual(tiers=[dataclasses.replace(
        _usual().tiers[0], considered=20_000, reasons={"in_use": 200, "not_reached": 70_000, "unhealthy": 5})])],
    "reason-counts-kept-by-count-not-confused-across-classes": [
        _usual(i, tiers=[dataclasses.replace(_usual().tiers[0], reasons=reasons)]) for i, reasons in enumerate((
            {"in_use": 1, "unhealthy": -3}, {"in_use": True, "unhealthy": 2**40}, {"in_use": 1, "unhealthy": -3}))],
    "a-long-decision-id": [_usual(decision_id="d" * 300)],
    "integers-past-int64-as-their-text": [
        _usual(0, seq=2**64 - 1, wait_ms=2**63, duration_us=2**63),
        _usual(1, seq=2**63 - 1, wait_ms=2**53 + 1, steps=2**64 - 1),
        _usual(2, tiers=[dataclasses.replace(_usual().tiers[0], considered=2**64, reasons={"in_use": 2**63})])],
    "pods-of-several-devices-the-same-and-others": [
        _usual(i, devices=[dataclasses.replace(_usual().devices[0], device=f"gpu.nvidia.com/h100-001/gpu-{n}")
                           for n in range(count)]) for i, count in enumerate((8, 8, 2, 0, 8))],
    "a-blocked-tier-with-a-parameter": [make_record()],
    "blockers-on-an-unschedulable-pods-tiers": [_unschedulable(0, blockers=[
        TierBlocker("insufficient_on_node", 0, {"free": 0, "wanted": 2}), TierBlocker("topology", 0),
        TierBlocker("selector_mismatch", 1, {"node": "node-a7", "exact": True})])],
    "a-blocker-parameter-that-is-not-a-scalar": [make_record(blockers=[
        TierBlocker("insufficient_on_node", 0, {"nodes": ["node-h1", "node-h2"], "by": {"free": 0}})])],
    "a-blocker-of-a-tier-the-record-does-not-have": [make_record(blockers=[TierBlocker("quota", 7)])],
    "tier-values-of-other-classes": [_usual(tiers=[dataclasses.replace(tier, considered=bool(tier.considered), index=float(tier.index))
                                               for tier in _usual().tiers])],
    "a-blocker-code-twice-on-one-tier": [make_record(blockers=[
        TierBlocker("insufficient_on_node", 0, {"free": 0}), TierBlocker("insufficient_on_node", 0, {"free": 1})])],
}


@pytest.mark.parametrize("records", list(WRITTEN_IN_ONE_PASS.values()), ids=list(WRITTEN_IN_ONE_PASS))
def test_usual_decisions_are_written_in_one_pass_with_the_shapes_bytes(records: list[DecisionRecord]) -> None:
    written = _one_pass(records)
    assert None not in written
    assert written == _general(records)


class _Shown(str):
    """A str that shows itself otherwise, as the member of a str-valued enum does."""

    def __str__(self) -> str:
        return f"shown:{str.__str__(self)}"


# each after the same decision with the declared classes, whose root attributes are kept by value
ROOT_VALUES_OF_OTHER_CLASSES = {
    "an-int-field-holding-a-bool": [_usual(1), _usual(True)],
    "a-bool-field-holding-an-int": [_usual(), _usual(fallback=1)],
    "a-str-field-holding-a-str-subclass": [_usual(), _usual(tenant=_Shown(TENANT))],
}


@pytest.mark.parametrize("records", list(ROOT_VALUES_OF_OTHER_CLASSES.values()), ids=list(ROOT_VALUES_OF_OTHER_CLASSES))
def test_root_values_equal_to_kept_ones_but_of_other_classes_are_written_as_their_shape_writes_them(
    records: list[DecisionRecord],
) -> None:
    assert _one_pass(records) == _general(records)


OPTIONS = {
    "verdict-logs": LOGS,
    "verdicts-bounded-but-within": TelemetrySettings(verdicts="logs", max_verdicts=3).shape_options(),
    "why-url-and-salt": TelemetrySettings(verdicts="logs", api_url="http://claimtrail:8000/",
                                          id_salt="run-2").shape_options(),
    "no-verdict-logs": TelemetrySettings(verdicts="events", traces=False).shape_options(),
}


@pytest.mark.parametrize("options", list(OPTIONS.values()), ids=list(OPTIONS))
def test_options_the_one_pass_covers_give_the_shapes_bytes(options: object) -> None:
    records = [_usual(i) for i in range(3)]
    written = _one_pass(records, options)
    assert None not in written
    assert written == _general(records, options)


GENERAL_WAY = {
    "redaction": (_usual(), TelemetrySettings(verdicts="logs", redaction=Redaction(hash_pod_names=True)).shape_options()),
    "verdicts-as-events": (_usual(), TelemetrySettings(verdicts="both").shape_options()),
    "more-exemplars-than-the-bound": (_usual(), TelemetrySettings(verdicts="logs", max_verdicts=2).shape_options()),
    "negative-wait": (_usual(wait_ms=-1), LOGS),
}


@pytest.mark.parametrize("record, options", list(GENERAL_WAY.values()), ids=list(GENERAL_WAY))
def test_decisions_outside_the_one_pass_go_the_general_way_with_links_untouched(
    record: DecisionRecord, options: object
) -> None:
    links = AttemptLinks()
    assert decision_wire.encode(record, options, links) is None  # type: ignore[arg-type]
    assert links._pods == {}


def test_engine_verdicts_and_labels_go_the_general_way_and_return_the_record_sent() -> None:
    options = TelemetrySettings(verdicts="logs", redaction=Redaction(hash_pod_names=True)).shape_options()
    record = make_record()
    spans, logs, sent = decision_wire.fields(record, _evidence(), {"app": "x"}, options, AttemptLinks())
    shape = decision_shape(record, _evidence(), {"app": "x"}, options, AttemptLinks())
    assert (spans, logs) == otlpwire.decision(shape)
    assert sent.pod != record.pod and sent.to_dict() == shape.record.to_dict()


def test_the_record_sent_is_the_record_itself_in_one_pass() -> None:
    record = _usual()
    assert decision_wire.fields(record, (), None, LOGS, AttemptLinks())[2] is record


@settings(max_examples=60, deadline=None)
@given(
    first=records(),
    retry_outcome=st.sampled_from([o.value for o in Outcome]),
    salt=st.sampled_from(["", "s"]),
    api_url=st.sampled_from(["", "http://a:1"]),
    max_verdicts=st.integers(0, 10),
)
def test_any_decision_is_written_as_its_shape_would_write_it(
    first: DecisionRecord, retry_outcome: str, salt: str, api_url: str, max_verdicts: int
) -> None:
    # a retry of the same pod: the second decision links to the first
    retry = dataclasses.replace(first, attempt=first.attempt + 1, outcome=retry_outcome).seal()
    options = TelemetrySettings(verdicts="logs", id_salt=salt, api_url=api_url, max_verdicts=max_verdicts).shape_options()
    records = [first, retry]
    written = _one_pass(records, options)
    fits = sum(len(t.exemplars) for t in first.tiers) <= max_verdicts and first.wait_ms >= 0
    assert (None not in written) == fits
    if fits:
        assert written == _general(records, options)


DETAILS = {
    "two-texts-written-sorted": {"b": "2", "a": "1"},
    "one-text-kept-whole": {"by": "allocated"},
    "one-number": {"free": 0},
    "none": {},
}


@pytest.mark.parametrize("detail", list(DETAILS.values()), ids=list(DETAILS))
def test_verdict_details_are_written_like_the_shape_writes_them(detail: dict[str, object]) -> None:
    tiers = _usual().tiers
    tiers[0].exemplars.append(Exemplar("gpu.nvidia.com/node-h1/gpu-2", "", "in_use", detail))  # type: ignore[arg-type]
    records = [_usual(tiers=tiers), _usual(1, tiers=tiers)]
    assert _one_pass(records) == _general(records)
