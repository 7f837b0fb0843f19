"""Reclaim on the fair-share basis: a tenant below its DRF entitlement preempts pods of a tenant
holding more than its own, by the same least-damage contract, never taking the victim tenant below
its entitlement nor the preemptor above its own, and never a pod younger than ``minRuntime``.

The small cluster's capacity is 27.28 H100-equivalents (16 H100 at 1.0, 16 A100 at 0.5, 8 L40S at
0.35, 4 device-plugin L4 at 0.12). Its A100 and L40S nodes are held by another scheduler's
namespace ``ops``, a tenant of its own at weight 1, so three tenants are active and each is entitled
to 27.28 / 3 = 9.093 H100-eq. No tenant has a quota: this basis needs none."""

from __future__ import annotations

from typing import Any

import pytest

from audit.scheduler.engine import decide
from tests.scheduler.test_reclaim import CHOICES as QUOTA_CHOICES
from tests.scheduler.test_reclaim import MINUTE, OTHER_NODES, _fill, _run, _victims
from tests.scheduler.worlds import cluster, hold, submit

ENTITLED = 9.093


def _cluster(basis: str = "fairShare", min_runtime: str = "10m", enabled: bool = True,
             tenants: list[dict[str, Any]] | None = None):  # noqa: ANN202
    tenants = tenants or [{"name": n, "namespaces": [n], "weight": 1} for n in ("alpha", "beta")]
    sim = cluster(tenants=tenants, preemption={"enabled": enabled, "minRuntime": min_runtime, "basis": basis})
    for node in OTHER_NODES:
        hold(sim, node, list(range(8)))
    return sim


# beta holds all 16 H100 (16 H100-eq against 9.093): it may lose up to 6.9 of them. The first two
# cases choose as on the quota basis.
CHOICES = [
    *QUOTA_CHOICES[:2],
    # b1 alone loses the least device-time, but evicting its 8 GPUs leaves beta 8 H100-eq, below 9.093
    pytest.param(4, {"h100-000": [("b1", 8, 20)], "h100-001": [("c1", 4, 60), ("c2", 4, 90)]},
                 ["beta/c1"], id="never-below-the-victim-tenants-entitlement"),
    pytest.param(6, {"h100-000": [("b1", 4, 20), ("b2", 4, 90)], "h100-001": [("c1", 2, 20), ("c2", 6, 90)]},
                 ["beta/c2"], id="victims-all-on-one-node-fewest-first"),
]


@pytest.mark.parametrize(("size", "layout", "victims"), CHOICES)
def test_victims_are_chosen_by_the_contract(size, layout, victims):
    sim = _cluster()
    _fill(sim, layout)
    d = decide(sim.world, submit(sim, "want", namespace="alpha", size=size), 1, sim.now)
    assert d.record.outcome == "preempted"
    assert _victims(d.record) == victims == d.preempts


def _alpha_runs(sim, gpus: int) -> None:  # noqa: ANN001
    """alpha already holds ``gpus`` H100 on h100-000 (devices from the top, beta's pods fill the rest)."""
    _run(sim, "alpha", "mine", "h100-000", list(range(8 - gpus, 8)), 60)


@pytest.mark.parametrize(("setup", "layout", "size"), [
    pytest.param({"enabled": False}, {"h100-000": [("b1", 8, 60)], "h100-001": [("c1", 4, 60), ("c2", 4, 60)]}, 4,
                 id="not-when-disabled"),
    pytest.param({"basis": "quota"}, {"h100-000": [("b1", 8, 60)], "h100-001": [("c1", 4, 60), ("c2", 4, 60)]}, 4,
                 id="not-on-the-quota-basis-without-quotas"),
    # beta holds 8 of 16 H100 (ops the other 8): below its entitlement, it is nobody's victim
    pytest.param({"ops_holds": True}, {"h100-000": [("b1", 4, 60), ("b2", 4, 60)]}, 4,
                 id="not-from-a-tenant-within-its-entitlement"),
    pytest.param({"min_runtime": "61m"}, {"h100-000": [("b1", 8, 60)], "h100-001": [("c1", 4, 60), ("c2", 4, 60)]}, 4,
                 id="min-runtime-protects-younger-pods"),
    # every set that frees 8 H100 on one node leaves beta at 8
    pytest.param({}, {"h100-000": [("b1", 8, 60)], "h100-001": [("c1", 4, 60), ("c2", 4, 60)]}, 8,
                 id="not-when-every-set-takes-the-victim-below-its-entitlement"),
])
def test_no_preemption(setup, layout, size):
    setup = dict(setup)
    ops_holds = setup.pop("ops_holds", False)
    sim = _cluster(**setup)
    if ops_holds:
        hold(sim, "h100-001", list(range(8)))
    _fill(sim, layout)
    d = decide(sim.world, submit(sim, "want", namespace="alpha", size=size), 1, sim.now)
    assert (d.record.outcome, d.preempts) == ("unschedulable", [])
    assert not any(b.code.startswith("reclaim") for b in d.record.blockers)


