"""Reservations: a pod pending past ``queueing.reserveAfter`` gets devices set aside on the node
with the fewest missing; other pods are kept off them; the hold ends when the pod binds, fails or
is deleted; every step is evidence in a record and replays."""

from __future__ import annotations

import pytest

from audit.policy import PolicyError, parse_policy
from audit.world import World
from tests.scheduler.worlds import cluster, hold, submit

NODES = ("h100-000", "h100-001", "a100-000", "a100-001", "l40s-000")
MINUTE = 60_000


def _busy(reserve_after: str = "5m", **queueing: object):  # noqa: ANN202
    """Every DRA node of the small cluster keeps 3 of its 8 GPUs free: a 4-GPU pod fits nowhere."""
    sim = cluster(queueing={"reserveAfter": reserve_after, **queueing})
    for node in NODES:
        hold(sim, node, [0, 1, 2, 3, 4])
    return sim


def _codes(rec, prefix: str = "reservation") -> list[tuple[str, dict]]:  # noqa: ANN001
    return [(b.code, b.detail) for b in rec.blockers if b.code.startswith(prefix)]


def _reserved_big(sim, name: str = "big", namespace: str = "alpha") -> str:  # noqa: ANN001
    key = submit(sim, name, namespace=namespace, size=4)
    sim.schedule_pass()  # the pass of its arrival: no node, too early to reserve
    sim.run_until(sim.now + 5 * MINUTE + 1)
    return key


@pytest.mark.parametrize(("waited_ms", "made"), [
    pytest.param(5 * MINUTE - 1, False, id="not-before-reserveAfter"),
    pytest.param(5 * MINUTE, True, id="made-once-reserveAfter-has-passed"),
])
def test_a_reservation_is_made_after_reserve_after(waited_ms, made):
    sim = _busy()
    key = submit(sim, "big", size=4)
    sim.schedule_pass()
    sim.now += waited_ms
    sim.try_to_reserve(key)
    sim.schedule_pass()
    rec = sim.records[-1]
    assert (rec.pod, rec.outcome) == ("big", "unschedulable")
    if made:
        assert _codes(rec) == [("reservation_made", {"node": "h100-000", "model": "H100", "count": 4, "missing": 1})]
        assert rec.message.endswith("; reserved h100-000 for 4 H100 (1 still in use)")
        assert sim.world.get("Reservation", "alpha", "big")["spec"]["node"] == "h100-000"
        assert sim.world.reserved_node == {key: "h100-000"}
    else:
        assert len(sim.records) == 1  # not tried again: nothing changed and it may not reserve yet
        assert sim.world.reservations == {}


def test_the_reserve_action_tries_a_parked_pod_when_its_wait_is_up():
    sim = _busy()
    _reserved_big(sim)
    assert [(r.pod, r.attempt, [c for c, _ in _codes(r)]) for r in sim.records] == [
        ("big", 1, []), ("big", 2, ["reservation_made"])]


@pytest.mark.parametrize(("held_elsewhere", "outcome", "node"), [
    pytest.param(False, "allocated", "h100-001", id="placed-on-another-node"),
    pytest.param(True, "unschedulable", "", id="waits-rather-than-take-reserved-devices"),
])
def test_a_reservation_is_honoured(held_elsewhere, outcome, node):
    sim = _busy()
    _reserved_big(sim)
    if held_elsewhere:  # only the reserved node has free H100 and A100 is full: the small pod must wait
        for n in NODES[1:]:
            hold(sim, n, [5, 6, 7], name=f"rest-{n}")
    submit(sim, "small", size=1)
    sim.schedule_pass()
    rec = sim.records[-1]
    assert (rec.pod, rec.outcome, rec.node) == ("small", outcome, node)
    assert _codes(rec) == [("reservation_held", {"node": "h100-000", "pod": "alpha/big", "model": "H100", "held": 3})]
    assert "3 device(s) on h100-000 reserved for alpha/big" in rec.message
    held = {f"gpu.nvidia.com/h100-000/gpu-{i}" for i in (5, 6, 7)}
    assert not held & {d.device for d in rec.devices}
    assert not held & set(sim.world.allocated_by)


