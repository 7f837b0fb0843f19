"""Property: whatever happens, a world rebuilt from its checkpoint has the same indexes and
takes the same decisions as the live world, and the indexes equal a recount from the objects."""

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.scheduler.engine import decide
from audit.world import World
from tests.scheduler.test_search_properties import _check_indexes
from tests.scheduler.worlds import cluster, decide_and_bind, hold, submit

NODES = ["h100-000", "h100-001", "a100-000", "a100-001", "l40s-000"]

operation = st.one_of(
    st.tuples(st.just("job"), st.integers(1, 8)),
    st.tuples(st.just("hold"), st.sampled_from(NODES), st.integers(0, 7)),
    st.tuples(st.just("taint"), st.sampled_from(NODES), st.integers(0, 7)),
    st.tuples(st.just("untaint"), st.integers(0, 5)),
    st.tuples(st.just("finish"), st.integers(0, 20)),
    st.tuples(st.just("lose"), st.sampled_from(NODES)),
    st.tuples(st.just("repair"), st.integers(0, 3)),
    st.tuples(st.just("upgrade"), st.sampled_from(NODES)),
)


def _apply(sim, op, state):
    kind = op[0]
    if kind == "job":
        state["n"] += 1
        key = submit(sim, f"j-{state['n']}", size=op[1])
        if decide_and_bind(sim, key).events:
            state["running"].append(key)
    elif kind == "hold" and op[1] in sim.world.nodes:
        dev = f"gpu.nvidia.com/{op[1]}/gpu-{op[2]}"
        if dev not in sim.world.allocated_by:
            hold(sim, op[1], [op[2]], name=f"h-{state['n']}-{op[2]}-{op[1]}")
    elif kind == "taint":
        state["n"] += 1
        rule = f"t-{state['n']}"
        sim.taint_device(rule, op[1], f"gpu-{op[2]}", "xid")
        state["rules"].append(rule)
    elif kind == "untaint" and state["rules"]:
        sim._on_recover(state["rules"].pop(op[1] % len(state["rules"])))
    elif kind == "finish" and state["running"]:
        key = state["running"].pop(op[1] % len(state["running"]))
        if key in sim.pods and sim.pods[key].node:
            sim._on_finish(key)
    elif kind == "lose" and op[1] in sim.world.nodes:
        sim.lose_node(op[1])
        state["lost"].append(op[1])
    elif kind == "repair" and state["lost"]:
        node = state["lost"].pop(op[1] % len(state["lost"]))
        old = sim.world.get("ResourceSlice", "", f"{node}-gpu.nvidia.com")
        sim._on_repair((node, old or _last_slice(sim, node)))
    elif kind == "upgrade" and op[1] in sim.world.nodes:
        sim.bump_slice(op[1], upgrade=True)


def _lists(free_nodes):
    return {m: {k: v for k, v in by_k.items() if v} for m, by_k in free_nodes.items() if any(by_k.values())}


def _last_slice(sim, node):
    return next(e.payload for e in reversed(sim.events)
                if e.object_kind == "ResourceSlice" and e.name == f"{node}-gpu.nvidia.com" and e.payload)


@settings(max_examples=30, deadline=None)
@given(st.lists(operation, min_size=1, max_size=25))
def test_checkpoint_world_equals_live_world(ops):
    sim = cluster()
    state = {"n": 0, "running": [], "rules": [], "lost": []}
    for op in ops:
        _apply(sim, op, state)
        sim.now += 60_000
    live = sim.world
    _check_indexes(live)
    resumed = World.from_snapshot(json.loads(json.dumps(live.snapshot())))
    assert resumed.snapshot() == live.snapshot()
    for index in ("node_model", "allocated_by", "pending", "multi_model_nodes"):
        assert getattr(resumed, index) == getattr(live, index), index
    assert _lists(resumed.free_nodes) == _lists(live.free_nodes)
    for counter in ("model_allocated", "model_free", "model_totals", "pending_by_tenant"):
        assert ({k: v for k, v in getattr(resumed, counter).items() if v}
                == {k: v for k, v in getattr(live, counter).items() if v}), counter
    key = submit(sim, "probe", size=2)
    probe_live = decide(live, key, 1, sim.now)
    resumed_after = World.from_snapshot(json.loads(json.dumps(live.snapshot())))
    probe_resumed = decide(resumed_after, key, 1, sim.now)
    assert probe_live.record.output_digest == probe_resumed.record.output_digest
