"""Batched replay (``audit.replay.batch``): the same verdicts as one verifier over the whole history,
whatever the step and segment sizes; segments cover every record once; a gap is never hidden."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.replay import MemorySource, Verifier
from audit.replay.batch import history_order, materialize, replay_in_steps, segments
from audit.replay.verify import bind_seq
from tests.replay.runs import busy

HOURS = 2.0


def _verdicts(results):
    return [(r.decision_id, r.match, r.cause, tuple(r.diff)) for r in results]


@pytest.fixture(scope="module")
def whole():
    """Verdicts of one verifier over the full in-memory history: what an offline replay prints."""
    result = busy(HOURS)
    source = MemorySource(result.events)
    source.add_checkpoints(1000)
    return sorted(_verdicts(Verifier(source).run(result.records)))


@pytest.mark.parametrize(("step", "span"), [(1, 50_000), (7, 50_000), (500, 50_000), (10_000, 50_000),
                                            (100, 800), (1000, 1500)],
                         ids=["step-1", "step-7", "step-500", "one-step", "short-segments", "medium-segments"])
def test_verdicts_match_one_verifier_over_the_whole_history(whole, step, span):
    result = busy(HOURS)
    steps = list(replay_in_steps(MemorySource(result.events), result.records, step, span, every=1000))
    assert all(0 < len(s) <= step for s in steps)
    flat = [r for s in steps for r in s]
    assert sorted(_verdicts(flat)) == whole
    assert all(r.match for r in flat) and len(flat) == len(result.records)
    assert all(r.replayed is None for r in flat)  # verdicts only: the regenerated records are dropped


@settings(max_examples=40, deadline=None)
@given(picked=st.sets(st.floats(0, 1, exclude_max=True), max_size=300), span=st.integers(1, 5000))
def test_segments_cover_each_record_once_in_history_order(picked, span):
    everything = busy(HOURS).records  # positions as fractions: the run's length is the engine's business
    records = [everything[i] for i in sorted({int(f * len(everything)) for f in picked})]
    parts = segments(records, span)
    assert [r for part in parts for r in part] == history_order(records)
    for part in parts:
        assert len({r.cluster for r in part}) == 1
        if len(part) > 1:
            assert max(max(r.seq, bind_seq(r) or 0) for r in part) - part[0].seq <= span


def test_a_missing_event_is_reported_for_every_decision_after_it():
    result = busy(HOURS)
    gap = 1500
    events = [e for e in result.events if e.seq != gap]
    # no in-memory checkpoint past the gap: one would describe a world that never existed
    source = materialize(MemorySource(events), result.records, every=500)
    assert source.checkpoint_seqs(result.world.cluster) == [499, 999, 1499]
    flat = [r for s in replay_in_steps(MemorySource(events), result.records, 200, every=500) for r in s]
    by_id = {r.decision_id: r for r in flat}
    after = [r for r in result.records if max(r.seq, bind_seq(r) or 0) >= gap]
    before = [r for r in result.records if max(r.seq, bind_seq(r) or 0) < gap]
    assert after and before
    assert {by_id[r.decision_id].cause for r in after} == {"missing_events"}
    assert all(by_id[r.decision_id].match for r in before)


def test_a_step_below_one_is_refused():
    with pytest.raises(ValueError, match="step: 0 must be >= 1"):
        list(replay_in_steps(MemorySource(), [], 0))