def test_devices_beyond_the_reserved_count_stay_free_for_others():
    sim = _busy()
    _reserved_big(sim)
    sim.emit("ResourceClaim", "ops", "held-h100-000-0-1-2-3-4", None, "delete")
    hold(sim, "h100-000", [0])  # 7 free on h100-000: 4 held for big, 3 free for anyone
    for n in NODES[1:]:
        hold(sim, n, [5, 6, 7], name=f"rest-{n}")
    for i in range(3):
        submit(sim, f"small-{i}", namespace="beta", size=1)
    sim.wake()
    sim.schedule_pass()  # whatever the order, the small pods take the 3 devices big does not need
    assert sorted((r.pod, r.outcome, r.node) for r in sim.records[-4:]) == [
        ("big", "allocated", "h100-000"), *((f"small-{i}", "allocated", "h100-000") for i in range(3))]
    assert sim.world.free_healthy("h100-000", "H100") == 0


@pytest.mark.parametrize("how", ["bound", "deleted", "failed"])
def test_a_reservation_is_released(how):
    sim = _busy()
    key = _reserved_big(sim)
    if how == "bound":
        sim.now += MINUTE
        sim.emit("ResourceClaim", "ops", "held-h100-000-0-1-2-3-4", None, "delete")
        hold(sim, "h100-000", [0, 1, 2, 3])
        sim.wake()
        sim.schedule_pass()
        rec = sim.records[-1]
        assert (rec.pod, rec.outcome, rec.node) == ("big", "allocated", "h100-000")
        assert _codes(rec) == [("reservation_released", {"node": "h100-000", "on_reserved_node": True,
                                                         "reserved_ms": MINUTE, "cause": "bound"})]
    elif how == "deleted":
        sim.remove(key)
    else:
        sim.fail(key)
    assert sim.world.get("Reservation", "alpha", "big") is None
    assert sim.world.reservations == {} and sim.world.reserved_node == {}
    deletes = [e for e in sim.events if e.object_kind == "Reservation" and e.type == "delete"]
    assert [(e.namespace, e.name) for e in deletes] == [("alpha", "big")]
    if how != "bound":  # the held devices are anyone's again
        submit(sim, "small", namespace="beta", size=3)
        for n in NODES[1:]:
            hold(sim, n, [5, 6, 7], name=f"rest-{n}")
        sim.schedule_pass()
        assert (sim.records[-1].pod, sim.records[-1].node) == ("small", "h100-000")
        assert _codes(sim.records[-1]) == []


def test_one_reservation_per_node_the_next_pod_gets_the_next_best_node():
    sim = _busy()
    _reserved_big(sim)
    _reserved_big(sim, "large", namespace="beta")
    assert sim.world.reserved_node == {"alpha/big": "h100-000", "beta/large": "h100-001"}


def test_a_tenant_holds_at_most_its_limit():
    sim = _busy(maxReservationsPerTenant=1)
    _reserved_big(sim)
    key = submit(sim, "big-2", size=4)
    sim.now += 5 * MINUTE
    sim.wake()  # a change: the second big pod is tried, waited long enough, and may not reserve
    sim.pending.wake()
    sim._forced.add(key)
    sim.schedule_pass()
    rec = sim.records[-1]
    assert rec.pod == "big-2"
    assert _codes(rec) == [("reservation_unavailable", {"cause": "tenant_limit", "reservations": 1, "limit": 1})]
    assert rec.message.endswith("; no reservation (tenant_limit)")
    assert list(sim.world.reserved_node) == ["alpha/big"]


def test_when_a_reservation_ends_the_tenants_next_eligible_pod_reserves():
    sim = _busy()
    big = _reserved_big(sim)
    submit(sim, "big-2", size=4)
    sim.run_until(sim.now + 5 * MINUTE + 1)  # its reserve action finds the tenant's slot taken
    assert list(sim.world.reserved_node) == [big]
    sim.remove(big)
    sim.schedule_pass()
    assert sim.world.reserved_node == {"alpha/big-2": "h100-000"}
    assert _codes(sim.records[-1]) == [("reservation_made", {"node": "h100-000", "model": "H100", "count": 4,
                                                             "missing": 1})]


