"""With ``spec.fairness.deferAboveShare``, a pod deferred for fair share waits parked: no change
that leaves its tenant deferred tries it again (it would only write the same deferral), and it goes
back to its queue as soon as the deferral lifts, whether or not devices were freed."""

from __future__ import annotations

import pytest

from audit.events import EventType
from tests.scheduler.worlds import cluster, hold, submit


def _alpha_above_its_share_with_beta_waiting(queueing: str = "best-effort"):  # noqa: ANN202
    """alpha holds an H100 node and both A100 nodes (16 H100-eq against an entitlement of 9.1);
    beta waits for an A100; another scheduler holds the second H100 node, one device of it
    under a claim of its own; the L40S node is free."""
    sim = cluster(fairness={"mode": "drf", "deferAboveShare": True}, queueing={"mode": queueing})
    hold(sim, "h100-000", list(range(8)), namespace="alpha")
    for node in ("a100-000", "a100-001"):
        hold(sim, node, list(range(8)), namespace="alpha")
    one = hold(sim, "h100-001", [0])
    hold(sim, "h100-001", list(range(1, 8)))
    waiting = submit(sim, "waiting", namespace="beta", template="a100-only")
    sim.now += 1000
    submit(sim, "above", namespace="alpha")
    sim.schedule_pass()
    return sim, one, waiting


def _records(sim):  # noqa: ANN001, ANN202
    return [(r.namespace, r.pod, r.attempt, r.outcome, r.retry_class, r.node) for r in sim.records]


FIRST_PASS = [("beta", "waiting", 1, "unschedulable", "unschedulable", ""),
              ("alpha", "above", 1, "deferred", "fair_share", "")]


def test_a_release_that_leaves_the_tenant_deferred_does_not_decide_its_pod_again():
    sim, one, _ = _alpha_above_its_share_with_beta_waiting()
    assert _records(sim) == FIRST_PASS
    sim.now += 1000
    sim.emit("ResourceClaim", "ops", one, None, EventType.DELETE.value)  # an H100 device is free
    sim.wake()
    sim.schedule_pass()
    assert _records(sim) == FIRST_PASS
    assert sorted(sim.world.pending) == ["alpha/above", "beta/waiting"]


@pytest.mark.parametrize("queueing", ["best-effort", "strict"])
def test_the_deferred_pod_is_placed_once_the_tenant_below_its_share_has_nothing_pending(queueing):
    """beta's pod goes without freeing a device: nothing wakes the queues, yet the deferral lifts
    and alpha's pod takes a free L40S (its H100 quota is full, the A100s are held)."""
    sim, _, waiting = _alpha_above_its_share_with_beta_waiting(queueing)
    sim.now += 1000
    sim.remove(waiting)
    sim.schedule_pass()
    assert _records(sim) == [*FIRST_PASS, ("alpha", "above", 2, "allocated", "", "l40s-000")]
    assert sim.world.pending == {}
