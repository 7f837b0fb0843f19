"""Changes between filter and bind are caught at bind, classified, retried with backoff or ended."""

import pytest

from audit.scheduler.engine import bind, bind_failures_before, decide
from ingest.simulate.loop import Simulator
from tests.scheduler.worlds import ALL_DEVICES, cluster, hold, scenario, submit


def _taint(sim, node, device):
    sim.taint_device(f"flap-{node}-{device}", node, device, "xid-79")


def _bump(sim, node, device):
    sim.bump_slice(node, upgrade=True)


def _take(sim, node, device):
    hold(sim, node, [int(device.split("-")[1])], name="racer")


def _lose(sim, node, device):
    sim.lose_node(node)


@pytest.mark.parametrize(
    ("interfere", "retry_class"),
    [
        pytest.param(_taint, "unhealthy", id="device-tainted-unhealthy"),
        pytest.param(_bump, "stale_slice", id="driver-upgrade-new-slice-generation"),
        pytest.param(_take, "binding_conflict", id="device-taken-by-another-claim"),
        pytest.param(_lose, "node_lost", id="node-deleted"),
    ],
)
def test_bind_time_failure_is_classified_and_retried(interfere, retry_class):
    sim = cluster()
    key = submit(sim, "job-1")
    d = decide(sim.world, key, 1, sim.now)
    assert d.proposal is not None and d.record.outcome == "allocated"
    _, node, device = d.proposal.device_ids[0].split("/")
    filter_seq = sim.world.seq
    interfere(sim, node, device)
    b = bind(sim.world, d, sim.now)
    r = b.record
    assert (r.outcome, r.retry_class, r.backoff_ms, b.events) == ("error", retry_class, 1000, [])
    assert r.seq == filter_seq
    assert r.blockers[-1].code == retry_class
    assert r.blockers[-1].detail["bind_seq"] == sim.world.seq
    assert r.output_digest == r.compute_output_digest()
    # the retry decides afresh against the changed world and lands elsewhere
    d2 = bind(sim.world, decide(sim.world, key, 2, sim.now + r.backoff_ms), sim.now + r.backoff_ms)
    assert d2.record.outcome == "allocated"
    moved = d2.record.devices[0].device != d.proposal.device_ids[0]
    assert moved == (retry_class != "stale_slice")  # a new generation of the same free device is fine


def test_backoff_is_capped_exponential_in_bind_failures_and_the_budget_counts_them_only():
    sim = cluster()  # backoff 1s, cap 8s, maxAttempts 3
    key = submit(sim, "job-1")
    seen = []
    for failures_before in (0, 1, 2):
        # the attempt number (passes made) is high: only bind failures spend the budget
        d = decide(sim.world, key, 20 + failures_before, sim.now)
        _, node, device = d.proposal.device_ids[0].split("/")
        _taint(sim, node, device)
        r = bind(sim.world, d, sim.now, failures_before=failures_before).record
        seen.append((r.retry_class, r.backoff_ms, r.blockers[-1].detail["bind_failure"]))
        assert bind_failures_before(r) == failures_before
    assert seen == [("unhealthy", 1000, 1), ("unhealthy", 2000, 2), ("terminal", 0, 3)]
    assert r.message == "bind-time re-check failed (unhealthy); terminal: bind failure 3 of 3"


class _RacingSimulator(Simulator):
    """Taints the proposed device between filter and bind when asked to (one race)."""

    race = False

    def before_bind(self, key, attempt, decision):  # noqa: ANN001, ANN201
        if self.race:
            self.race = False
            _, node, device = decision.proposal.device_ids[0].split("/")
            _taint(self, node, device)


@pytest.mark.parametrize("queueing", ["best-effort", "strict"])
def test_seven_queued_passes_and_one_bind_failure_leave_the_budget_almost_whole(queueing):
    sim = _RacingSimulator(scenario(queueing={"mode": queueing}), seed=7)
    sim.setup([])
    for node in ("h100-000", "h100-001", "a100-000", "a100-001"):
        hold(sim, node, ALL_DEVICES)
    # the L40S node is cordoned with its GPUs free: ``may_place`` (which reads no node filter)
    # lets every wake try the waiting pod, and every try finds no node
    l40s = sim.world.get("Node", "", "l40s-000")
    sim.emit("Node", "", "l40s-000", {**l40s, "spec": {**(l40s.get("spec") or {}), "unschedulable": True}})
    key = submit(sim, "job-1")
    for _ in range(7):
        sim.pending.wake()
        sim.schedule_pass()
    assert [(r.attempt, r.outcome) for r in sim.records] == [(i, "unschedulable") for i in range(1, 8)]
    sim.emit("ResourceClaim", "ops", "held-h100-000-0-1-2-3-4-5-6-7", None, "delete")
    sim.pending.wake()
    sim.race = True
    sim.schedule_pass()
    r = sim.records[-1]
    assert (r.attempt, r.outcome, r.retry_class, r.backoff_ms) == (8, "error", "unhealthy", 1000)
    assert r.message == "bind-time re-check failed (unhealthy); bind failure 1 of 3; retrying in 1000 ms"
    sim.run_until(sim.now + 1001)
    r = sim.records[-1]
    assert (r.attempt, r.outcome, r.node) == (9, "allocated", "h100-000")
    assert sim.pods[key].bind_failures == 1


def test_unsatisfiable_after_node_loss_is_terminal_at_once():
    sim = cluster()
    key = submit(sim, "job-1", size=8, template="a100-only")
    _lose(sim, "a100-001", "")
    d = decide(sim.world, key, 1, sim.now)
    assert d.proposal.node == "a100-000"
    _lose(sim, "a100-000", "")
    r = bind(sim.world, d, sim.now).record
    assert (r.outcome, r.retry_class) == ("error", "terminal")
    assert "no node in the cluster can satisfy" in r.message


def test_retryable_classes_come_from_the_policy():
    sim = cluster(retry={"backoffBase": "1s", "backoffCap": "8s", "maxAttempts": 3, "retryable": ["binding_conflict"]})
    key = submit(sim, "job-1")
    d = decide(sim.world, key, 1, sim.now)
    _, node, device = d.proposal.device_ids[0].split("/")
    _taint(sim, node, device)
    assert bind(sim.world, d, sim.now).record.retry_class == "terminal"


def test_unschedulable_when_every_device_is_unhealthy_is_not_terminal():
    sim = cluster()
    for node in ("h100-000", "h100-001", "a100-000", "a100-001", "l40s-000"):
        for i in ALL_DEVICES:
            _taint(sim, node, f"gpu-{i}")
    r = decide(sim.world, submit(sim, "job-1"), 1, sim.now).record
    assert (r.outcome, r.retry_class) == ("unschedulable", "unschedulable")
    assert r.tiers[0].reasons == {"unhealthy": 16}


def test_a_successful_bind_returns_a_new_decision_with_the_events_and_leaves_the_proposal_unchanged():
    sim = cluster()
    key = submit(sim, "job-1")
    proposed = decide(sim.world, key, 1, sim.now)
    bound = bind(sim.world, proposed, sim.now)
    assert bound is not proposed and proposed.events == []
    assert [(e.object_kind, e.name) for e in bound.events] == [("ResourceClaim", "job-1-gpu"), ("Pod", "job-1")]
    assert bound.record is proposed.record and bound.proposal is proposed.proposal
