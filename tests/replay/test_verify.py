"""Replay reproduces recorded decisions, and reports corrupted history, engines and records."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from audit.records import DecisionRecord
from audit.replay import Cause, MemorySource, Verifier
from audit.replay.verify import bind_seq
from audit.scheduler import engine
from audit.timestamps import parse_time_ms
from tests.replay.runs import CHECKPOINT_EVERY, busy, busy_source


def _replay(records, source=None):
    return list(Verifier(source or busy_source()).run(records))


def _copy(record: DecisionRecord) -> DecisionRecord:
    return DecisionRecord.from_dict(copy.deepcopy(record.to_dict()))


def test_ten_thousand_simulated_decisions_replay_to_the_same_digests():
    records = busy().records
    assert len(records) >= 10_000
    # the history covers every path replay must follow: allocations, waits, bind-time failures
    assert {"allocated", "unschedulable", "error"} <= {r.outcome for r in records}
    assert {"binding_conflict", "stale_slice", "unhealthy", "node_lost"} <= {r.retry_class for r in records}
    results = _replay(records, MemorySource(busy().events))
    assert len(results) == len(records)
    mismatched = [(r.decision_id, r.cause, r.diff[:3]) for r in results if not r.match]
    assert mismatched == []


def _first_allocated_after(seq: int) -> DecisionRecord:
    return next(r for r in sorted(busy().records, key=lambda r: (r.seq, r.decision_id))
                if r.seq >= seq and r.outcome == "allocated")


def test_a_corrupted_event_is_an_input_mismatch_from_its_seq_on():
    events = list(busy().events)
    target = _first_allocated_after(3 * CHECKPOINT_EVERY + 100)
    # a taint rule that existed at the decision's seq now has another value
    idx = max(i for i, e in enumerate(events) if e.seq <= target.seq and e.object_kind == "DeviceTaintRule")
    bad = events[idx]
    events[idx] = dataclasses.replace(bad, payload={**bad.payload, "metadata": {"name": bad.name, "labels": {"x": "y"}}})
    # a bind-time failure re-checks at its bind_seq: it saw the event if that is at or after it
    before = [r for r in busy().records if bad.seq - 300 <= r.seq and max(r.seq, bind_seq(r) or 0) < bad.seq]
    after = [r for r in busy().records if bad.seq <= r.seq <= target.seq]
    results = {r.decision_id: r for r in _replay(before + after, busy_source(events=events))}
    assert before and all(results[r.decision_id].match for r in before)
    assert {results[r.decision_id].cause for r in after} == {Cause.INPUT_MISMATCH.value}
    diff = results[target.decision_id].diff
    assert diff[0].startswith(f"input_digest: recorded {target.input_digest}, replayed ")
    last_match = max(max(r.seq, bind_seq(r) or 0) for r in before)
    assert diff[1:] == [f"world: the events up to seq {target.seq} are not the history this decision saw "
                        "(an event was changed, added or removed)",
                        f"the last decision before it that matched is at seq {last_match}: "
                        f"the change is in events {last_match + 1}..{target.seq}"]
    assert last_match < bad.seq <= target.seq


def test_a_missing_event_is_reported_with_its_seq():
    target = _first_allocated_after(2 * CHECKPOINT_EVERY + 50)
    gap = target.seq - 5
    events = [e for e in busy().events if e.seq != gap]
    [result] = _replay([target], busy_source(events=events))
    assert (result.match, result.cause) == (False, Cause.MISSING_EVENTS.value)
    assert result.diff == [f"world {target.cluster}: event seq {gap} missing on the way to seq {target.seq} "
                           f"(next event found is seq {gap + 1})"]


def test_a_corrupt_checkpoint_is_refused_not_used():
    target = _first_allocated_after(CHECKPOINT_EVERY + 50)
    source = busy_source()
    cp_seq, body = source.nearest_checkpoint(target.cluster, target.seq)
    tampered = copy.deepcopy(body)
    tampered["usage"] = {t: [u[0] + 1, u[1], u[2]] for t, u in tampered["usage"].items()}
    source.write_checkpoint(target.cluster, cp_seq, tampered)
    [result] = _replay([target], source)
    assert (result.match, result.cause) == (False, Cause.CHECKPOINT_CORRUPT.value)
    assert result.diff[0].startswith(f"checkpoint {target.cluster}@{cp_seq}: content_digest: recorded "
                                     f"{body['content_digest']}, content hashes to ")


def _tie_break_by_name_descending(monkeypatch: pytest.MonkeyPatch) -> None:
    """Test-only hook: nodes of equal score visited by name descending instead of ascending."""
    original = engine.candidate_order

    def reversed_names(world, rts, allowed):
        return iter(sorted(original(world, rts, allowed), key=lambda x: (x[0], x[1]), reverse=True))

    monkeypatch.setattr(engine, "candidate_order", reversed_names)


def test_a_changed_node_tie_break_is_an_output_mismatch_naming_node_and_devices(monkeypatch):
    records = [r for r in busy().records if r.seq < 1500]
    assert all(r.match for r in _replay(records))
    _tie_break_by_name_descending(monkeypatch)
    results = _replay(records)
    moved = [(rec, res) for rec, res in zip(sorted(records, key=lambda r: (r.seq, r.decision_id)), results, strict=True)
             if not res.match and rec.outcome == "allocated"]
    assert moved, "the reversed tie-break must move at least one decision"
    rec, res = moved[0]
    assert res.cause == Cause.OUTPUT_MISMATCH.value
    assert res.replayed is not None and res.replayed.node > rec.node
    assert f"node: recorded {rec.node}, replayed {res.replayed.node}" in res.diff
    assert f"devices[0].device: recorded {rec.devices[0].device}, replayed {res.replayed.devices[0].device}" in res.diff


def _allocated_with_in_use() -> DecisionRecord:
    return next(r for r in busy().records
                if r.outcome == "allocated" and r.tiers and r.tiers[0].reasons.get("in_use", 0) > 0)


@pytest.mark.parametrize("reseal", [False, True], ids=["edited-only", "edited-and-resealed"])
def test_an_edited_record_is_an_output_mismatch_naming_the_field(reseal):
    original = _allocated_with_in_use()
    edited = _copy(original)
    in_use = edited.tiers[0].reasons["in_use"]
    edited.tiers[0].reasons["in_use"] = in_use + 1
    if reseal:
        edited.seal()
    [result] = _replay([edited])
    assert result.cause == Cause.OUTPUT_MISMATCH.value
    field_line = f"tiers[0].reasons.in_use: recorded {in_use + 1}, replayed {in_use}"
    sealed_line = ("output_digest: the stored record no longer hashes to its own output_digest "
                   "(edited after it was sealed)")
    assert result.diff == ([field_line] if reseal else [sealed_line, field_line])


@pytest.mark.parametrize(("edit", "expected"), [
    (False, []),
    (True, ["tiers[0].reasons.in_use: recorded {edited}, replayed {kept}"]),
], ids=["same-decision", "another-decision"])
def test_a_record_of_another_engine_version_is_engine_changed_with_the_version_in_the_diff(edit, expected):
    original = _allocated_with_in_use()
    older = _copy(original)
    older.engine_version = "claimtrail-engine/1"
    kept = older.tiers[0].reasons["in_use"]
    if edit:
        older.tiers[0].reasons["in_use"] = kept + 1
    older.seal()
    [result] = _replay([older])
    assert (result.match, result.cause) == (False, Cause.ENGINE_CHANGED.value)
    version_line = f"engine_version: recorded claimtrail-engine/1, replayed {engine.ENGINE_VERSION}"
    lines = [line.format(edited=kept + 1, kept=kept) for line in expected]
    assert sorted(result.diff) == sorted([version_line, *lines])


def test_an_edited_device_is_named_by_index():
    original = _allocated_with_in_use()
    edited = _copy(original)
    edited.devices[0].device = "gpu.nvidia.com/elsewhere/gpu-9"
    [result] = _replay([edited])
    assert result.diff[1:] == [f"devices[0].device: recorded gpu.nvidia.com/elsewhere/gpu-9, "
                               f"replayed {original.devices[0].device}"]


def test_a_decision_before_a_policy_change_replays_under_the_old_policy():
    records = busy().records
    change = min(r.seq for r in records if r.policy_version == "2")
    # team-b allocated H100s under v1 while already holding more than v2's quota of 4 allows
    old = [r for r in records if r.seq < change and r.tenant == "team-b" and r.outcome == "allocated"
           and r.allocated_model == "H100"]
    source = busy_source()
    cursor = Verifier(source).cursor(records[0].cluster)
    chosen = None
    for r in reversed(old):
        world = cursor.at(r.seq)
        if world.model_in_use("team-b", "H100") + len(r.devices) > 4:
            chosen = r
            break
    assert chosen is not None
    [result] = _replay([chosen], source)
    assert result.match and result.replayed is not None
    assert result.replayed.policy_version == "1"
    # the same attempt under the new policy would have been another decision
    v2 = next(r for r in records if r.policy_version == "2")
    world = Verifier(source).cursor(chosen.cluster).at(v2.seq)
    new_policy = world.policy
    world = Verifier(source).cursor(chosen.cluster).at(chosen.seq)
    under_v2 = engine.decide(world, f"{chosen.namespace}/{chosen.pod}", chosen.attempt, parse_time_ms(chosen.time),
                             new_policy)
    assert under_v2.record.output_digest != chosen.output_digest


def test_one_replay_folds_at_most_one_checkpoint_interval():
    records = sorted(busy().records, key=lambda r: r.seq)
    picks = [records[len(records) // 3], records[len(records) // 2], records[-1]]
    for r in picks:
        verifier = Verifier(busy_source())
        [result] = list(verifier.run([r]))
        assert result.match
        cursor = verifier.cursor(r.cluster)
        assert cursor.loads == 1
        assert cursor.folds <= CHECKPOINT_EVERY
