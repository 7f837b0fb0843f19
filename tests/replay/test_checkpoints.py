"""Checkpoints: written at fixed positions by a producer hook, verified on load, equal to the fold."""

from __future__ import annotations

import copy
import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.replay import (
    CheckpointCorrupt,
    CheckpointWriter,
    MemorySource,
    Verifier,
    checkpoint_body,
    load_checkpoint,
)
from audit.world import World
from ingest.simulate.loop import Simulator
from ingest.simulate.scenario import load_scenario_text
from tests.replay.runs import SCENARIO, busy

HOURS = 2.0


def test_the_simulator_hook_checkpoints_every_n_events_and_each_loads_to_the_folded_world():
    with open(SCENARIO, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "busy-small.yaml")
    bodies: dict[int, dict] = {}
    writer = CheckpointWriter(lambda cluster, seq, body: bodies.__setitem__(seq, body), every=700)
    sim = Simulator(sc, seed=3, hours=0.5)
    sim.on_events = writer.follow(sim.world)
    result = sim.run()
    assert sorted(bodies) == list(range(699, result.world.seq + 1, 700))
    folded = World(result.world.cluster)
    for ev in result.events:
        folded.apply(ev)
        if ev.seq in bodies:
            loaded = load_checkpoint(folded.cluster, ev.seq, bodies[ev.seq])
            assert loaded.snapshot() == folded.snapshot()
            assert loaded.model_allocated == folded.model_allocated
            assert loaded.chain_digest == folded.chain_digest


@pytest.mark.parametrize(("edit", "message"), [
    (lambda b: b.__setitem__("seq", b["seq"] + 1), "body is for busy@"),
    (lambda b: b.pop("content_digest"), "content_digest missing"),
    (lambda b: b["objects"]["Node"].popitem(), "content_digest: recorded "),
    (lambda b: b["usage"].__setitem__("team-a", [99.0, 0.0, 0]), "content_digest: recorded "),
], ids=["other-seq", "no-digest", "object-removed", "usage-edited"])
def test_a_damaged_checkpoint_is_refused_with_the_reason(edit, message):
    world = World("busy")
    for ev in busy(HOURS).events[:1500]:
        world.apply(ev)
    body = copy.deepcopy(checkpoint_body(world))
    edit(body)
    if message.startswith("body is for"):
        body["content_digest"] = __import__("audit.records", fromlist=["digest"]).digest(
            {k: v for k, v in body.items() if k != "content_digest"})
    with pytest.raises(CheckpointCorrupt) as exc:
        load_checkpoint("busy", 1499, body)
    assert str(exc.value).startswith(f"checkpoint busy@1499: {message}")


def test_writer_refuses_an_interval_below_one():
    with pytest.raises(ValueError, match="every: 0 must be >= 1"):
        CheckpointWriter(lambda *a: None, every=0)


@settings(max_examples=12, deadline=None)
@given(split=st.integers(min_value=0, max_value=3999), every=st.sampled_from([250, 1000, 3000]))
def test_resuming_from_any_checkpoint_reaches_the_same_world(split, every):
    events = busy(HOURS).events
    source = MemorySource(events)
    source.add_checkpoints(every)
    target = min(split, events[-1].seq)
    cp = source.nearest_checkpoint("busy", target)
    world = load_checkpoint("busy", cp[0], cp[1]) if cp else World("busy")
    for ev in source.events("busy", world.seq, target):
        world.apply(ev)
    assert world.seq == target
    folded = _folded(target)
    assert world.chain_digest == folded.chain_digest
    assert world.snapshot() == folded.snapshot()
    assert world.model_allocated == folded.model_allocated


@functools.lru_cache(maxsize=1)
def _source_with_checkpoints() -> MemorySource:
    source = MemorySource(busy(HOURS).events)
    source.add_checkpoints(500)
    return source


def _folded(seq: int) -> World:
    world = World("busy")
    for ev in busy(HOURS).events[: seq + 1]:
        world.apply(ev)
    return world


@settings(max_examples=8, deadline=None)
@given(picks=st.lists(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=25), data=st.randoms())
def test_any_subset_in_any_order_replays_to_matches(picks, data):
    records = busy(HOURS).records
    chosen = [records[i % len(records)] for i in picks]
    data.shuffle(chosen)
    results = list(Verifier(_source_with_checkpoints()).run(chosen))
    assert [r.match for r in results] == [True] * len(chosen)
    assert [r.decision_id for r in results] == [r.decision_id for r in
                                                sorted(chosen, key=lambda r: (r.cluster, r.seq, r.decision_id))]