def test_a_world_rebuilt_from_a_snapshot_has_the_same_reservations():
    sim = _busy()
    _reserved_big(sim)
    rebuilt = World.from_snapshot(sim.world.snapshot())
    assert rebuilt.reservations == sim.world.reservations
    assert rebuilt.reserved_node == sim.world.reserved_node


def test_without_reserve_after_a_reservation_in_the_world_holds_nothing():
    sim = _busy()
    _reserved_big(sim)
    doc = sim.world.objects["Policy"][sim.world.policy_key]
    off = {**doc, "spec": {**doc["spec"], "version": "2", "queueing": {}}}
    sim.emit("Policy", "", doc["metadata"]["name"], off)
    for n in NODES[1:]:
        hold(sim, n, [5, 6, 7], name=f"rest-{n}")
    submit(sim, "small", namespace="beta", size=1)
    sim.schedule_pass()
    assert (sim.records[-1].pod, sim.records[-1].node) == ("small", "h100-000")
    assert _codes(sim.records[-1]) == []


# ---- the policy ---------------------------------------------------------------------------------

def _doc(**spec):  # noqa: ANN003, ANN202
    return {"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "p"},
            "spec": {"version": "1", **spec}}


@pytest.mark.parametrize(("queueing", "after_ms", "limit"), [
    pytest.param({}, None, 1, id="absent-means-no-reservations"),
    pytest.param({"reserveAfter": "10m"}, 600_000, 1, id="a-duration"),
    pytest.param({"reserveAfter": "0s"}, 0, 1, id="zero-reserves-at-the-first-failure"),
    pytest.param({"reserveAfter": "30m", "maxReservationsPerTenant": 3}, 1_800_000, 3, id="with-a-tenant-limit"),
    pytest.param({"mode": "strict", "reserveAfter": "10m"}, 600_000, 1, id="strict-queueing-reserves-too"),
])
def test_reserve_after_in_the_policy(queueing, after_ms, limit):
    policy = parse_policy(_doc(queueing=queueing))
    assert (policy.reserve_after_ms, policy.max_reservations_per_tenant) == (after_ms, limit)


def test_a_policy_without_reserve_after_keeps_its_digest():
    assert parse_policy(_doc(queueing={"mode": "best-effort"})).digest == parse_policy(_doc()).digest
    assert parse_policy(_doc(queueing={"reserveAfter": "10m"})).digest != parse_policy(_doc()).digest


def test_the_policy_document_round_trips_reservations():
    from audit.policy import policy_document

    for queueing in ({}, {"reserveAfter": "10m", "maxReservationsPerTenant": 2}):
        policy = parse_policy(_doc(queueing=queueing))
        assert parse_policy(policy_document(policy)).digest == policy.digest


@pytest.mark.parametrize(("queueing", "message"), [
    ({"reserveAfter": "soon"}, "Policy p: spec.queueing.reserveAfter: "),
    ({"reserveAfter": "10m", "maxReservationsPerTenant": 0}, "Policy p: spec.queueing.maxReservationsPerTenant: "
                                                             "must be >= 1"),
    ({"reserveAfter": "10m", "maxReservationsPerTenant": "two"},
     "Policy p: spec.queueing.maxReservationsPerTenant: expected an integer, got str"),
])
def test_a_bad_reservation_field_is_named(queueing, message):
    with pytest.raises(PolicyError) as exc:
        parse_policy(_doc(queueing=queueing))
    assert str(exc.value).startswith(message)


_HEAD = "apiVersion: claimtrail.io/v1alpha1\nkind: Policy\nmetadata: {name: p}\nspec:\n  version: '1'\n"


