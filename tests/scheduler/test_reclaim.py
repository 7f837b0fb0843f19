"""Reclaim: a tenant within its nominal quota preempts pods of tenants borrowing beyond theirs,
choosing victims by the stated least-damage contract, never below a victim tenant's nominal and
never a pod younger than ``minRuntime``; the preemption is a record of its own and replays."""

from __future__ import annotations

from typing import Any

import pytest

from audit.scheduler.engine import decide
from audit.scheduler.loop import PodState
from ingest.simulate.loop import Job
from tests.scheduler.worlds import cluster, hold, submit

MINUTE = 60_000
OTHER_NODES = ("a100-000", "a100-001", "l40s-000")


def _tenants(alpha: int = 8, beta: int = 8) -> list[dict[str, Any]]:
    return [{"name": "alpha", "namespaces": ["alpha"], "weight": 1, "quotas": {"H100": {"nominal": alpha}}},
            {"name": "beta", "namespaces": ["beta"], "weight": 1, "quotas": {"H100": {"nominal": beta}}}]


def _cluster(enabled: bool = True, min_runtime: str = "10m", **tenants: int):  # noqa: ANN202
    """The small cluster with only its 16 H100 usable by tenants (the rest held by another scheduler)."""
    sim = cluster(tenants=_tenants(**tenants), preemption={"enabled": enabled, "minRuntime": min_runtime})
    for node in OTHER_NODES:
        hold(sim, node, list(range(8)))
    return sim


