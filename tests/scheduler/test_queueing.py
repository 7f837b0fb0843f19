"""Queueing per tenant: best-effort FIFO lets a pod that fits pass a head that does not; strict
FIFO holds the tenant; a pod that failed is tried again only when a change may help it."""

from __future__ import annotations

import pytest

from audit.policy import PolicyError, parse_policy
from audit.records import to_jsonl
from audit.replay.whatif import whatif
from audit.scheduler.pending import PendingQueues
from audit.timestamps import parse_time_ms
from audit.world import World
from tests.scheduler.worlds import ALL_DEVICES, MINUTE, cluster, h100_history, hold, submit

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


def test_strict_mode_tries_only_the_head_after_a_change_that_may_help_it():
    sim = _three_free_per_node("strict")
    submit(sim, "big", size=4)
    sim.now += 1000
    submit(sim, "small", size=1)
    sim.schedule_pass()
    sim.emit("ResourceClaim", "ops", "held-h100-000-0-1-2-3-4", None, "delete")
    hold(sim, "h100-000", [0, 1, 2, 3, 4, 5])  # 2 free there now: still no node with 4
    sim.wake()
    sim.schedule_pass()
    assert _records(sim) == [("big", 1, "unschedulable")]
    sim.emit("ResourceClaim", "ops", "held-a100-000-0-1-2-3-4", None, "delete")
    sim.wake()
    sim.schedule_pass()
    assert _records(sim) == [("big", 1, "unschedulable"), ("big", 2, "allocated"), ("small", 1, "allocated")]


ADAPTIVE = {"mode": "adaptive", "maxWait": "10m"}
WAIT_FOR_PREFERRED = {"mode": "wait-for-preferred", "wait": "10m"}
HELD = ("head", 1, "deferred")  # waiting for H100 (adaptive: expected free in 2 min)


@pytest.mark.parametrize(("queueing", "fallback", "after_unrelated", "after_h100"), [
    pytest.param("strict", ADAPTIVE, [HELD], [("head", 2, "allocated", "H100"), ("behind", 1, "allocated", "A100")],
                 id="strict-adaptive"),
    pytest.param("strict", WAIT_FOR_PREFERRED, [HELD],
                 [("head", 2, "allocated", "H100"), ("behind", 1, "allocated", "A100")], id="strict-wait-for-preferred"),
    pytest.param("strict", {"mode": "strict"}, [("head", 1, "unschedulable")],
                 [("head", 2, "allocated", "H100"), ("behind", 1, "allocated", "A100")], id="strict-strict-fallback"),
    pytest.param("best-effort", ADAPTIVE, [HELD, ("behind", 1, "allocated")], [("head", 2, "allocated", "H100")],
                 id="best-effort-adaptive"),
    pytest.param("best-effort", {"mode": "strict"}, [("head", 1, "unschedulable"), ("behind", 1, "allocated")],
                 [("head", 2, "allocated", "H100")], id="best-effort-strict-fallback"),
])
def test_a_held_head_writes_no_record_for_releases_it_cannot_use(queueing, fallback, after_unrelated, after_h100):
    """A head holding out for H100 while L40S devices are released one at a time (each a wake, as
    a release is in a run) is not decided again until an H100 is released; with strict queueing
    the tenant's younger pod, which an A100 would take at once, waits behind it until then."""
    sim = h100_history([30] * 16, 28, fallback, queueing={"mode": queueing})
    for i in ALL_DEVICES:
        hold(sim, "l40s-000", [i], name=f"l40s-{i}")
    submit(sim, "head")
    sim.now += 1000
    submit(sim, "behind", template="a100-only")
    sim.schedule_pass()
    for i in range(4):
        sim.now += 10_000
        sim.emit("ResourceClaim", "ops", f"l40s-{i}", None, "delete")
        sim.wake()
        sim.schedule_pass()
    assert _records(sim) == after_unrelated
    sim.now += 10_000
    sim.emit("ResourceClaim", "ops", "run-h100-001-3", None, "delete")
    sim.wake()
    sim.schedule_pass()
    assert [(r.pod, r.attempt, r.outcome, r.allocated_model) for r in sim.records[len(after_unrelated):]] == after_h100


