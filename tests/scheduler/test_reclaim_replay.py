"""A simulated day with reclaim on, on each basis (quota and fairShare): preemptions happen, every
decision (each preemption included) replays to its digests, and every eviction the log holds
follows the reclaim contract."""

from __future__ import annotations

import functools

import pytest

from audit.records import Blocker
from audit.scheduler import reclaim
from audit.scheduler.fairshare import entitlements
from audit.timestamps import parse_time_ms
from audit.world import World
from ingest.simulate.loop import SimulationResult
from tests.scheduler.busysmall import busy_small, window_start
from tests.simulate.runs import replay_every_decision

MIN_RUNTIME_MS = 5 * 60_000
BASES = ["quota", "fairShare"]
# the two sides of "never below what it is owed" are sums of H100-equivalents taken in another
# order than the engine's: equal up to the last bits of a float
EQ_SLACK = 1e-9
# a day on which reclaim of quota is busy: 28 preemptions, 13 of them in the replayed window (on
# seed 3's day, 17 and 3; over seeds 1-7 from 11 to 34, and 0 to 13 in the window)
SEED = 6


@functools.cache
def _run(basis: str = "quota") -> SimulationResult:
    return busy_small(preemption=(("enabled", True), ("minRuntime", "5m"),
                                  *((("basis", basis),) if basis != "quota" else ())), seed=SEED)


@pytest.mark.parametrize("basis", BASES)
def test_every_decision_of_a_day_with_reclaim_replays_to_its_digests(basis):
    from audit.replay import MemorySource, Verifier

    res = _run(basis)
    preempted = [r for r in res.records if r.outcome == "preempted"]
    assert len(preempted) > 20 and res.preempted >= len(preempted)
    results = list(Verifier(MemorySource(res.events)).run(res.records))
    assert len(results) == len(res.records)
    assert [r.decision_id for r in results if not r.match] == []
    assert replay_every_decision(res) == len(res.records)


@pytest.mark.parametrize("basis", BASES)
def test_every_preemption_is_followed_by_the_evictions_it_names_and_the_preemptors_placement(basis):
    res = _run(basis)
    by_seq = sorted(res.records, key=lambda r: (r.seq, r.attempt))
    for i, rec in enumerate(by_seq):
        if rec.outcome != "preempted":
            continue
        victims = reclaim.victim_keys(rec.blockers)
        deleted = [f"{e.namespace}/{e.name}" for e in res.events[rec.seq + 1:]
                   if e.object_kind == "Pod" and e.type == "delete"][:len(victims)]
        assert deleted == victims, rec.decision_id
        after = next(r for r in by_seq[i + 1:] if (r.namespace, r.pod) == (rec.namespace, rec.pod))
        assert after.attempt == rec.attempt + 1
        # placed where devices were reclaimed, unless the simulator raced the bind (then it retries)
        assert (after.outcome, after.node) == ("allocated", rec.node) or (
            after.outcome == "error" and any("bind_seq" in b.detail for b in after.blockers)), after.decision_id


def _keeps_nominal(world: World, tenant: str, claims: list[str]) -> bool:
    freed: dict[str, int] = {}
    for c in claims:
        for d in world.claim_devices[c]:
            freed[world.devices[d].model] = freed.get(world.devices[d].model, 0) + 1
    quotas = {model: world.policy.quota(tenant, model) for model in freed}
    return all(q is not None and world.model_in_use(tenant, m) - freed[m] >= q.nominal for m, q in quotas.items())


def _keeps_entitlement(world: World, tenant: str, claims: list[str], preemptor: str) -> bool:
    """The victim's tenant, less what the victim's claims charged it, against its entitlement with
    the preemptor's tenant active (it has a pod pending)."""
    preemptor_tenant = world.policy.tenant_for(preemptor.partition("/")[0])
    entitled = entitlements(world, world.policy, preemptor_tenant)[tenant]
    released = sum(world.charges[c].eq for c in claims)
    return world.tenant_usage(tenant).in_use_eq - released >= entitled - EQ_SLACK


