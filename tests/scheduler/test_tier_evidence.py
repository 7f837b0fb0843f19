"""A tier's evidence covers exactly the devices of the tier's models, each counted once."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.scheduler.engine import decide
from tests.scheduler.worlds import cluster, decide_and_bind, hold, occupied, submit

ALL = list(range(8))
NODES = ["h100-000", "h100-001", "a100-000", "a100-001", "l40s-000"]


@pytest.mark.parametrize(
    ("held", "size", "h100_reasons", "a100_reasons"),
    [
        pytest.param({"h100-000": ALL, "h100-001": ALL}, 1, {"in_use": 16}, {"not_reached": 15, "selected": 1},
                     id="fallback-node-devices-do-not-join-the-h100-tier"),
        pytest.param({"h100-000": ALL, "h100-001": ALL[:5]}, 4, {"in_use": 13, "not_reached": 3},
                     {"not_reached": 12, "selected": 4}, id="too-few-free-h100-on-any-node"),
        pytest.param({"h100-000": ALL}, 1, {"in_use": 8, "not_reached": 7, "selected": 1}, {"not_reached": 16},
                     id="first-choice-leaves-a100-unvisited"),
    ],
)
def test_tier_counts_cover_only_its_model(held, size, h100_reasons, a100_reasons):
    sim = cluster()
    for node, devs in held.items():
        hold(sim, node, devs)
    r = decide_and_bind(sim, submit(sim, "job-1", size=size)).record
    h100, a100 = r.tiers[0], r.tiers[1]
    assert (h100.model, h100.considered, h100.reasons) == ("H100", 16, h100_reasons)
    assert (a100.model, a100.considered, a100.reasons) == ("A100", 16, a100_reasons)
    for tier in (h100, a100):
        assert all(f"/{tier.model.lower()}-" in ex.device for ex in tier.exemplars)


def test_mixed_node_counts_each_model_in_its_own_tier():
    sim = cluster("mixed-node.yaml")
    hold(sim, "mixed-000", [0, 1])  # both H100 taken: the pod falls back to an A100 on the same node
    r = decide_and_bind(sim, submit(sim, "job-1", namespace="default", template="any-big-gpu")).record
    assert (r.outcome, r.allocated_model, r.tier_index) == ("allocated", "A100", 1)
    assert (r.tiers[0].model, r.tiers[0].considered, r.tiers[0].reasons) == ("H100", 2, {"in_use": 2})
    assert r.tiers[1].considered == 4
    assert r.tiers[1].reasons == {"in_use": 2, "not_reached": 1, "selected": 1}


@pytest.mark.parametrize(
    ("held", "size", "blocked_tiers"),
    [
        pytest.param({"h100-000": ALL, "h100-001": ALL[:5]}, 4, [0], id="free-h100-spread-too-thin"),
        pytest.param({"h100-000": ALL, "h100-001": ALL}, 1, [], id="no-free-h100-no-blocker"),
        pytest.param({}, 1, [], id="first-choice-no-blocker"),
    ],
)
def test_skipped_tier_with_free_devices_names_insufficient_on_node(held, size, blocked_tiers):
    sim = cluster()
    for node, devs in held.items():
        hold(sim, node, devs)
    r = decide_and_bind(sim, submit(sim, "job-1", size=size)).record
    assert r.outcome == "allocated"
    assert [b.tier for b in r.blockers if b.code == "insufficient_on_node"] == blocked_tiers
    for b in r.blockers:
        assert b.detail["count"] == size


occupancy = st.dictionaries(st.sampled_from(NODES), st.sets(st.integers(0, 7), max_size=8), max_size=5)
tainted = st.lists(st.tuples(st.sampled_from(NODES), st.integers(0, 7)), max_size=6)


@settings(max_examples=40, deadline=None)
@given(occupancy, tainted, st.sampled_from([1, 2, 4, 8]), st.sampled_from(["h100-first", "a100-only"]))
def test_reason_counts_add_up_to_the_tier_models_devices(held, taints, size, template):
    sim = occupied(held, taints)
    world = sim.world
    r = decide(world, submit(sim, "job-x", size=size, template=template), 1, sim.now).record
    for tier in r.tiers:
        models = tier.model.split("|")
        devices = [d for d in world.devices.values() if d.model in models]
        assert tier.considered == len(devices)
        assert sum(tier.reasons.values()) == tier.considered
        assert tier.reasons.get("in_use", 0) == sum(d.id in world.allocated_by for d in devices)
        assert all(world.devices[ex.device].model in models for ex in tier.exemplars)


@pytest.mark.parametrize(
    ("mode", "a100_held", "a100_reasons"),
    [
        pytest.param("strict", {"a100-000": ALL}, {"in_use": 8, "not_reached": 8}, id="strict-in-use-a100-stays-in-use"),
        pytest.param("strict", {}, {"not_reached": 16}, id="strict-free-a100-not-reached"),
        pytest.param("wait-for-preferred", {"a100-001": ALL[:3]}, {"in_use": 3, "not_reached": 13},
                     id="waiting-tier-counts-in-use"),
    ],
)
def test_tier_a_fallback_mode_kept_shut_is_classified_by_the_indexes(mode, a100_held, a100_reasons):
    sim = cluster(fallback={"mode": mode, "wait": "10m"})
    for node, devs in {"h100-000": ALL, "h100-001": ALL, **a100_held}.items():
        hold(sim, node, devs)
    r = decide_and_bind(sim, submit(sim, "job-1")).record
    assert r.outcome in ("unschedulable", "deferred")
    assert (r.tiers[1].considered, r.tiers[1].reasons) == (16, a100_reasons)