@pytest.mark.parametrize(("queueing", "code", "err"), [
    pytest.param("{maxReservationsPerTenant: 2}", 2,
                 "Policy p: spec.queueing.maxReservationsPerTenant: has no effect without spec.queueing.reserveAfter "
                 "(no pod is ever reserved for)\n", id="a-limit-without-reservations-is-refused"),
    pytest.param("{mode: strict, reserveAfter: 10m, maxReservationsPerTenant: 2}", 0, "",
                 id="reservations-with-strict-queueing-pass"),
])
def test_policy_check_on_reservations(tmp_path, capsys, queueing, code, err):
    from audit.cli.main import main

    f = tmp_path / "p.yaml"
    f.write_text(_HEAD + f"  queueing: {queueing}\n")
    assert main(["policy", "check", str(f)]) == code
    got = capsys.readouterr().err
    assert got == (f"{f}: {err}" if err else "")


# ---- what users see -------------------------------------------------------------------------------

def _kept_off_record():  # noqa: ANN202
    sim = _busy()
    _reserved_big(sim)
    for n in NODES[1:]:
        hold(sim, n, [5, 6, 7], name=f"rest-{n}")
    submit(sim, "small", namespace="beta", size=1)
    sim.schedule_pass()
    return sim.records[-1]


def test_why_names_the_reservation_that_held_the_devices():
    from audit.explain import explain_record

    rec = _kept_off_record()
    body = explain_record(rec, "H100")
    assert {"code": "reservation_held", "tier": -1, "node": "h100-000", "pod": "alpha/big", "model": "H100",
            "held": 3} in body.blockers
    assert "3 H100 on node h100-000 reserved for pod alpha/big" in body.summary


@pytest.mark.parametrize(("namespace", "pod_shown"), [
    pytest.param("alpha", "alpha/big", id="the-tenant-sees-its-own-reserved-pod"),
    pytest.param("beta", "(others)", id="another-tenants-reserved-pod-is-hidden"),
])
def test_reservation_evidence_in_the_tenant_view(namespace, pod_shown):
    from audit.api.tenant_view import tenant_view

    sim = _busy()
    _reserved_big(sim)
    for n in NODES[1:]:
        hold(sim, n, [5, 6, 7], name=f"rest-{n}")
    submit(sim, "small", namespace=namespace, size=1)
    sim.schedule_pass()
    view = tenant_view(sim.records[-1].to_dict())
    [held] = [b for b in view["blockers"] if b["code"] == "reservation_held"]
    assert held["detail"] == {"node": "h100-000", "pod": pod_shown, "model": "H100", "held": 3}
    assert ("alpha/big" in view["message"]) == (pod_shown == "alpha/big")


@pytest.mark.parametrize(("fallback", "node", "model", "missing"), [
    pytest.param({"mode": "immediate"}, "a100-000", "A100", 1, id="the-open-tier-with-fewest-missing"),
    pytest.param({"mode": "strict"}, "h100-000", "H100", 2, id="only-the-preferred-model-while-holding-out-for-it"),
])
def test_the_reservation_goes_where_the_fewest_devices_are_missing(fallback, node, model, missing):
    """H100 nodes have 2 of 8 free, A100 and L40S nodes 3: a 4-GPU pod misses 2 H100 or 1 A100."""
    sim = cluster(queueing={"reserveAfter": "5m"}, fallback=fallback)
    for n in NODES:
        hold(sim, n, [0, 1, 2, 3, 4, 5] if n.startswith("h100") else [0, 1, 2, 3, 4])
    key = _reserved_big(sim)
    assert sim.world.reserved_node == {key: node}
    assert _codes(sim.records[-1]) == [("reservation_made", {"node": node, "model": model, "count": 4,
                                                             "missing": missing})]


def test_a_failed_bind_keeps_the_reservation_and_does_not_say_released():
    from audit.scheduler.engine import bind, decide

    sim = _busy()
    key = _reserved_big(sim)
    sim.emit("ResourceClaim", "ops", "held-h100-000-0-1-2-3-4", None, "delete")
    hold(sim, "h100-000", [0, 1, 2, 3])
    d = decide(sim.world, key, 3, sim.now)
    assert [c for c, _ in _codes(d.record)] == ["reservation_released"]
    taken = d.proposal.device_ids[0].rsplit("/", 1)[1]
    hold(sim, "h100-000", [int(taken.split("-")[1])], name="racer")  # another scheduler takes one first
    failed = bind(sim.world, d, sim.now)
    assert [b.code for b in failed.record.blockers][-1] == "binding_conflict"
    assert _codes(failed.record) == []
    assert sim.world.reserved_node == {key: "h100-000"}


