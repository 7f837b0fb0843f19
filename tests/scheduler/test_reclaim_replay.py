"""A simulated day with reclaim on: preemptions happen, every decision (each preemption included)
replays to its digests, and every eviction the log holds follows the reclaim contract."""

from __future__ import annotations

import functools

from audit.records import Blocker
from audit.scheduler import reclaim
from audit.timestamps import parse_time_ms
from audit.world import World
from ingest.simulate.loop import SimulationResult
from tests.scheduler.busysmall import busy_small, window_start
from tests.simulate.runs import replay_every_decision

MIN_RUNTIME_MS = 5 * 60_000


@functools.cache
def _run() -> SimulationResult:
    return busy_small(preemption=(("enabled", True), ("minRuntime", "5m")))


def test_every_decision_of_a_day_with_reclaim_replays_to_its_digests():
    from audit.replay import MemorySource, Verifier

    res = _run()
    preempted = [r for r in res.records if r.outcome == "preempted"]
    assert len(preempted) > 20 and res.preempted >= len(preempted)
    results = list(Verifier(MemorySource(res.events)).run(res.records))
    assert len(results) == len(res.records)
    assert [r.decision_id for r in results if not r.match] == []
    assert replay_every_decision(res) == len(res.records)


def test_every_preemption_is_followed_by_the_evictions_it_names_and_the_preemptors_placement():
    res = _run()
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


def test_no_eviction_took_a_tenant_below_nominal_or_a_pod_younger_than_min_runtime():
    """Folded from the event log alone, not from the records: at each eviction the victim has run
    at least minRuntime, and its tenant keeps at least its nominal quota of each model once the
    victim's devices are gone (victims of one preemption are evicted one after another)."""
    res = _run()
    world = World(res.world.cluster)
    evictions = 0
    for ev in res.events:
        conditions = (ev.payload.get("status") or {}).get("conditions") or [] if ev.object_kind == "Pod" else []
        if ev.type == "upsert" and any(c.get("reason") == reclaim.DISRUPTION_REASON for c in conditions):
            evictions += 1
            claims = [f"{ev.namespace}/{s['resourceClaimName']}" for s in ev.payload["status"]["resourceClaimStatuses"]]
            now = parse_time_ms(ev.time)
            assert all(now - world.alloc_start[c] >= MIN_RUNTIME_MS for c in claims), ev.name
            tenant = world.policy.tenant_for(ev.namespace)
            freed: dict[str, int] = {}
            for c in claims:
                for d in world.claim_devices[c]:
                    freed[world.devices[d].model] = freed.get(world.devices[d].model, 0) + 1
            for model, n in freed.items():
                q = world.policy.quota(tenant, model)
                assert q is not None and world.model_in_use(tenant, model) - n >= q.nominal, (ev.name, model)
        world.apply(ev)
    assert evictions == res.preempted > 20


def test_the_evidence_states_the_contract():
    for rec in _run().records:
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


def test_the_recorded_reclaim_policy_reproduces_a_window():
    """Counterfactual replay regenerates the preemptions (the evictions are the decisions' effects;
    the re-created pods are arrivals in the log) and lands on the same records and events."""
    from audit.records import to_jsonl
    from audit.replay.whatif import whatif

    res = _run()
    start, since, until = window_start(res)
    active = [e for e in res.events if e.object_kind == "Policy" and parse_time_ms(e.time) < since][-1]
    w = whatif(start, res.events, res.records, active.payload, since, until)
    assert sum(r.outcome == "preempted" for r in w.counterfactual.records) > 10
    assert to_jsonl(w.counterfactual.records) == to_jsonl(w.recorded.records)
    assert [e.to_dict() for e in w.counterfactual.events] == [e.to_dict() for e in w.recorded.events]