def test_a_held_head_is_decided_again_when_its_hold_is_due():
    """With strict queueing the tenant's line waits on its head's hold, so the head is decided
    again at the hold's ``recheck_after_ms`` with no release: a new estimate at 2 min, and at
    6 min (the running H100 older than every finished one) the fallback to a free A100."""
    sim = h100_history([30] * 8 + [34] * 8, 28, ADAPTIVE, queueing={"mode": "strict"})
    submit(sim, "head")
    sim.schedule_pass()
    sim.run_until(sim.now + 12 * MINUTE)
    assert [(r.time, r.attempt, r.outcome, r.allocated_model, r.message) for r in sim.records] == [
        ("2026-11-02T01:02:00.000Z", 1, "deferred", "", "waiting for H100: expected free in 2m < maxWait 10m"),
        ("2026-11-02T01:04:00.000Z", 2, "deferred", "", "waiting for H100: expected free in 4m (+2m waited) < maxWait 10m"),
        ("2026-11-02T01:08:00.000Z", 3, "allocated", "A100", "allocated 1 device(s) on a100-000 from tier 1 (A100); "
                                                              "fell back from H100: no release expected to free 1 on one node"),
    ]


def _held_then_rechecked(queueing: str):  # noqa: ANN202
    """The strict test's world, each queueing mode: no release comes in 12 minutes."""
    sim = h100_history([30] * 8 + [34] * 8, 28, ADAPTIVE, queueing={"mode": queueing})
    submit(sim, "head")
    sim.schedule_pass()
    sim.run_until(sim.now + 12 * MINUTE)
    return [(r.time, r.attempt, r.outcome, r.allocated_model) for r in sim.records]


@pytest.mark.parametrize(("queueing", "expected"), [
    # at its recheck (2 min) the pod alone still holds (the release is now expected in 4 min):
    # nothing is decided; the wait reaching maxWait wakes it with no release, and it falls back
    pytest.param("best-effort", [("2026-11-02T01:02:00.000Z", 1, "deferred", ""),
                                 ("2026-11-02T01:12:00.000Z", 2, "allocated", "A100")],
                 id="best-effort-falls-back-at-max-wait"),
    pytest.param("strict", [("2026-11-02T01:02:00.000Z", 1, "deferred", ""),
                            ("2026-11-02T01:04:00.000Z", 2, "deferred", ""),
                            ("2026-11-02T01:08:00.000Z", 3, "allocated", "A100")],
                 id="strict-head-decided-at-each-recheck"),
])
def test_an_adaptive_hold_ends_by_max_wait_with_no_release(queueing, expected):
    assert _held_then_rechecked(queueing) == expected


def test_a_window_starting_between_the_recheck_and_max_wait_restores_the_max_wait_wake():
    """The best-effort pod above, replayed from 5 min after it was submitted (its recheck at 2 min
    is past): the window still ends its hold at maxWait and falls back at 01:12, as the run did."""
    sim = h100_history([30] * 8 + [34] * 8, 28, ADAPTIVE, queueing={"mode": "best-effort"})
    submit(sim, "head")
    submitted = sim.now
    sim.schedule_pass()
    sim.run_until(submitted + 13 * MINUTE)
    since = submitted + 5 * MINUTE
    start = World(sim.world.cluster)
    for e in sim.events:
        if parse_time_ms(e.time) < since:
            start.apply(e)
    policy = [e for e in sim.events if e.object_kind == "Policy"][-1].payload
    w = whatif(start, sim.events, sim.records, policy, since, submitted + 13 * MINUTE)
    assert [(r.time, r.outcome) for r in w.counterfactual.records] == [("2026-11-02T01:12:00.000Z", "allocated")]
    assert to_jsonl(w.counterfactual.records) == to_jsonl(w.recorded.records)


def _quota_full_while_waiting(queueing: str):  # noqa: ANN202
    """Tenant alpha's H100 quota (1) is held by its own pod, which runs for an hour; A100 are
    free. Under ``wait-for-preferred`` with a 5 min wait, a pod preferring H100 is deferred on
    quota, and no release comes."""
    alpha = {"name": "alpha", "namespaces": ["alpha"], "weight": 1,
             "quotas": {"H100": {"nominal": 1, "borrowingLimit": 0}}}
    sim = cluster(fallback={"mode": "wait-for-preferred", "wait": "5m"}, queueing={"mode": queueing},
                  tenants=[alpha])
    hold(sim, "h100-000", [0], name="own", namespace="alpha")
    submit(sim, "job")
    sim.schedule_pass()
    sim.run_until(sim.now + 7 * MINUTE)
    return [(r.attempt, r.outcome, r.retry_class, r.allocated_model, r.wait_ms) for r in sim.records]


