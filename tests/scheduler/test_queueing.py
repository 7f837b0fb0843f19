"""Queueing per tenant: best-effort FIFO lets a pod that fits pass a head that does not; strict
FIFO holds the tenant; a pod that failed is tried again only when a change may help it."""

from __future__ import annotations

import pytest

from audit.policy import PolicyError, parse_policy
from tests.scheduler.worlds import cluster, hold, submit

NODES = ("h100-000", "h100-001", "a100-000", "a100-001", "l40s-000")


def _three_free_per_node(mode: str):  # noqa: ANN202
    """Every DRA node keeps 3 free GPUs: a 4-GPU pod fits nowhere, a 1-GPU pod anywhere."""
    sim = cluster(queueing={"mode": mode})
    for node in NODES:
        hold(sim, node, [0, 1, 2, 3, 4])
    return sim


def _records(sim):  # noqa: ANN001, ANN202
    return [(r.pod, r.attempt, r.outcome) for r in sim.records]


@pytest.mark.parametrize(("mode", "expected"), [
    pytest.param("best-effort", [("big", 1, "unschedulable"), ("small", 1, "allocated")],
                 id="best-effort-places-the-pod-behind-a-blocked-head"),
    pytest.param("strict", [("big", 1, "unschedulable")], id="strict-holds-the-tenant-behind-its-head"),
])
def test_a_blocked_head_with_a_fitting_pod_behind_it(mode, expected):
    sim = _three_free_per_node(mode)
    submit(sim, "big", size=4)
    sim.now += 1000
    submit(sim, "small", size=1)
    sim.schedule_pass()
    assert _records(sim) == expected
    assert sorted(sim.world.pending) == (["alpha/big"] if mode == "best-effort" else ["alpha/big", "alpha/small"])


def test_the_skip_is_evidence_in_the_record_that_overtook():
    sim = _three_free_per_node("best-effort")
    submit(sim, "big", size=4)
    sim.now += 60_000
    submit(sim, "small", size=1)
    sim.schedule_pass()
    placed = sim.records[-1]
    skip = [b for b in placed.blockers if b.code == "queue_skip"]
    assert len(skip) == 1
    assert (skip[0].tier, skip[0].detail) == (-1, {"older_pending": 1, "oldest": "alpha/big", "oldest_wait_ms": 60_000})
    assert placed.message.endswith(", ahead of 1 older pending pod(s) of tenant alpha (oldest alpha/big)")
    assert placed.output_digest == placed.compute_output_digest()


def test_a_placement_with_no_older_pod_pending_carries_no_skip():
    sim = _three_free_per_node("best-effort")
    submit(sim, "small", size=1)
    sim.schedule_pass()
    assert [b.code for b in sim.records[-1].blockers] == []


def test_a_change_that_cannot_help_a_failed_pod_costs_no_attempt():
    sim = _three_free_per_node("best-effort")
    submit(sim, "big", size=4)
    submit(sim, "big-twin", size=4)  # same shape: found unfit with the first, in the same pass
    sim.schedule_pass()
    assert _records(sim) == [("big", 1, "unschedulable"), ("big-twin", 1, "unschedulable")]
    # one more free GPU on a node leaves 4 free nowhere... until a second node is freed to 8
    sim.emit("ResourceClaim", "ops", "held-h100-000-0-1-2-3-4", None, "delete")
    hold(sim, "h100-000", [0, 1, 2, 3, 4, 5])  # 2 free there now: still no node with 4
    sim.pending.wake()
    sim.schedule_pass()
    assert len(sim.records) == 2  # neither pod was tried: no node can hold 4
    sim.emit("ResourceClaim", "ops", "held-a100-000-0-1-2-3-4", None, "delete")
    sim.pending.wake()
    sim.schedule_pass()
    # a100-000 has 8 free: the older pod goes first and takes 4, the twin the other 4
    assert _records(sim)[2:] == [("big", 2, "allocated"), ("big-twin", 2, "allocated")]


def test_strict_mode_tries_only_the_head_after_a_change():
    sim = _three_free_per_node("strict")
    submit(sim, "big", size=4)
    sim.now += 1000
    submit(sim, "small", size=1)
    sim.schedule_pass()
    sim.pending.wake()
    sim.schedule_pass()
    assert _records(sim) == [("big", 1, "unschedulable"), ("big", 2, "unschedulable")]


def _doc(**spec):  # noqa: ANN003, ANN202
    return {"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "p"},
            "spec": {"version": "1", **spec}}


@pytest.mark.parametrize(("spec", "mode"), [
    pytest.param({}, "best-effort", id="default-is-best-effort"),
    pytest.param({"queueing": {"mode": "strict"}}, "strict", id="strict-on-request"),
])
def test_queueing_mode_in_the_policy(spec, mode):
    assert parse_policy(_doc(**spec)).queueing_mode == mode


def test_the_default_queueing_mode_leaves_the_digest_as_it_was():
    assert parse_policy(_doc(queueing={"mode": "best-effort"})).digest == parse_policy(_doc()).digest
    assert parse_policy(_doc(queueing={"mode": "strict"})).digest != parse_policy(_doc()).digest


@pytest.mark.parametrize(("queueing", "message"), [
    ({"mode": "fifo"}, "Policy p: spec.queueing.mode: must be one of best-effort, strict (got 'fifo')"),
    ({"mode": "strict", "order": 1}, "Policy p: spec.queueing.order: unknown field"),
])
def test_a_bad_queueing_field_is_named(queueing, message):
    with pytest.raises(PolicyError) as exc:
        parse_policy(_doc(queueing=queueing))
    assert str(exc.value) == message

