"""Legacy nvidia.com/gpu pods are decided by count only and recorded on the device-plugin track."""

from tests.scheduler.worlds import cluster, decide_and_bind, submit


def test_device_plugin_pod_counts_only():
    sim = cluster()
    r = decide_and_bind(sim, submit(sim, "legacy-1", size=3, device_plugin=True)).record
    assert (r.outcome, r.track, r.node, r.allocated_model, r.devices) == ("allocated", "device-plugin", "l4-dp-000",
                                                                            "L4", [])
    assert r.tiers[0].reasons == {"not_reached": 1, "selected": 3}
    assert sim.world.dp_used["l4-dp-000"] == 3
    r2 = decide_and_bind(sim, submit(sim, "legacy-2", size=2, device_plugin=True)).record
    assert (r2.outcome, r2.retry_class) == ("unschedulable", "unschedulable")
    r3 = decide_and_bind(sim, submit(sim, "legacy-3", size=5, device_plugin=True)).record
    assert r3.retry_class == "terminal"


def test_a_device_plugin_pod_is_woken_only_by_room_on_nodes_it_may_use():
    """Its nodeSelector pins H100: a free L4 node cannot place it, so no attempt is spent on it."""
    from audit.scheduler.engine import decide, may_place
    from audit.world import World
    from tests.metrics.eventlog import Log

    log = Log().dp_nodes("H100", 1, 8).dp_nodes("L4", 1, 8)
    log.at(0).dp_pod("team-a/big", 8).bind("team-a/big", "h100-dp-0")
    log.at(1).dp_pod("team-a/pinned", 2, nodeSelector={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"})
    log.dp_pod("team-a/any", 2)
    world = World("c1")
    for ev in log.events:
        world.apply(ev)
    assert world.dp_used == {"h100-dp-0": 8}
    assert not may_place(world, "team-a/pinned", log.now)
    assert decide(world, "team-a/pinned", 1, log.now).record.outcome == "unschedulable"
    assert may_place(world, "team-a/any", log.now)
    assert decide(world, "team-a/any", 1, log.now).record.node == "l4-dp-0"
