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