@pytest.mark.parametrize("basis", BASES)
def test_no_eviction_took_a_tenant_below_what_it_is_owed_or_a_pod_younger_than_min_runtime(basis):
    """Folded from the event log alone, not from the records: at each eviction the victim has run
    at least minRuntime, and its tenant keeps at least its nominal quota of each model (on the
    fair-share basis: its entitlement) once the victim's devices are gone (victims of one
    preemption are evicted one after another)."""
    res = _run(basis)
    world = World(res.world.cluster)
    evictions = 0
    for ev in res.events:
        conditions = (ev.payload.get("status") or {}).get("conditions") or [] if ev.object_kind == "Pod" else []
        evicted = [c for c in conditions if c.get("reason") == reclaim.DISRUPTION_REASON]
        if ev.type == "upsert" and evicted:
            evictions += 1
            claims = [f"{ev.namespace}/{s['resourceClaimName']}" for s in ev.payload["status"]["resourceClaimStatuses"]]
            now = parse_time_ms(ev.time)
            assert all(now - world.alloc_start[c] >= MIN_RUNTIME_MS for c in claims), ev.name
            tenant = world.policy.tenant_for(ev.namespace)
            if basis == "quota":
                assert _keeps_nominal(world, tenant, claims), ev.name
            else:
                preemptor = evicted[0]["message"].rpartition(" for pod ")[2]
                assert _keeps_entitlement(world, tenant, claims, preemptor), ev.name
        world.apply(ev)
    assert evictions == res.preempted > 20


def test_the_evidence_states_the_contract():
    for rec in _run("quota").records:
        if rec.outcome != "preempted":
            continue
        taken: dict[tuple[str, str], tuple[int, int, int]] = {}
        for b in rec.blockers:
            if b.code == Blocker.RECLAIM_VICTIM.value:
                tenant, model = str(b.detail["tenant"]), str(b.detail["model"])
                used, nominal, n = taken.get((tenant, model), (int(b.detail["used"]), int(b.detail["nominal"]), 0))
                taken[(tenant, model)] = (used, nominal, n + int(b.detail["count"]))
                assert int(b.detail["runtime_ms"]) >= MIN_RUNTIME_MS and tenant != rec.tenant
        assert taken and all(used > nominal and used - n >= nominal for used, nominal, n in taken.values())
        reclaimed = next(b for b in rec.blockers if b.code == Blocker.RECLAIM.value)
        assert int(reclaimed.detail["used"]) + int(reclaimed.detail["requested"]) <= int(reclaimed.detail["nominal"])


def test_the_evidence_states_the_fair_share_contract():
    """On the fair-share basis (H100-equivalents rounded to 3 decimals in the evidence)."""
    preempted = 0
    for rec in _run("fairShare").records:
        if rec.outcome != "preempted":
            continue
        preempted += 1
        lost: dict[str, tuple[float, float, float]] = {}
        for b in rec.blockers:
            if b.code == Blocker.RECLAIM_VICTIM.value:
                tenant = str(b.detail["tenant"])
                held, entitled, n = lost.get(tenant, (float(b.detail["held_eq"]), float(b.detail["entitlement_eq"]), 0.0))
                lost[tenant] = (held, entitled, n + float(b.detail["released_eq"]))
                assert int(b.detail["runtime_ms"]) >= MIN_RUNTIME_MS and tenant != rec.tenant
                assert b.detail["cause"] == "above_fair_share"
        assert lost and all(held > entitled and held - n >= entitled - 1e-3 for held, entitled, n in lost.values())
        reclaimed = next(b for b in rec.blockers if b.code == Blocker.RECLAIM.value)
        assert reclaimed.detail["basis"] == "fair_share"
        d = reclaimed.detail
        assert float(d["held_eq"]) + float(d["requested_eq"]) <= float(d["entitlement_eq"]) + 1e-3
    assert preempted > 20


@pytest.mark.parametrize("basis", BASES)
def test_the_recorded_reclaim_policy_reproduces_a_window(basis):
    """Counterfactual replay regenerates the preemptions (the evictions are the decisions' effects;
    the re-created pods are arrivals in the log) and lands on the same records and events."""
    from audit.records import to_jsonl
    from audit.replay.whatif import whatif

    res = _run(basis)
    start, since, until = window_start(res)
    active = [e for e in res.events if e.object_kind == "Policy" and parse_time_ms(e.time) < since][-1]
    w = whatif(start, res.events, res.records, active.payload, since, until)
    assert sum(r.outcome == "preempted" for r in w.counterfactual.records) > 10
    assert to_jsonl(w.counterfactual.records) == to_jsonl(w.recorded.records)
    assert [e.to_dict() for e in w.counterfactual.events] == [e.to_dict() for e in w.recorded.events]