@pytest.mark.parametrize(("alpha_holds", "victims"), [
    pytest.param(1, ["beta/c1"], id="up-to-its-entitlement-1-plus-8-within-9.093"),
    pytest.param(2, [], id="not-past-it-2-plus-8-above-9.093"),
])
def test_the_preemptor_may_reach_its_entitlement_but_not_pass_it(alpha_holds, victims):
    # beta also holds both A100 nodes (8 H100-eq, no pods there to preempt), so losing 8 H100 keeps
    # it above its entitlement; ops holds only the L40S node
    sim = cluster(tenants=[{"name": n, "namespaces": [n], "weight": 1} for n in ("alpha", "beta")],
                  preemption={"enabled": True, "minRuntime": "10m", "basis": "fairShare"})
    for node in ("a100-000", "a100-001"):
        hold(sim, node, list(range(8)), namespace="beta")
    hold(sim, "l40s-000", list(range(8)))
    _alpha_runs(sim, alpha_holds)
    _fill(sim, {"h100-000": [("b1", 8 - alpha_holds, 60)], "h100-001": [("c1", 8, 60)]})
    d = decide(sim.world, submit(sim, "want", namespace="alpha", size=8), 1, sim.now)
    assert d.preempts == victims


def test_the_preemption_record_carries_its_evidence_and_why_says_it():
    from audit.explain import explain_record

    sim = _cluster()
    _fill(sim, {"h100-000": [("b1", 8, 20)], "h100-001": [("c1", 4, 60), ("c2", 4, 90)]})
    rec = decide(sim.world, submit(sim, "want", namespace="alpha", size=4), 1, sim.now).record
    assert (rec.outcome, rec.node, rec.tier_index, rec.retry_class) == ("preempted", "h100-001", 0, "")
    assert [(b.code, b.tier, b.detail) for b in rec.blockers if b.code.startswith("reclaim")] == [
        ("reclaim", 0, {"basis": "fair_share", "model": "H100", "node": "h100-001", "held_eq": 0.0,
                        "requested_eq": 4.0, "entitlement_eq": ENTITLED, "min_runtime_ms": 600_000, "victims": 1,
                        "device_ms": 4 * 60 * MINUTE}),
        ("reclaim_victim", -1, {"pod": "beta/c1", "tenant": "beta", "node": "h100-001", "model": "H100", "count": 4,
                                "runtime_ms": 60 * MINUTE, "device_ms": 4 * 60 * MINUTE, "released_eq": 4.0,
                                "held_eq": 16.0, "entitlement_eq": ENTITLED, "cause": "above_fair_share"})]
    assert rec.message == ("reclaim: tenant alpha is within its fair share with 4 H100; preempting 1 pod(s) of "
                           "tenant(s) above their fair share beta on node h100-001 (beta/c1)")
    summary = explain_record(rec, "H100").summary
    assert ("reclaiming 4.0 H100-eq of H100 within its fair share (0.0 of 9.093 H100-eq held) on node h100-001; "
            "preempting pod beta/c1 of tenant beta (4 H100, running 60 min; its tenant holds 16.0 H100-eq, above "
            "its fair share 9.093)") in summary
    assert summary.endswith("Pod not allocated yet: preempted pods on node h100-001 to reclaim fair share under "
                            "policy 1.")


def test_a_tenant_never_sees_the_pods_or_tenant_it_preempted():
    from audit.api.tenant_view import tenant_view

    sim = _cluster()
    _fill(sim, {"h100-000": [("b1", 8, 20)], "h100-001": [("c1", 4, 60), ("c2", 4, 90)]})
    view = tenant_view(decide(sim.world, submit(sim, "want", namespace="alpha", size=4), 1, sim.now).record.to_dict())
    victim = next(b for b in view["blockers"] if b["code"] == "reclaim_victim")
    assert victim["detail"] == {"pod": "(others)", "tenant": "(others)", "node": "h100-001", "model": "H100",
                                "count": 4, "runtime_ms": 60 * MINUTE, "device_ms": 4 * 60 * MINUTE, "released_eq": 4.0,
                                "held_eq": 16.0, "entitlement_eq": ENTITLED, "cause": "above_fair_share"}
    assert view["message"] == ("reclaim: tenant alpha is within its fair share with 4 H100; preempting 1 pod(s) of "
                               "tenant(s) above their fair share (others) on node h100-001 ((others))")


def test_the_loop_evicts_the_victim_saying_why_and_places_the_preemptor():
    sim = _cluster()
    _fill(sim, {"h100-000": [("b1", 8, 20)], "h100-001": [("c1", 4, 60), ("c2", 4, 90)]})
    before = len(sim.events)
    submit(sim, "want", namespace="alpha", size=4)
    sim.schedule_pass()
    assert [(r.pod, r.outcome, r.attempt, r.node) for r in sim.records] == [
        ("want", "preempted", 1, "h100-001"), ("want", "allocated", 2, "h100-001")]
    evicted = next(e for e in sim.events[before:] if e.name == "c1" and e.type == "upsert")
    assert [(c["reason"], c["message"]) for c in evicted.payload["status"]["conditions"]] == [
        ("PreemptionByScheduler", "preempted to reclaim fair share for pod alpha/want")]
    assert (sim.world.tenant_usage("beta").in_use_eq, sim.world.tenant_usage("alpha").in_use_eq) == (12.0, 4.0)