@pytest.mark.parametrize("queueing", ["best-effort", "strict"])
def test_a_pod_deferred_on_quota_falls_back_when_its_wait_for_preferred_runs_out(queueing):
    assert _quota_full_while_waiting(queueing) == [(1, "deferred", "quota", "", 0),
                                                   (2, "allocated", "", "A100", 300_000)]


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



@pytest.mark.parametrize(("waited_min", "first"), [
    pytest.param(0, "beta/fresh", id="a-fresh-pod-of-the-tenant-below-its-share-goes-first"),
    pytest.param(60, "alpha/old", id="an-hour-of-waiting-outweighs-a-third-of-an-entitlement"),
])
def test_aging_is_counted_in_entitlements(waited_min, first):
    """alpha holds 8 H100 of a cluster worth 27.28 H100-equivalents shared by two active tenants
    (13.64 each): a share of 8 / 13.64 = 0.59 once usage history has caught up; at 0.5
    entitlements per hour of waiting, its pod that waited an hour (aging 0.5) goes before beta's
    fresh pod (share 0) while its blended share is below 0.5. Measured in absolute
    H100-equivalents per weight (8) the same hour of aging could never make up the gap."""
    from audit.scheduler.queue import tenant_share
    from tests.scheduler.worlds import decide_and_bind

    sim = cluster()
    for i in range(8):
        decide_and_bind(sim, submit(sim, f"run-{i}", size=1))
    assert sim.world.model_in_use("alpha", "H100") == 8
    old = submit(sim, "old")
    sim.now += waited_min * 60_000
    fresh = submit(sim, "fresh", namespace="beta")
    share = tenant_share(sim.world, sim.world.policy, "alpha", sim.now)
    assert 0.29 < share < 0.5  # half held now (8 / 13.64 / 2), half the history still catching up
    queues = PendingQueues()
    for key in (old, fresh):
        queues.add(sim.world.policy.tenant_for(key.split("/")[0]), sim.world.pending[key], key)
    assert queues.pop_next(sim.world, sim.world.policy, sim.now)[1] == first


def test_a_tenant_at_its_entitlement_earns_no_aging():
    """Aging orders tenants owed capacity; one holding its share never overtakes one that is not."""
    from audit.scheduler.queue import order_key
    from tests.scheduler.worlds import decide_and_bind

    sim = cluster()
    for i in range(3):
        decide_and_bind(sim, submit(sim, f"run-{i}", size=8, template="a100-only" if i else "h100-first"))
    old = submit(sim, "old")
    sim.now += 10 * 3_600_000  # usage history has caught up: alpha holds 16 of its 13.64
    fresh = submit(sim, "fresh", namespace="beta")
    key = order_key(sim.world, sim.world.policy, old, sim.now)
    assert key[0] > 1.0  # its share alone, ten hours of waiting notwithstanding
    assert order_key(sim.world, sim.world.policy, fresh, sim.now)[0] == 0.0


def test_free_devices_the_tenant_has_no_quota_for_are_not_a_fit():
    """alpha is at its 8 H100 (no borrowing), every A100 and L40S is held, H100s are free: its
    'compatible' tier is open (A100 and L40S quota) but only H100 devices are free."""
    from audit.scheduler.engine import decide, may_place
    from tests.scheduler.worlds import decide_and_bind

    sim = cluster()
    for i in range(8):
        decide_and_bind(sim, submit(sim, f"run-{i}", size=1))
    for node in ("a100-000", "a100-001", "l40s-000"):
        hold(sim, node, list(range(8)))
    waiting, other = submit(sim, "next"), submit(sim, "other", namespace="beta")
    assert sim.world.nodes_with_free("H100", 8) == ["h100-001"]
    assert not may_place(sim.world, waiting, sim.now)
    assert decide(sim.world, waiting, 1, sim.now).record.outcome == "unschedulable"
    assert may_place(sim.world, other, sim.now)