@pytest.mark.parametrize(("asker", "reserved"), [
    pytest.param("beta/small", True, id="another-pod-sees-the-held-devices-in-use"),
    pytest.param("alpha/big", False, id="the-reserved-pod-sees-them-available"),
])
def test_why_from_the_world_reads_held_devices_as_in_use(asker, reserved):
    from audit.explain import explain
    from tests.scheduler.worlds import world_view

    sim = _busy()
    _reserved_big(sim)
    submit(sim, "small", namespace="beta", size=1)
    body = explain(world_view(sim.world), asker, "H100", policy=sim.world.policy, detail=True)
    rows = {d.device.rsplit("/", 1)[1]: (d.reason, d.detail.get("by")) for d in body.devices
            if d.node == "h100-000" and d.device.rsplit("-", 1)[1] in "567"}
    expected = ("in_use", "reserved for pod alpha/big") if reserved else ("available", None)
    assert rows == {f"gpu-{i}": expected for i in (5, 6, 7)}
    assert body.reasons["in_use"] == 10 + (3 if reserved else 0)  # 2 H100 nodes × 5 held by ops


def test_with_every_candidate_node_reserved_a_pod_gets_none():
    sim = cluster(queueing={"reserveAfter": "5m"}, fallback={"mode": "strict"})  # H100 only: two nodes
    for node in NODES:
        hold(sim, node, [0, 1, 2, 3, 4])
    _reserved_big(sim, "big", "alpha")
    _reserved_big(sim, "big", "beta")
    _reserved_big(sim, "big", "gamma")
    assert sim.world.reserved_node == {"alpha/big": "h100-000", "beta/big": "h100-001"}
    assert _codes(sim.records[-1]) == [("reservation_unavailable", {"cause": "no_node", "reservations": 0,
                                                                    "limit": 1})]


@pytest.mark.parametrize(("asker", "node"), [
    pytest.param("beta/small", "h100-001", id="another-pod-would-go-elsewhere"),
    pytest.param("alpha/big", "", id="the-reserved-pod-still-misses-one"),
])
def test_would_get_now_leaves_held_devices_to_their_pod(asker, node):
    from audit.explain import would_get_now
    from audit.scheduler.engine import decide
    from tests.scheduler.worlds import world_view

    sim = _busy()
    _reserved_big(sim)
    submit(sim, "small", namespace="beta", size=1)
    got = would_get_now(world_view(sim.world), asker, policy=sim.world.policy)
    assert (got["result"], got["node"]) == (("allocated", node) if node else ("unschedulable", ""))
    assert decide(sim.world, asker, 9, sim.now).record.node == node  # what the engine decides


def test_a_reservation_event_passes_ingest_validation_and_a_bad_one_is_named():
    from audit.events import EventError, validate_event

    sim = _busy()
    _reserved_big(sim)
    [made] = [e for e in sim.events if e.object_kind == "Reservation"]
    assert validate_event(made.to_dict()) == made
    bad = made.to_dict()
    bad["payload"] = {**made.payload, "spec": {**made.payload["spec"], "count": "four"}}
    with pytest.raises(EventError) as exc:
        validate_event(bad)
    assert str(exc.value) == "WorldEvent: payload.spec.count: expected int, got str"


def test_a_bind_failing_for_good_says_the_reservation_ended_with_the_pod():
    from audit.scheduler.engine import bind, decide

    sim = _busy()
    key = _reserved_big(sim)
    sim.emit("ResourceClaim", "ops", "held-h100-000-0-1-2-3-4", None, "delete")
    hold(sim, "h100-000", [0, 1, 2, 3])
    d = decide(sim.world, key, 3, sim.now)
    hold(sim, "h100-000", [int(d.proposal.device_ids[0].rsplit("-", 1)[1])], name="racer")
    failed = bind(sim.world, d, sim.now, failures_before=sim.world.policy.max_attempts - 1)  # the budget's last
    assert failed.record.retry_class == "terminal"
    assert _codes(failed.record) == [("reservation_released", {"node": "h100-000", "on_reserved_node": False,
                                                               "reserved_ms": 0, "cause": "failed"})]


