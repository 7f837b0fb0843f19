"""Node choice follows the contract: best firstAvailable score first, then node name."""

import pytest

from audit.scheduler.engine import brute_force_choice
from tests.scheduler.worlds import cluster, decide_and_bind, hold, submit

ALL = list(range(8))


@pytest.mark.parametrize(
    ("held", "expected_node", "expected_tier", "expected_model"),
    [
        pytest.param({}, "h100-000", 0, "H100", id="empty-cluster-takes-first-h100-node-by-name"),
        pytest.param({"h100-000": ALL}, "h100-001", 0, "H100", id="full-first-node-next-h100-node"),
        pytest.param({"h100-000": ALL, "h100-001": ALL}, "a100-000", 1, "A100", id="h100-full-falls-back-to-a100"),
        pytest.param({"h100-000": ALL, "h100-001": ALL, "a100-000": ALL}, "a100-001", 1, "A100",
                     id="tie-on-score-broken-by-name"),
        pytest.param({"h100-000": ALL, "h100-001": ALL, "a100-000": ALL, "a100-001": ALL}, "l40s-000", 2, "L40S",
                     id="third-tier-compatible"),
        pytest.param({"h100-000": ALL[:7]}, "h100-000", 0, "H100", id="one-free-device-suffices"),
        pytest.param({"h100-000": ALL, "a100-000": ALL[1:]}, "h100-001", 0, "H100",
                     id="higher-score-beats-lower-name"),
    ],
)
def test_node_choice_by_score_then_name(held, expected_node, expected_tier, expected_model):
    sim = cluster()
    for node, devs in held.items():
        hold(sim, node, devs)
    key = submit(sim, "job-1")
    d = decide_and_bind(sim, key)
    assert (d.record.outcome, d.record.node, d.record.tier_index, d.record.allocated_model) == (
        "allocated", expected_node, expected_tier, expected_model)
    assert d.record.fallback == (expected_tier > 0)


@pytest.mark.parametrize(
    ("held", "size"),
    [
        pytest.param({}, 1, id="empty"),
        pytest.param({"h100-000": [0, 1, 2, 3]}, 4, id="partial-first-node-four-devices"),
        pytest.param({"h100-000": [0, 1, 2, 3, 4], "h100-001": [0, 1, 2, 3, 4]}, 4, id="no-node-has-four-h100"),
        pytest.param({"h100-000": ALL, "h100-001": ALL, "a100-001": [0]}, 8, id="eight-a100-only-on-second"),
    ],
)
def test_engine_matches_brute_force(held, size):
    sim = cluster()
    for node, devs in held.items():
        hold(sim, node, devs)
    key = submit(sim, "job-1", size=size)
    expected = brute_force_choice(sim.world, key, sim.now)
    d = decide_and_bind(sim, key)
    got = (d.record.node, 8 - d.record.tier_index) if d.record.outcome == "allocated" else None
    assert got == expected


def test_no_node_records_unschedulable_with_blockers_per_tier():
    sim = cluster()
    for node in ("h100-000", "h100-001", "a100-000", "a100-001", "l40s-000"):
        hold(sim, node, ALL)
    d = decide_and_bind(sim, submit(sim, "job-1"))
    r = d.record
    assert (r.outcome, r.retry_class, r.node) == ("unschedulable", "unschedulable", "")
    assert [b.code for b in r.blockers] == ["insufficient_on_node"] * 3
    assert [t.model for t in r.tiers] == ["H100", "A100", "A100|H100|L40S"]
    assert r.tiers[0].reasons == {"in_use": 16}
    assert r.preference == ["H100", "A100", "A100|H100|L40S"]


def test_allocated_record_evidence_counts_and_exemplars():
    sim = cluster()
    hold(sim, "h100-000", ALL)
    d = decide_and_bind(sim, submit(sim, "job-1"))
    t0 = d.record.tiers[0]
    assert t0.considered == 16
    assert t0.reasons == {"in_use": 8, "not_reached": 7, "selected": 1}
    assert t0.exemplars[0].reason == "selected"
    assert t0.exemplars[0].device == "gpu.nvidia.com/h100-001/gpu-0"
    assert d.record.devices[0].request == "gpu/h100"
    assert d.record.template_version == "v3"
