"""Quota, fallback modes and mixed-model rules close tiers; fallback never bypasses them."""

from pathlib import Path
from typing import Any

import pytest

from audit.policy import default_policy
from audit.scheduler.engine import decide
from audit.scheduler.quota import check_quota
from tests.scheduler.worlds import ALL_DEVICES, cluster, decide_and_bind, dump_world, hold, submit


def test_quota_exhausted_h100_falls_back_to_a100_with_blocker():
    sim = cluster()
    for i in range(8):
        assert decide_and_bind(sim, submit(sim, f"a-{i}")).record.allocated_model == "H100"
    r = decide_and_bind(sim, submit(sim, "a-8")).record
    assert (r.outcome, r.allocated_model, r.tier_index, r.fallback) == ("allocated", "A100", 1, True)
    assert r.blockers[0].code == "quota_exhausted"
    assert r.blockers[0].detail == {"model": "H100", "used": 8, "requested": 1, "nominal": 8, "limit": 8,
                                    "lendable": 8}
    assert r.tiers[0].reasons == {"quota_exhausted": 16}
    assert sim.world.model_in_use("alpha", "H100") == 8


def test_borrowing_only_from_unused_nominal_of_others():
    sim = cluster(tenants=[
        {"name": "alpha", "namespaces": ["alpha"], "weight": 1, "quotas": {"H100": {"nominal": 4, "borrowingLimit": 4}}},
        {"name": "beta", "namespaces": ["beta"], "weight": 1, "quotas": {"H100": {"nominal": 4}}},
    ])
    models = [decide_and_bind(sim, submit(sim, f"a-{i}")).record.allocated_model for i in range(10)]
    assert models == ["H100"] * 8 + ["A100"] * 2
    # beta's nominal 4 is now all borrowed by alpha: beta has 4 of its own, nothing more
    for i in range(4):
        assert decide_and_bind(sim, submit(sim, f"b-{i}", "beta")).record.allocated_model == "H100"
    assert decide_and_bind(sim, submit(sim, "b-4", "beta")).record.allocated_model == "A100"


def test_quota_on_every_tier_defers():
    sim = cluster(tenants=[{"name": "alpha", "namespaces": ["alpha"], "weight": 1,
                            "quotas": {"H100": {"nominal": 0}, "A100": {"nominal": 0}, "L40S": {"nominal": 0}}}],
                  deviceModels=[{"model": m, "driver": "gpu.nvidia.com", "attribute": "productName",
                                 "prefix": f"NVIDIA {m}", "h100Equivalent": 1.0} for m in ("H100", "A100", "L40S")])
    r = decide_and_bind(sim, submit(sim, "a-1")).record
    assert (r.outcome, r.retry_class) == ("deferred", "quota")
    # the compatible tier (A100|H100|L40S) is closed by all three quotas: a blocker each, with its
    # part of the tier's 40 devices
    assert [(b.code, b.tier, b.detail["model"], b.detail.get("over_quota")) for b in r.blockers] == [
        ("quota_exhausted", 0, "H100", None), ("quota_exhausted", 1, "A100", None),
        ("quota_exhausted", 2, "A100", 16), ("quota_exhausted", 2, "H100", 16), ("quota_exhausted", 2, "L40S", 8)]
    assert r.tiers[2].reasons == {"quota_exhausted": 40}


@pytest.mark.parametrize(
    ("mode", "wait_s", "expected"),
    [
        pytest.param("immediate", 0, ("allocated", "A100"), id="immediate-falls-back-at-once"),
        pytest.param("strict", 0, ("unschedulable", ""), id="strict-waits-for-h100"),
        pytest.param("wait-for-preferred", 0, ("deferred", ""), id="wait-for-preferred-waits-first"),
        pytest.param("wait-for-preferred", 600, ("allocated", "A100"), id="wait-for-preferred-falls-back-after-T"),
    ],
)
def test_fallback_modes(mode, wait_s, expected):
    sim = cluster(fallback={"mode": mode, "wait": "10m"})
    hold(sim, "h100-000", ALL_DEVICES)
    hold(sim, "h100-001", ALL_DEVICES)
    key = submit(sim, "job-1")
    sim.now += wait_s * 1000
    r = decide_and_bind(sim, key).record
    assert (r.outcome, r.allocated_model) == expected
    if mode == "strict":
        assert r.tiers[1].reasons == {"not_reached": 16}
    if expected[0] == "deferred":
        assert r.blockers[-1].detail["fallback_after_ms"] == 600_000


def test_strict_mode_still_takes_preferred_when_free():
    sim = cluster(fallback={"mode": "strict"})
    r = decide_and_bind(sim, submit(sim, "job-1")).record
    assert (r.outcome, r.allocated_model) == ("allocated", "H100")


@pytest.mark.parametrize(("mixed", "expected"), [(True, ("allocated", "A100|H100")), (False, ("unschedulable", ""))],
                         ids=["mixed-allowed", "mixed-forbidden"])