def test_taking_the_last_parked_pod_of_a_group_leaves_no_empty_group_for_a_wake():
    from audit.scheduler.pending import PendingQueues

    queues = PendingQueues()
    queues.put_back("alpha", 1, "alpha/big", strict=False, group="spec-a")
    queues.discard("alpha/big")  # what a reserve action does before queueing the pod
    asked: list[list[tuple[int, str]]] = []
    queues.wake(lambda tenant, pods: asked.append(pods) or pods)
    assert queues.parked == {} and asked == []


def test_a_tenant_at_its_fair_share_makes_no_reservation():
    """alpha holds every A100 and L40S (its usage history set to catch up at once): far above
    its half of the cluster while beta waits, so only beta's big pod reserves."""
    from audit.scheduler.engine import decide
    from audit.scheduler.queue import tenant_share

    sim = cluster(queueing={"reserveAfter": "5m"}, fairness={"mode": "drf", "usageHalfLife": "1ms"})
    for node in NODES[:2]:
        hold(sim, node, [0, 1, 2, 3, 4])
    for node in NODES[2:]:
        name = f"alpha-{node}"
        sim.emit("ResourceClaim", "alpha", name, {
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "alpha", "uid": f"uid-{name}"},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                          "count": 8}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": f"gpu-{i}"} for i in range(8)],
                "config": []}, "nodeSelector": None}}})
    alpha, beta = submit(sim, "big", "alpha", size=4), submit(sim, "big", "beta", size=4)
    sim.schedule_pass()
    sim.run_until(sim.now + 5 * MINUTE + 1)
    assert tenant_share(sim.world, sim.world.policy, "alpha", sim.now) >= 1.0
    assert sim.world.reserved_node == {beta: "h100-000"}
    # its reserve action tried nothing (it could only be refused); a decision now says why
    assert [r.attempt for r in sim.records if f"{r.namespace}/{r.pod}" == alpha] == [1]
    assert _codes(decide(sim.world, alpha, 2, sim.now).record) == [
        ("reservation_unavailable", {"cause": "at_fair_share", "reservations": 0, "limit": 1})]


def _alpha_above_its_share(**queueing: object):  # noqa: ANN202
    """alpha holds every A100 and L40S (its usage history set to catch up at once), far above its
    share; the H100 nodes keep 3 GPUs free each; fallback is strict, so a 4-GPU pod fits nowhere."""
    sim = cluster(queueing={"reserveAfter": "5m", **queueing}, fallback={"mode": "strict"},
                  fairness={"mode": "drf", "usageHalfLife": "1ms"})
    for node in NODES[:2]:
        hold(sim, node, [0, 1, 2, 3, 4])
    for node in NODES[2:]:
        hold(sim, node, list(range(8)), name=f"alpha-{node}", namespace="alpha")
    return sim


def _release_alphas(sim, claims: tuple[str, ...]):  # noqa: ANN001, ANN202
    """Every 10 s one of alpha's claims goes, each with its wake and pass; alpha's share after each."""
    from audit.scheduler.queue import tenant_share

    shares = []
    for claim in claims:
        sim.now += 10_000
        sim.emit("ResourceClaim", "alpha", claim, None, "delete")
        sim.wake()
        sim.schedule_pass()
        shares.append(round(tenant_share(sim.world, sim.world.policy, "alpha", sim.now), 4))
    return shares


