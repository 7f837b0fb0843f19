"""A simulated day under a reservation policy: every decision replays to its digests, the
recorded policy reproduces a window counterfactually, and holds were honoured throughout."""

from __future__ import annotations

import pytest

from audit.policy import Policy
from audit.records import to_jsonl
from audit.scheduler import reservations
from audit.timestamps import parse_time_ms
from audit.world import World
from ingest.simulate.loop import SimulationResult
from tests.scheduler.busysmall import busy_small, window_start


def _run(mode: str = "best-effort") -> SimulationResult:
    return busy_small((("mode", mode), ("reserveAfter", "2m")))


def _codes(res: SimulationResult) -> set[str]:
    return {b.code for r in res.records for b in r.blockers if b.code.startswith("reservation")}


@pytest.mark.parametrize("mode", ["best-effort", "strict"])
def test_every_decision_of_a_day_with_reservations_replays_to_its_digests(mode):
    from audit.replay import MemorySource, Verifier

    res = _run(mode)
    # the run exercised reservations: made, released by the bind, and other pods kept off
    assert {"reservation_made", "reservation_released", "reservation_held"} <= _codes(res)
    results = list(Verifier(MemorySource(res.events)).run(res.records))
    assert len(results) == len(res.records) > 1500
    assert [r.decision_id for r in results if not r.match] == []


@pytest.mark.parametrize("mode", ["best-effort", "strict"])
def test_the_recorded_reservation_policy_reproduces_a_window(mode):
    from audit.replay.whatif import whatif

    res = _run(mode)
    start, since, until = window_start(res)
    active = [e for e in res.events if e.object_kind == "Policy" and parse_time_ms(e.time) < since][-1]
    w = whatif(start, res.events, res.records, active.payload, since, until)
    assert any(e.object_kind == "Reservation" for e in w.counterfactual.events)
    assert to_jsonl(w.counterfactual.records) == to_jsonl(w.recorded.records)
    assert [e.to_dict() for e in w.counterfactual.events] == [e.to_dict() for e in w.recorded.events]


def _held_for_others(world: World, policy: Policy, pod: str) -> set[str]:
    return {d for node in world.reservations for d in reservations.held_devices(world, policy, node, pod)}


@pytest.mark.parametrize("mode", ["best-effort", "strict"])
def test_no_pod_ever_took_a_device_held_for_another_and_the_limits_held(mode):
    res = _run(mode)
    world = World(res.world.cluster)
    claims_of = {f"{r.namespace}/{c}": f"{r.namespace}/{r.pod}" for r in res.records for c in r.claims}
    allocations = 0
    for ev in res.events:
        if ev.object_kind == "ResourceClaim" and (ev.payload.get("status") or {}).get("allocation"):
            key = f"{ev.namespace}/{ev.name}"
            if key in claims_of and key not in world.claim_devices:
                results = ev.payload["status"]["allocation"]["devices"]["results"]
                taken = {f"{r['driver']}/{r['pool']}/{r['device']}" for r in results}
                assert not taken & _held_for_others(world, world.policy, claims_of[key]), ev.seq
                allocations += 1
        world.apply(ev)
        live = [h for h in world.reservations.values() if reservations.honoured(world, world.policy, h)]
        tenants = [world.policy.tenant_for(h.pod.split("/")[0]) for h in live]
        assert len({h.node for h in live}) == len(live)
        assert all(tenants.count(t) <= world.policy.max_reservations_per_tenant for t in tenants)
    assert allocations > 1000


def test_decisions_replay_from_checkpoints_taken_while_devices_were_reserved():
    from audit.replay import MemorySource, Verifier
    from audit.replay.checkpoints import checkpoint_body

    res = _run()
    world = World(res.world.cluster)
    checkpoints = []
    for ev in res.events:
        world.apply(ev)
        if world.reservations and (not checkpoints or ev.seq - checkpoints[-1][1] > 400):
            checkpoints.append((world.cluster, ev.seq, checkpoint_body(world)))
    assert len(checkpoints) >= 5
    source = MemorySource(res.events, checkpoints)
    for _, seq, _ in checkpoints:  # each batch starts from its checkpoint, reservations included
        batch = [r for r in res.records if seq <= r.seq < seq + 400]
        results = list(Verifier(source).run(batch))
        assert len(results) == len(batch) and [r.decision_id for r in results if not r.match] == []


def test_a_day_with_reservations_and_adaptive_fallback_together_replays_to_its_digests():
    """Both features decide how the loop groups parked pods: together, every decision still
    replays, and reservations and adaptive holds both happened."""
    from audit.replay import MemorySource, Verifier

    res = busy_small((("reserveAfter", "2m"),), (("mode", "adaptive"), ("maxWait", "10m")))
    codes = {b.code for r in res.records for b in r.blockers}
    assert {"reservation_made", "fallback_estimate"} <= codes
    results = list(Verifier(MemorySource(res.events)).run(res.records))
    assert [r.decision_id for r in results if not r.match] == []