def test_mixed_models_per_pod(mixed, expected):
    # Four devices fit only by taking both H100 and both A100 of the one mixed node.
    sim = cluster("mixed-node.yaml", mixedModels=mixed)
    r = decide_and_bind(sim, submit(sim, "job-1", size=4, template="any-big-gpu")).record
    assert (r.outcome, r.allocated_model) == expected
    if mixed:
        assert [d.model for d in r.devices] == ["H100", "H100", "A100", "A100"]


def test_quota_answers_follow_every_folded_event_and_the_policy_asked():
    sim = cluster(tenants=[{"name": "alpha", "namespaces": ["alpha"], "weight": 1,
                            "quotas": {"H100": {"nominal": 2, "borrowingLimit": 2}}}])
    world = sim.world
    assert (check_quota(world, world.policy, "alpha", "H100", 2).fits, world.model_in_use("alpha", "H100")) == (True, 0)
    for i in range(2):
        assert decide_and_bind(sim, submit(sim, f"a-{i}")).record.allocated_model == "H100"
    asked = check_quota(world, world.policy, "alpha", "H100", 1)
    assert (asked.fits, asked.used, asked.nominal, asked.lendable) == (False, 2, 2, 0)
    assert check_quota(world, world.policy, "alpha", "H100", 1) is asked  # the same state, the same answer
    free = check_quota(world, default_policy(), "alpha", "H100", 1)  # no quotas: another answer at this seq
    assert (free.fits, free.used, free.nominal) == (True, 2, None)


DUMPS = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
TWO_QUOTAS = ("cluster-dra-two-quotas.yaml", "policy-h100-a100-quotas.yaml")
_A100_FULL = {"model": "A100", "used": 4, "nominal": 4, "limit": 4, "lendable": 0}
_H100_FULL = {"model": "H100", "used": 2, "nominal": 2, "limit": 2, "lendable": 0}
_NO_QUOTA = "tenant team-a has no quota left for any allowed tier"

# (dump, policy, pod): outcome, each tier's (model, reasons), the blockers (code, tier, detail), the message
QUOTA_CLOSED_TIERS: dict[str, tuple[tuple[str, str, str], str, list[tuple[str, dict[str, int]]],
                                    list[tuple[str, int, dict[str, Any]]], str]] = {
    # one model's quota closes a tier of that model alone: one blocker, the record as it always was
    "a_tier_of_one_model_has_its_quota_alone": (
        ("cluster-quota-tier.yaml", "policy-h100-quota.yaml", "team-a/train-1"), "allocated",
        [("H100", {"quota_exhausted": 3}), ("A100|H100", {"in_use": 2, "not_reached": 1, "selected": 2})],
        [("quota_exhausted", 0, {"model": "H100", "used": 1, "requested": 1, "nominal": 1, "limit": 1, "lendable": 0})],
        "allocated 1 device(s) on gpu-node-2 from tier 1 (A100)"),
    # both quotas full: the tier of both models is closed, and each model is named with its part
    # of the 12 (was: one A100 blocker, beside a figure that counted the H100s too)
    "a_tier_of_two_models_names_both_quotas": (
        (*TWO_QUOTAS, "team-a/train-2"), "deferred",
        [("A100|H100", {"quota_exhausted": 12})],
        [("quota_exhausted", 0, {**_A100_FULL, "requested": 2, "over_quota": 8}),
         ("quota_exhausted", 0, {**_H100_FULL, "requested": 2, "over_quota": 4})],
        _NO_QUOTA),
    "a_tier_of_one_model_then_of_two_each_as_closed": (
        (*TWO_QUOTAS, "team-a/train-1"), "deferred",
        [("H100", {"quota_exhausted": 4}), ("A100|H100", {"quota_exhausted": 12})],
        [("quota_exhausted", 0, {**_H100_FULL, "requested": 1}),
         ("quota_exhausted", 1, {**_A100_FULL, "requested": 1, "over_quota": 8}),
         ("quota_exhausted", 1, {**_H100_FULL, "requested": 1, "over_quota": 4})],
        _NO_QUOTA),
}


@pytest.mark.parametrize("case", sorted(QUOTA_CLOSED_TIERS))
def test_a_tier_closed_by_quota_names_every_model_its_figure_counts(case: str) -> None:
    (dump, policy, pod), outcome, tiers, blockers, message = QUOTA_CLOSED_TIERS[case]
    world = dump_world(DUMPS / policy, DUMPS / dump)
    r = decide(world, pod, 1, world.time_ms).record
    assert r.outcome == outcome
    assert [(t.model, t.reasons) for t in r.tiers] == tiers
    assert [(b.code, b.tier, b.detail) for b in r.blockers] == blockers
    assert r.message == message
    # each closed tier's blockers' parts add up to its figure (a lone blocker's part is the whole)
    for t in r.tiers:
        if "quota_exhausted" in t.reasons:
            assert sum(b.detail.get("over_quota", t.reasons["quota_exhausted"]) for b in r.blockers
                       if b.tier == t.index) == t.reasons["quota_exhausted"]