@pytest.mark.parametrize("mode", ["strict", "best-effort"])
def test_a_pod_reserves_at_the_first_wake_at_which_its_tenant_may(mode):
    """alpha's 4-H100 pod (a strict head, or parked) is past ``reserveAfter`` while alpha holds
    more than its share (every A100 and L40S): its reserve action tries nothing, and releases of
    alpha's L40S and then of an A100 node help no placement. The first still leaves alpha above
    its share and writes nothing; at the second alpha is below it, and the pod reserves."""
    sim = _alpha_above_its_share(mode=mode)
    alpha, beta = submit(sim, "big", "alpha", size=4), submit(sim, "big", "beta", size=4)
    sim.schedule_pass()
    sim.run_until(sim.now + 5 * MINUTE + 1)
    assert sim.world.reserved_node == {beta: "h100-000"}
    assert _release_alphas(sim, ("alpha-l40s-000", "alpha-a100-001")) == [1.0337, 0.6598]
    assert [(r.attempt, r.time, [c for c, _ in _codes(r)]) for r in sim.records if f"{r.namespace}/{r.pod}" == alpha] == [
        (1, "2026-11-02T00:00:00.000Z", []), (2, "2026-11-02T00:05:20.000Z", ["reservation_made"])]
    assert sim.world.reserved_node == {beta: "h100-000", alpha: "h100-001"}


def test_a_window_does_not_ask_again_a_reservation_a_decision_answered_before_it():
    """alpha may hold two reservations; its second big pod, asked once both H100 nodes were held
    (``no_node``), is not asked again at later wakes, in the run or in a window starting after."""
    from audit.records import to_jsonl
    from audit.replay.whatif import whatif
    from audit.timestamps import parse_time_ms

    sim = _alpha_above_its_share(maxReservationsPerTenant=2)
    t0 = sim.now
    for name, namespace in (("big", "alpha"), ("big", "beta"), ("big2", "alpha")):
        submit(sim, name, namespace, size=4)
    sim.schedule_pass()
    sim.run_until(sim.now + 5 * MINUTE + 1)
    _release_alphas(sim, ("alpha-l40s-000", "alpha-a100-001", "alpha-a100-000"))
    asked = [(r.pod, r.time[14:19], [c.get("cause", c.get("node")) for _, c in _codes(r)])
             for r in sim.records if r.namespace == "alpha"]
    assert asked == [("big", "00:00", []), ("big2", "00:00", []), ("big", "05:20", ["h100-001"]),
                     ("big2", "05:30", ["no_node"])]
    since = t0 + 5 * MINUTE + 35_000
    start = World(sim.world.cluster)
    for e in sim.events:
        if parse_time_ms(e.time) < since:
            start.apply(e)
    sim.now = t0 + 6 * MINUTE
    sim.emit("ResourceClaim", "ops", "held-l40s-000-0-1-2-3-4", None, "delete")  # one more wake
    sim.wake()
    sim.schedule_pass()
    policy = [e for e in sim.events if e.object_kind == "Policy"][-1].payload
    w = whatif(start, sim.events, sim.records, policy, since, t0 + 7 * MINUTE)
    assert to_jsonl(w.counterfactual.records) == to_jsonl(w.recorded.records)


def test_a_pod_held_back_by_its_quota_once_eligible_is_not_asked_again_at_every_wake():
    """alpha's H100 quota (1) is full with its own pod and fallback is strict: its 1-GPU pod, past
    ``reserveAfter``, is deferred on quota, which no reservation helps. Releases elsewhere wake
    the queues three times; none decides it again."""
    alpha = {"name": "alpha", "namespaces": ["alpha"], "weight": 1,
             "quotas": {"H100": {"nominal": 1, "borrowingLimit": 0}}}
    sim = cluster(queueing={"reserveAfter": "1m"}, fallback={"mode": "strict"}, tenants=[alpha])
    hold(sim, "h100-000", [0], name="own", namespace="alpha")
    for node in NODES[2:]:
        hold(sim, node, [0])
    submit(sim, "job")
    sim.schedule_pass()
    sim.run_until(sim.now + 2 * MINUTE)
    for node in NODES[2:]:
        sim.now += 10_000
        sim.emit("ResourceClaim", "ops", f"held-{node}-0", None, "delete")
        sim.wake()
        sim.schedule_pass()
    assert [(r.pod, r.attempt, r.retry_class) for r in sim.records] == [("job", 1, "quota"), ("job", 2, "quota")]