def _run(sim, namespace: str, name: str, node: str, devices: list[int], started_min_ago: int) -> str:  # noqa: ANN001
    """A pod running on ``node`` with devices ``gpu-<i>``, as the scheduler's bind wrote it, started
    ``started_min_ago`` minutes before the simulator's current time."""
    now = sim.now
    sim.now = now - started_min_ago * MINUTE
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": f"{name}-gpu", "namespace": namespace, "uid": f"uid-{name}-gpu"},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                           "count": len(devices)}}]}},
             "status": {"allocation": {"devices": {"results": [
                 {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": f"gpu-{i}"} for i in devices],
                 "config": []}, "nodeSelector": None},
                 "reservedFor": [{"resource": "pods", "name": name, "uid": f"uid-{name}"}]}}
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                        "creationTimestamp": "2026-11-01T00:00:00Z"},
           "spec": {"containers": [{"name": "main"}], "nodeName": node,
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "h100-first"}]},
           "status": {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": f"{name}-gpu"}]}}
    sim.emit("ResourceClaim", namespace, f"{name}-gpu", claim)
    sim.emit("Pod", namespace, name, pod)
    sim.now = now
    key = f"{namespace}/{name}"
    sim.pods[key] = PodState(node=node)
    sim.jobs[key] = Job(name, namespace, now - started_min_ago * MINUTE, len(devices), 3_600_000, "h100-first")
    return key


def _victims(rec) -> list[str]:  # noqa: ANN001
    return [b.detail["pod"] for b in rec.blockers if b.code == "reclaim_victim"]


def _fill(sim, layout: dict[str, list[tuple[str, int, int]]]) -> None:  # noqa: ANN001
    """``node -> [(pod name, GPUs, minutes running)]`` for tenant beta, devices in order."""
    for node, pods in layout.items():
        first = 0
        for name, gpus, age in pods:
            _run(sim, "beta", name, node, list(range(first, first + gpus)), age)
            first += gpus


# Alpha (nominal 8, using none) wants H100 while beta holds all 16 H100 (nominal 8: it borrows 8).
CHOICES = [
    pytest.param(4, {"h100-000": [("b1", 1, 60), ("b2", 1, 60), ("b3", 1, 60), ("b4", 1, 60), ("b5", 4, 60)],
                     "h100-001": [("c1", 8, 60)]},
                 ["beta/b5"], id="fewest-victims-one-4gpu-pod-before-four-1gpu-pods"),
    pytest.param(4, {"h100-000": [("b1", 4, 60), ("b2", 4, 60)], "h100-001": [("c1", 4, 30), ("c2", 4, 90)]},
                 ["beta/c1"], id="then-least-device-time-lost"),
    pytest.param(2, {"h100-000": [("b1", 2, 40), ("b2", 6, 90)], "h100-001": [("c1", 4, 20), ("c2", 4, 90)]},
                 ["beta/c1"], id="then-the-youngest-at-equal-device-time"),
    pytest.param(4, {"h100-000": [("b1", 4, 30), ("b2", 4, 90)], "h100-001": [("a1", 4, 30), ("a2", 4, 90)]},
                 ["beta/a1"], id="then-by-namespace-and-name"),
    # b1 and c1 together would lose the least device-time, but they run on two nodes
    pytest.param(6, {"h100-000": [("b1", 4, 20), ("b2", 4, 90)], "h100-001": [("c1", 4, 20), ("c2", 4, 90)]},
                 ["beta/b1", "beta/b2"], id="victims-all-on-one-node"),
]


@pytest.mark.parametrize(("size", "layout", "victims"), CHOICES)
def test_victims_are_chosen_by_the_contract(size, layout, victims):
    sim = _cluster()
    _fill(sim, layout)
    key = submit(sim, "want", namespace="alpha", size=size)
    d = decide(sim.world, key, 1, sim.now)
    assert d.record.outcome == "preempted"
    assert _victims(d.record) == victims
    assert d.preempts == victims


@pytest.mark.parametrize(("setup", "size"), [
    pytest.param({"enabled": False}, 4, id="not-when-disabled"),
    pytest.param({"alpha": 2, "beta": 14}, 4, id="not-when-the-preemptor-would-exceed-its-nominal"),
    pytest.param({"alpha": 4, "beta": 12}, 8, id="not-for-a-pod-larger-than-the-preemptors-nominal"),
    pytest.param({"min_runtime": "61m"}, 4, id="min-runtime-protects-younger-pods"),
])
def test_no_preemption(setup, size):
    sim = _cluster(**setup)
    _fill(sim, {"h100-000": [("b1", 8, 60)], "h100-001": [("c1", 4, 60), ("c2", 4, 60)]})
    key = submit(sim, "want", namespace="alpha", size=size)
    d = decide(sim.world, key, 1, sim.now)
    assert (d.record.outcome, d.preempts) == ("unschedulable", [])
    assert not any(b.code.startswith("reclaim") for b in d.record.blockers)


def test_min_runtime_is_inclusive():
    sim = _cluster(min_runtime="60m")
    _fill(sim, {"h100-000": [("b1", 8, 60)], "h100-001": [("c1", 4, 60), ("c2", 4, 61)]})
    d = decide(sim.world, submit(sim, "want", namespace="alpha", size=4), 1, sim.now)
    assert d.preempts == ["beta/c1"]


def test_never_below_a_victim_tenants_nominal():
    # beta's nominal is 12 and it uses 16: it borrows 4. Evicting its 8-GPU pod would leave it at 8,
    # so the 4-GPU pod goes even though the 8-GPU one is younger.
    sim = _cluster(alpha=4, beta=12)
    _fill(sim, {"h100-000": [("b1", 8, 20)], "h100-001": [("c1", 4, 60), ("c2", 4, 90)]})
    key = submit(sim, "want", namespace="alpha", size=4)
    d = decide(sim.world, key, 1, sim.now)
    assert _victims(d.record) == ["beta/c1"]


def test_no_victim_set_keeps_the_victim_tenant_at_nominal():
    sim = _cluster(alpha=4, beta=12)
    _fill(sim, {"h100-000": [("b1", 8, 20)], "h100-001": [("c1", 6, 60), ("c2", 2, 90)]})
    # beta borrows 4: each set that frees 4 H100 on one node takes it below 12 except none here
    key = submit(sim, "want", namespace="alpha", size=4)
    d = decide(sim.world, key, 1, sim.now)
    assert (d.record.outcome, d.preempts) == ("unschedulable", [])


def test_the_preemption_record_carries_its_evidence():
    sim = _cluster()
    _fill(sim, {"h100-000": [("b1", 8, 60)], "h100-001": [("c1", 4, 30), ("c2", 4, 90)]})
    key = submit(sim, "want", namespace="alpha", size=4)
    rec = decide(sim.world, key, 1, sim.now).record
    assert (rec.outcome, rec.node, rec.tier_index, rec.retry_class) == ("preempted", "h100-001", 0, "")
    assert [(b.code, b.tier, b.detail) for b in rec.blockers if b.code.startswith("reclaim")] == [
        ("reclaim", 0, {"model": "H100", "node": "h100-001", "used": 0, "requested": 4, "nominal": 8,
                        "min_runtime_ms": 600_000, "victims": 1, "device_ms": 4 * 30 * MINUTE}),
        ("reclaim_victim", -1, {"pod": "beta/c1", "tenant": "beta", "node": "h100-001", "model": "H100", "count": 4,
                                "runtime_ms": 30 * MINUTE, "device_ms": 4 * 30 * MINUTE, "used": 16, "nominal": 8,
                                "cause": "borrowing_above_nominal"})]
    assert rec.message == ("reclaim: tenant alpha is within its nominal H100 quota; preempting 1 pod(s) of "
                           "borrowing tenant(s) beta on node h100-001 (beta/c1)")
    assert rec.policy_digest == sim.world.policy.digest


def test_the_loop_evicts_the_victims_and_places_the_preemptor():
    sim = _cluster()
    _fill(sim, {"h100-000": [("b1", 8, 60)], "h100-001": [("c1", 4, 30), ("c2", 4, 90)]})
    before = len(sim.events)
    key = submit(sim, "want", namespace="alpha", size=4)
    sim.schedule_pass()
    assert [(r.pod, r.outcome, r.attempt) for r in sim.records] == [("want", "preempted", 1), ("want", "allocated", 2)]
    assert sim.records[1].node == "h100-001"
    evicted = [(e.object_kind, e.name, e.type, (e.payload.get("status") or {}).get("phase"))
               for e in sim.events[before:] if e.namespace == "beta"]
    assert evicted == [("Pod", "c1", "upsert", "Failed"), ("Pod", "c1", "delete", None),
                       ("ResourceClaim", "c1-gpu", "delete", None)]
    condition = next(e for e in sim.events[before:] if e.name == "c1" and e.type == "upsert").payload["status"]["conditions"]
    assert [(c["type"], c["reason"]) for c in condition] == [("DisruptionTarget", "PreemptionByScheduler")]
    assert sim.world.model_in_use("beta", "H100") == 12 and sim.world.model_in_use("alpha", "H100") == 4
    assert key in sim.pods and sim.pods[key].node == "h100-001"
    assert sim.preempted == 1


def test_the_job_of_a_preempted_pod_runs_again_from_the_start():
    sim = _cluster()
    _fill(sim, {"h100-000": [("b1", 8, 60)], "h100-001": [("c1", 4, 30), ("c2", 4, 90)]})
    submit(sim, "want", namespace="alpha", size=4)
    start = sim.now
    sim.schedule_pass()
    sim.run_until(start + 1001)  # the job controller re-creates the pod a second later
    again = sim.jobs["beta/c1-p1"]
    assert (again.arrival_ms, again.duration_ms, again.size) == (start + 1000, 3_600_000, 4)
    assert sim.world.pending.get("beta/c1-p1") == start + 1000


def test_why_says_what_was_reclaimed_and_from_whom():
    from audit.explain import explain_record

    sim = _cluster()
    _fill(sim, {"h100-000": [("b1", 8, 60)], "h100-001": [("c1", 4, 30), ("c2", 4, 90)]})
    rec = decide(sim.world, submit(sim, "want", namespace="alpha", size=4), 1, sim.now).record
    summary = explain_record(rec, "H100").summary
    assert ("reclaiming 4 H100 within nominal quota (0/8 used) on node h100-001; preempting pod beta/c1 of "
            "tenant beta (4 H100, running 30 min; its tenant uses 16 of nominal 8)") in summary
    assert summary.endswith("Pod not allocated yet: preempted pods on node h100-001 to reclaim quota under policy 1.")


def test_a_tenant_never_sees_the_pods_or_tenant_it_preempted():
    from audit.api.tenant_view import tenant_view

    sim = _cluster()
    _fill(sim, {"h100-000": [("b1", 8, 60)], "h100-001": [("c1", 4, 30), ("c2", 4, 90)]})
    rec = decide(sim.world, submit(sim, "want", namespace="alpha", size=4), 1, sim.now).record
    view = tenant_view(rec.to_dict())
    victim = next(b for b in view["blockers"] if b["code"] == "reclaim_victim")
    assert victim["detail"] == {"pod": "(others)", "tenant": "(others)", "node": "h100-001", "model": "H100",
                                "count": 4, "runtime_ms": 30 * MINUTE, "device_ms": 4 * 30 * MINUTE, "used": 16,
                                "nominal": 8, "cause": "borrowing_above_nominal"}
    assert "beta" not in view["message"] and "c1" not in view["message"]
    assert view["message"] == ("reclaim: tenant alpha is within its nominal H100 quota; preempting 1 pod(s) of "
                               "borrowing tenant(s) (others) on node h100-001 ((others))")


def test_a_preemption_record_goes_through_the_store_unchanged(store):
    from audit.records import to_jsonl
    from audit.store.filters import DecisionFilter

    sim = _cluster()
    _fill(sim, {"h100-000": [("b1", 8, 60)], "h100-001": [("c1", 4, 30), ("c2", 4, 90)]})
    rec = decide(sim.world, submit(sim, "want", namespace="alpha", size=4), 1, sim.now).record
    result = store.ingest_jsonl(to_jsonl([rec]).encode(), "records", "test", compressed=False)
    assert (result.accepted, result.quarantined) == (1, 0)
    assert store.get_decision(rec.decision_id, "alpha") == rec
    assert store.get_decision(rec.decision_id, "beta") is None
    listed, _ = store.list_decisions(DecisionFilter(outcome="preempted"), None, 10)
    assert [r.decision_id for r in listed] == [rec.decision_id]


@pytest.mark.parametrize(("enabled", "records"), [
    pytest.param(True, [("want", "unschedulable", 1), ("want", "preempted", 2), ("want", "allocated", 3)],
                 id="reclaim-on-a-parked-pod-that-may-reclaim-is-tried-on-a-wake"),
    pytest.param(False, [("want", "unschedulable", 1)], id="reclaim-off-a-wake-that-cannot-help-tries-nothing"),
])
def test_a_wake_retries_a_pod_that_may_reclaim(enabled, records):
    # the victims are too young at first; later a change that frees nothing the pod can use wakes the queues
    sim = _cluster(enabled=enabled, min_runtime="30m")
    _fill(sim, {"h100-000": [("b1", 8, 20)], "h100-001": [("c1", 4, 20), ("c2", 4, 20)]})
    submit(sim, "want", namespace="alpha", size=4)
    sim.schedule_pass()
    sim.now += 10 * MINUTE
    sim.emit("ResourceClaim", "ops", "held-a100-000-0-1-2-3-4-5-6-7", None, "delete")
    hold(sim, "a100-000", [0, 1, 2, 3, 4, 5, 6], name="ops-a100")  # one A100 free: not enough for 4
    sim.wake()
    sim.schedule_pass()
    assert [(r.pod, r.outcome, r.attempt) for r in sim.records] == records
