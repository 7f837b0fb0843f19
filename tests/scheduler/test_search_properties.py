"""Properties: the pruned search picks what brute force picks; indexes equal a recount."""

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.scheduler.engine import brute_force_choice, decide
from tests.scheduler.worlds import occupied, submit

NODES = ["h100-000", "h100-001", "a100-000", "a100-001", "l40s-000"]

occupancy = st.dictionaries(st.sampled_from(NODES), st.sets(st.integers(0, 7), max_size=8), max_size=5)
tainted = st.lists(st.tuples(st.sampled_from(NODES), st.integers(0, 7)), max_size=6)


@settings(max_examples=40, deadline=None)
@given(occupancy, tainted, st.sampled_from([1, 2, 3, 4, 8]), st.sampled_from(["h100-first", "a100-only"]))
def test_pruned_search_equals_brute_force(held, taints, size, template):
    sim = occupied(held, taints)
    key = submit(sim, "job-x", size=size, template=template)
    d = decide(sim.world, key, 1, sim.now)
    expected = brute_force_choice(sim.world, key, sim.now)
    got = None if d.proposal is None else (d.record.node, 8 - d.record.tier_index if template == "h100-first" else 0)
    assert got == expected
    _check_indexes(sim.world)


def _check_indexes(world):
    """free-and-healthy counts and the per-count node lists equal a recount from the devices."""
    recount = {}
    for dev in world.devices.values():
        c = recount.setdefault(dev.node, {}).setdefault(dev.model, [0, 0])
        c[0] += 1
        if not dev.unhealthy and dev.id not in world.allocated_by:
            c[1] += 1
    assert {n: {m: c for m, c in per.items() if c[0]} for n, per in world.node_model.items() if per} == recount
    for model, by_k in world.free_nodes.items():
        for k, nodes in by_k.items():
            assert nodes == sorted(n for n, per in recount.items() if per.get(model, [0, 0])[1] >= k)