def test_entitlements_are_recomputed_after_every_event_and_for_a_tenant_not_yet_active():
    """The answer is kept per world state and set of active tenants: a tenant asked about joins
    the active ones, and a new pending pod of another tenant splits the capacity again."""
    from audit.scheduler.fairshare import entitlements

    sim = cluster()
    policy = sim.world.policy
    submit(sim, "first")  # alpha pending: the only active tenant
    alone = entitlements(sim.world, policy, "alpha")
    assert list(alone) == ["alpha"]
    capacity = alone["alpha"]
    with_beta = entitlements(sim.world, policy, "beta")  # same world state, beta joins for the question
    assert sorted(with_beta) == ["alpha", "beta"]
    assert with_beta["alpha"] + with_beta["beta"] == pytest.approx(capacity)
    assert entitlements(sim.world, policy, "alpha") == alone
    submit(sim, "second", namespace="beta")  # an event: beta is active now
    assert entitlements(sim.world, policy, "alpha") == with_beta


@pytest.mark.parametrize(("fallback", "queued", "parked"), [
    pytest.param({"mode": "immediate"}, ["alpha/fresh"], ["alpha/big-1", "alpha/big-2"],
                 id="every-tried-pod-of-an-unfit-shape-leaves-the-queue-at-once"),
    pytest.param({"mode": "adaptive", "maxWait": "10m"}, ["alpha/fresh", "alpha/big-2"], ["alpha/big-1"],
                 id="adaptive-parks-only-the-run-at-the-head"),
])
def test_pods_a_pass_would_skip_are_parked_in_line_order(fallback, queued, parked):
    sim = cluster(queueing={"mode": "best-effort"}, fallback=fallback)
    for node in NODES:
        hold(sim, node, [0, 1, 2, 3, 4])
    submit(sim, "big-1", size=4)
    sim.now += 1000
    submit(sim, "big-2", size=4)
    sim.schedule_pass()
    assert _records(sim) == [("big-1", 1, "unschedulable"), ("big-2", 1, "unschedulable")]
    sim.now += 1000
    submit(sim, "fresh", size=1)  # never tried: its first attempt is always made
    # the line as a wake could leave it: the fresh pod between the two of the unfit shape
    line = sorted((sim.world.pending[k], k) for k in ("alpha/big-1", "alpha/big-2", "alpha/fresh"))
    sim.pending.parked.clear()
    sim.pending.queues["alpha"] = [line[0], line[2], line[1]]
    sim.pending.unfit = {sim._shape("alpha/big-1")}
    sim._park_skipped("alpha")
    assert [k for _, k in sim.pending.queues["alpha"]] == queued
    assert [k for waiting in sim.pending.parked.values() for _, k in waiting] == parked


@pytest.mark.parametrize(("fairness", "first"), [
    pytest.param({"mode": "drf"}, "beta/fresh", id="drf-serves-the-tenant-below-its-share-first"),
    pytest.param({"mode": "off"}, "alpha/old", id="fairness-off-serves-the-oldest-pod-of-any-tenant-first"),
])
def test_fairness_off_is_one_line_across_tenants_by_creation(fairness, first):
    """alpha holds 8 H100 and its pod has waited a minute longer than beta's: DRF picks beta's,
    the baseline without fair sharing picks the older one whatever its tenant holds."""
    from tests.scheduler.worlds import decide_and_bind

    sim = cluster(fairness=fairness)
    for i in range(8):
        decide_and_bind(sim, submit(sim, f"run-{i}", size=1))
    old = submit(sim, "old")
    sim.now += 60_000
    fresh = submit(sim, "fresh", namespace="beta")
    queues = PendingQueues()
    for key in (fresh, old):
        queues.add(sim.world.policy.tenant_for(key.split("/")[0]), sim.world.pending[key], key)
    assert queues.pop_next(sim.world, sim.world.policy, sim.now)[1] == first


def test_fifo_with_backfill_places_a_younger_pod_of_another_tenant_past_a_blocked_one():
    """Fairness off with best-effort queueing is FIFO with backfill across tenants: the oldest pod
    is tried first, and when it fits nowhere a younger pod of another tenant that fits is placed."""
    sim = cluster(fairness={"mode": "off"}, queueing={"mode": "best-effort"})
    for node in NODES:
        hold(sim, node, [0, 1, 2, 3, 4])
    submit(sim, "big", size=4)
    sim.now += 1000
    submit(sim, "small", namespace="beta", size=1)
    sim.schedule_pass()
    assert [(r.namespace, r.pod, r.outcome) for r in sim.records] == [
        ("alpha", "big", "unschedulable"), ("beta", "small", "allocated")]
    assert sorted(sim.world.pending) == ["alpha/big"]
