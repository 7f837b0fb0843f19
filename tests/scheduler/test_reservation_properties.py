"""Properties of reservations over random small workloads: holds are honoured, limits kept, every
reservation ends with its pod, and every decision replays."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.replay import MemorySource, Verifier
from audit.scheduler import reservations
from audit.world import World
from ingest.simulate.loop import Job
from tests.scheduler.worlds import cluster, hold

NODES = ["h100-000", "h100-001", "a100-000", "a100-001", "l40s-000"]
MINUTE = 60_000

occupancy = st.dictionaries(st.sampled_from(NODES), st.sets(st.integers(0, 7), min_size=1, max_size=7), max_size=5)
jobs = st.lists(st.tuples(st.sampled_from(["alpha", "beta", "gamma"]), st.sampled_from([1, 2, 4, 8]),
                          st.integers(0, 30), st.integers(5, 60)), min_size=4, max_size=25)


@settings(max_examples=25, deadline=None)
@given(occupancy, jobs, st.sampled_from(["0s", "3m", "10m"]), st.sampled_from([1, 2]),
       st.sampled_from(["immediate", "strict"]), st.sampled_from(["best-effort", "strict"]))
def test_reservations_hold_their_invariants(held, arrivals, reserve_after, limit, fallback, mode):
    sim = cluster(queueing={"mode": mode, "reserveAfter": reserve_after, "maxReservationsPerTenant": limit},
                  fallback={"mode": fallback})
    for node, devices in sorted(held.items()):
        hold(sim, node, sorted(devices))
    start = sim.now
    for i, (namespace, size, at_min, run_min) in enumerate(arrivals):
        sim.schedule(start + at_min * MINUTE, "arrive",
                     Job(f"job-{i}", namespace, start + at_min * MINUTE, size, run_min * MINUTE, "h100-first"))
    sim.run_until(start + 120 * MINUTE)

    world = World(sim.world.cluster)
    claims_of = {f"{r.namespace}/{c}": f"{r.namespace}/{r.pod}" for r in sim.records for c in r.claims}
    for ev in sim.events:
        if ev.object_kind == "ResourceClaim" and (ev.payload.get("status") or {}).get("allocation"):
            key = f"{ev.namespace}/{ev.name}"
            if key in claims_of and key not in world.claim_devices:
                taken = {f"{r['driver']}/{r['pool']}/{r['device']}"
                         for r in ev.payload["status"]["allocation"]["devices"]["results"]}
                others = {d for node in world.reservations
                          for d in reservations.held_devices(world, world.policy, node, claims_of[key])}
                assert not taken & others
        if ev.object_kind == "Reservation" and ev.type == "upsert":
            assert f"{ev.namespace}/{ev.name}" in world.pending  # made only for a pending pod
        world.apply(ev)
        live = list(world.reservations.values())
        assert len({h.node for h in live}) == len(live)
        tenants = [world.policy.tenant_for(h.pod.split("/")[0]) for h in live]
        assert all(tenants.count(t) <= limit for t in tenants)
    # a reservation outlives its pod's wait nowhere: what is left belongs to pods still pending
    assert set(world.reserved_node) <= set(world.pending)
    results = list(Verifier(MemorySource(sim.events)).run(sim.records))
    assert [r.decision_id for r in results if not r.match] == []
