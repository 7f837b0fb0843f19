"""Adaptive fallback: a pod waits for its first choice only while a release is expected in time.

Worlds are built by hand on the small cluster (two H100 nodes of 8 devices): claims of another
scheduler hold H100 devices for known lengths (the finished history), then hold every H100 again
(the running allocations, of known age) before a pod preferring H100 arrives.
"""

from __future__ import annotations

import functools
import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit.events import EventType
from audit.explain import explain_record
from audit.records import DecisionRecord, to_jsonl
from audit.replay.whatif import whatif
from audit.scheduler.adaptive import duration_text, hold_wakes_after_ms
from audit.scheduler.engine import decide, holding_for_preferred, may_place
from audit.scheduler.pending import follow_up
from audit.scheduler.release_estimate import estimate, survival
from audit.timestamps import parse_time_ms
from audit.world import World
from ingest.simulate.loop import SimulationResult, simulate
from ingest.simulate.scenario import load_scenario_text
from tests.scheduler.worlds import (
    ALL_DEVICES,
    H100_NODES,
    cluster,
    decide_and_bind,
    h100_history,
    hold,
    submit,
)

MIN = 60_000
HOUR = 60 * MIN


def _release(sim, name: str) -> None:  # noqa: ANN001
    sim.emit("ResourceClaim", "ops", name, None, EventType.DELETE.value)


def _world(history_min: list[int], running_age_min: float | None, max_wait: str = "10m", **spec):  # noqa: ANN001, ANN003
    return h100_history(history_min, running_age_min, {"mode": "adaptive", "maxWait": max_wait}, **spec)


@pytest.mark.parametrize(
    ("history", "age", "waited", "outcome", "model", "choice", "basis", "expected_ms"),
    [
        # every finished holding lasted 30 min; the running ones are 28 min old: all end in 2 min
        pytest.param([30] * 16, 28, 0, "deferred", "", "wait", "estimate", 120_000, id="waits-when-a-release-is-near"),
        # the same history, but the running ones started a minute ago: 29 min is beyond maxWait
        pytest.param([30] * 16, 1, 0, "allocated", "A100", "fallback", "at_least", None,
                     id="falls-back-when-the-release-is-far"),
        # expected in 6 min after 5 of its 10 waited: the wait so far does not shorten the hold
        pytest.param([30] * 16, 24, 5, "deferred", "", "wait", "estimate", 360_000,
                     id="keeps-waiting-while-the-release-is-expected-within-max-wait"),
        pytest.param([30] * 16, 24, 10, "allocated", "A100", "fallback", "estimate", 360_000,
                     id="falls-back-once-it-has-waited-max-wait"),
        # no allocation of H100 has finished yet: nothing to estimate from, no wait
        pytest.param([], 5, 0, "allocated", "A100", "fallback", "no_history", -1, id="no-history-falls-back-at-once"),
        # running allocations older than every finished one: none is expected to end
        pytest.param([30] * 16, 45, 0, "allocated", "A100", "fallback", "never", -1,
                     id="allocations-older-than-any-finished-one-are-not-expected-to-end"),
    ],
)
def test_adaptive_fallback_choice(history, age, waited, outcome, model, choice, basis, expected_ms):
    sim = _world(history, age - waited)
    key = submit(sim, "job-1")
    sim.now += waited * MIN
    r = decide_and_bind(sim, key).record
    assert (r.outcome, r.allocated_model) == (outcome, model)
    [said] = [b for b in r.blockers if b.code == "fallback_estimate"]
    assert said.tier == 0
    assert (said.detail["choice"], said.detail["basis"]) == (choice, basis)
    assert (said.detail["model"], said.detail["count"], said.detail["max_wait_ms"]) == ("H100", 1, 600_000)
    assert said.detail["waited_ms"] == waited * MIN
    assert said.detail["history"] == len(history)
    assert said.detail["running"] == 16
    if expected_ms is not None:
        assert said.detail["expected_free_ms"] == expected_ms
    if outcome == "deferred":
        assert r.retry_class == "unschedulable"
    else:
        assert r.fallback and r.tier_index == 1


def test_the_held_pods_record_says_the_wait_and_is_rechecked_when_it_was_due():
    sim = _world([30] * 16, 28)
    r = decide_and_bind(sim, submit(sim, "job-1")).record
    assert r.message == "waiting for H100: expected free in 2m < maxWait 10m"
    said = r.blockers[-1].detail
    # the release is due in 2 min, and 8 min of slack are left: look again in 2 min, and when the
    # wait reaches maxWait
    assert said["recheck_after_ms"] == 120_000
    assert follow_up(r, sim.world.policy, sim.now).wakes_at_ms == (sim.now + 120_000, sim.now + 600_000)
    assert hold_wakes_after_ms(r, sim.world.policy.fallback_wait_ms) == (120_000, 600_000)


def test_a_fallback_record_says_why_it_did_not_wait():
    sim = _world([30] * 16, 1)
    r = decide_and_bind(sim, submit(sim, "job-1")).record
    assert r.message.endswith("; fell back from H100: expected free in more than 10m >= maxWait 10m")
    sim = _world([], 5)
    r = decide_and_bind(sim, submit(sim, "job-1")).record
    assert r.message.endswith("; fell back from H100: no finished H100 allocation yet to estimate a release from")


def test_a_free_first_choice_is_taken_without_an_estimate():
    sim = _world([30] * 4, None)
    r = decide_and_bind(sim, submit(sim, "job-1")).record
    assert (r.outcome, r.allocated_model, r.fallback) == ("allocated", "H100", False)
    assert not [b for b in r.blockers if b.code == "fallback_estimate"]


def test_the_held_pod_is_placed_on_its_first_choice_once_a_device_is_released():
    sim = _world([30] * 16, 28)
    key = submit(sim, "job-1")
    assert decide_and_bind(sim, key).record.outcome == "deferred"
    assert not may_place(sim.world, key, sim.now)
    assert holding_for_preferred(sim.world, key, sim.now)
    sim.now += 2 * MIN
    _release(sim, "run-h100-001-3")
    assert may_place(sim.world, key, sim.now)
    r = decide_and_bind(sim, key, attempt=2).record
    assert (r.outcome, r.allocated_model, r.node) == ("allocated", "H100", "h100-001")


def test_the_hold_ends_by_itself_when_the_wait_left_runs_out():
    sim = _world([30] * 16, 24)
    key = submit(sim, "job-1")
    assert decide_and_bind(sim, key).record.outcome == "deferred"
    sim.now += 4 * MIN + 1  # no release came: 4 min waited, now 2 min expected: still within 10
    assert holding_for_preferred(sim.world, key, sim.now)
    sim.now += 4 * MIN  # 8 min waited; H100 now as old as every finished one: no longer expected
    assert not holding_for_preferred(sim.world, key, sim.now)
    assert may_place(sim.world, key, sim.now)
    r = decide_and_bind(sim, key, attempt=2).record
    assert (r.outcome, r.allocated_model) == ("allocated", "A100")


def test_a_first_choice_quota_closes_with_nothing_of_its_own_to_give_back_falls_back_at_once():
    sim = _world([30] * 16, 28, tenants=[{"name": "alpha", "namespaces": ["alpha"], "weight": 1,
                                          "quotas": {"H100": {"nominal": 0}}}])
    r = decide_and_bind(sim, submit(sim, "job-1")).record
    assert (r.outcome, r.allocated_model) == ("allocated", "A100")
    assert [b.code for b in r.blockers] == ["quota_exhausted", "fallback_estimate"]
    said = r.blockers[-1].detail
    assert (said["choice"], said["basis"], said["wait_on"], said["quota_short"], said["running"]) == (
        "fallback", "never", "quota", 1, 0)
    assert r.message.endswith("; fell back from H100: the tenant's quota lacks 1 H100 and no release of its own "
                              "or of a tenant that lends is expected to reopen it")


# ---- waiting on the tenant's own quota -------------------------------------------------------------


def _quota_world(own: list[tuple[str, int]], own_age_min: int, others: list[tuple[str, int]], others_age_min: int,
                 nominal: int):  # noqa: ANN202
    """Every finished H100 holding lasted 30 min (so each running one ends at 30 min of age
    exactly). Tenant alpha (H100 quota ``nominal``, no borrowing) holds the ``own`` (node, device)
    H100 one claim each, ``own_age_min`` old; another scheduler holds ``others``."""
    sim = _world([30] * 16, None, tenants=[{"name": "alpha", "namespaces": ["alpha"], "weight": 1,
                                            "quotas": {"H100": {"nominal": nominal, "borrowingLimit": 0}}}])
    older, younger = sorted([(own_age_min, own, "alpha"), (others_age_min, others, "ops")], key=lambda x: -x[0])
    for age, held, ns in (older, younger):
        sim.now -= age * MIN  # allocate each group at its own start, then come back to now
        for node, dev in held:
            hold(sim, node, [dev], name=f"{ns}-{node}-{dev}", namespace=ns)
        sim.now += age * MIN
    return sim


ALL_H100 = [(n, d) for n in H100_NODES for d in ALL_DEVICES]
ALPHA4 = [("h100-000", d) for d in range(4)]


@pytest.mark.parametrize(
    ("own", "own_age", "others", "others_age", "nominal", "size", "outcome", "wait_on", "expected", "quota_ms",
     "devices_ms"),
    [
        # alpha holds all 4 of its quota, 28 min old: its own release reopens it in 2 min; devices are free
        pytest.param(ALPHA4, 28, [], 0, 4, 1, "deferred", "quota", 120_000, 120_000, 0,
                     id="quota-closed-with-an-own-release-near-waits"),
        # the same, 1 min old: 29 min away, beyond maxWait
        pytest.param(ALPHA4, 1, [], 0, 4, 1, "allocated", "quota", 600_000, 600_000, None,
                     id="quota-closed-with-own-releases-far-falls-back"),
        # quota reopens in 3 min, one H100 is free on some node in 2 min: the later of the two is the quota
        pytest.param(ALPHA4, 27, [p for p in ALL_H100 if p not in ALPHA4], 28, 4, 1, "deferred", "quota",
                     180_000, 180_000, 120_000, id="quota-and-devices-short-waits-for-the-later-quota"),
        # a pod of 2 with alpha holding one H100 on each node (quota 3): its own release reopens the quota
        # in 2 min, but two H100 together on one node need another scheduler's release, in 4 min
        pytest.param([("h100-000", 0), ("h100-001", 0)], 28,
                     [p for p in ALL_H100 if p[1] != 0], 26, 3, 2, "deferred", "devices", 240_000, 120_000,
                     240_000, id="quota-and-devices-short-waits-for-the-later-devices"),
    ],
)
def test_a_first_choice_closed_by_the_tenants_own_quota(own, own_age, others, others_age, nominal, size, outcome,
                                                         wait_on, expected, quota_ms, devices_ms):
    sim = _quota_world(own, own_age, others, others_age, nominal)
    r = decide_and_bind(sim, submit(sim, "job-1", size=size)).record
    assert r.outcome == outcome
    said = [b.detail for b in r.blockers if b.code == "fallback_estimate"]
    assert len(said) == 1
    detail = said[0]
    assert (detail["choice"], detail["wait_on"], detail["expected_free_ms"]) == (
        "wait" if outcome == "deferred" else "fallback", wait_on, expected)
    assert detail["quota_free_ms"] == quota_ms
    assert detail.get("devices_free_ms") == devices_ms
    assert detail["quota_short"] == 1
    assert ("quota_exhausted", 0) in [(b.code, b.tier) for b in r.blockers]
    if outcome == "deferred":
        assert r.retry_class == "quota"
        # looked at again when the estimate is due and when the wait reaches maxWait, without a release
        assert follow_up(r, sim.world.policy, sim.now).wakes_at_ms == (sim.now + expected, sim.now + 600_000)
        assert not may_place(sim.world, f"alpha/{r.pod}", sim.now)
    else:
        assert (r.allocated_model, r.fallback) == ("A100", True)


def test_the_quota_wait_is_said_in_words_and_ends_when_the_tenant_gives_a_device_back():
    sim = _quota_world(ALPHA4, 28, [], 0, 4)
    key = submit(sim, "job-1")
    r = decide_and_bind(sim, key).record
    assert r.message == "waiting for H100: H100 quota expected to reopen in 2m (devices free now) < maxWait 10m"
    assert explain_record(r, "H100").summary.startswith(
        "H100 skipped: of 16 H100, 16 over the tenant's quota; tenant quota 4/4 H100 used; waiting for H100: H100 "
        "quota expected to reopen in 2m (devices free now) < maxWait 10m. Pod not allocated (deferred")
    assert holding_for_preferred(sim.world, key, sim.now)
    sim.now += 2 * MIN
    sim.emit("ResourceClaim", "alpha", "alpha-h100-000-0", None, EventType.DELETE.value)
    assert may_place(sim.world, key, sim.now)
    r = decide_and_bind(sim, key, attempt=2).record
    assert (r.outcome, r.allocated_model, r.fallback) == ("allocated", "H100", False)


@pytest.mark.parametrize(
    ("alpha_borrowing", "choice", "expected", "quota_short"),
    [
        # alpha (nominal 4, 1 min into its holdings) may borrow: beta's release in 2 min lends it one
        pytest.param(None, "wait", 120_000, 1, id="another-tenants-release-lends-the-quota-back"),
        # alpha may not borrow: only its own releases reopen it, 29 min away
        pytest.param(0, "fallback", 600_000, 1, id="without-borrowing-only-its-own-releases-count"),
    ],
)
def test_a_quota_closed_first_choice_reopens_by_what_other_tenants_lend(alpha_borrowing, choice, expected,
                                                                         quota_short):
    sim = _world([30] * 16, None, tenants=[
        {"name": "alpha", "namespaces": ["alpha"], "weight": 1,
         "quotas": {"H100": {"nominal": 4, "borrowingLimit": alpha_borrowing}}},
        {"name": "beta", "namespaces": ["beta"], "weight": 1, "quotas": {"H100": {"nominal": 10}}}])
    sim.now -= 28 * MIN
    for dev in range(8):  # beta uses its whole nominal: nothing to lend
        hold(sim, "h100-000", [dev], name=f"beta-0-{dev}", namespace="beta")
    for dev in range(2):
        hold(sim, "h100-001", [dev], name=f"beta-1-{dev}", namespace="beta")
    sim.now += 27 * MIN
    for dev in range(2, 6):
        hold(sim, "h100-001", [dev], name=f"alpha-{dev}", namespace="alpha")
    sim.now += MIN
    r = decide_and_bind(sim, submit(sim, "job-1")).record  # two H100 are free on h100-001
    [said] = [b.detail for b in r.blockers if b.code == "fallback_estimate"]
    assert (said["choice"], said["wait_on"], said["expected_free_ms"], said["quota_short"]) == (
        choice, "quota", expected, quota_short)
    assert r.outcome == ("deferred" if choice == "wait" else "allocated")


@pytest.mark.parametrize(
    ("used", "count", "nominal", "borrowing", "other_used", "short"),
    [
        pytest.param(3, 1, 4, 0, 0, 0, id="within-nominal-fits"),
        pytest.param(4, 1, 4, 0, 0, 1, id="at-nominal-without-borrowing-lacks-the-count"),
        pytest.param(4, 2, 4, None, 8, 2, id="nothing-to-borrow-while-the-other-uses-its-nominal"),
        pytest.param(4, 2, 4, None, 7, 1, id="borrows-what-the-other-leaves-unused"),
        pytest.param(6, 4, 4, 4, 0, 2, id="capped-by-the-borrowing-limit"),
    ],
)
def test_what_the_tenant_alone_must_give_back_reopens_its_quota_exactly(used, count, nominal, borrowing, other_used, short):
    from audit.scheduler.quota import check_quota, quota_gap

    def shortfall() -> int:
        gap = quota_gap(sim.world, policy, "alpha", "H100", count)
        assert gap is not None
        return 0 if check_quota(sim.world, policy, "alpha", "H100", count).fits else gap.own_alone

    quota = {"nominal": nominal, "borrowingLimit": borrowing}  # None: may borrow whatever is unused
    sim = cluster(tenants=[{"name": "alpha", "namespaces": ["alpha"], "weight": 1, "quotas": {"H100": quota}},
                           {"name": "beta", "namespaces": ["beta"], "weight": 1, "quotas": {"H100": {"nominal": 8}}}])
    devs = [(n, d) for n in H100_NODES for d in ALL_DEVICES]
    for node, dev in devs[:used]:
        hold(sim, node, [dev], name=f"a-{node}-{dev}", namespace="alpha")
    for node, dev in devs[used:used + other_used]:
        hold(sim, node, [dev], name=f"b-{node}-{dev}", namespace="beta")
    policy = sim.world.policy
    assert shortfall() == short
    # giving exactly that back makes the count fit, one fewer does not
    for gone in range(short):
        node, dev = devs[gone]
        sim.emit("ResourceClaim", "alpha", f"a-{node}-{dev}", None, EventType.DELETE.value)
        left = short - gone - 1
        assert shortfall() == left
        assert check_quota(sim.world, policy, "alpha", "H100", count).fits == (left == 0)
    assert check_quota(sim.world, policy, "alpha", "H100", count).fits


@pytest.mark.parametrize(
    ("age", "said"),
    [
        pytest.param(28, "H100 skipped: of 16 H100, 16 in use; no node had 1 usable H100 together; waiting for H100: "
                         "expected free in 2m < maxWait 10m. Pod not allocated (deferred", id="waiting"),
        pytest.param(1, "H100 skipped: of 16 H100, 16 in use; fell back from H100: expected free in more than 10m "
                        ">= maxWait 10m. Allocated A100 gpu-0 on node a100-000 (tier 1)", id="fell-back"),
    ],
)
def test_why_says_the_estimate(age, said):
    sim = _world([30] * 16, age)
    r = decide_and_bind(sim, submit(sim, "job-1")).record
    assert explain_record(r, "H100").summary.startswith(said)


def test_the_decision_is_a_function_of_the_world_and_time():
    sim = _world([10, 20, 30, 40] * 4, 15)
    key = submit(sim, "job-1")
    first = decide(sim.world, key, 1, sim.now).record
    again = decide(sim.world, key, 1, sim.now).record
    assert isinstance(first, DecisionRecord)
    assert first.output_digest == again.output_digest
    assert first.blockers[-1].detail == again.blockers[-1].detail


# ---- the estimate itself ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("finished", "ages", "times", "surv"),
    [
        pytest.param([10, 20, 30], [], [10, 20, 30], [2 / 3, 1 / 3, 0.0], id="no-censoring-is-the-empirical-survival"),
        # at 20 the one censored at 15 is no longer at risk: 2 at risk, 1 ends
        pytest.param([10, 20, 30], [15], [10, 20, 30], [3 / 4, 3 / 8, 0.0], id="censored-ages-leave-the-risk-set"),
        # censored at an event's time counts as still at risk then
        pytest.param([10], [10], [10], [1 / 2], id="a-censored-tie-is-at-risk"),
        pytest.param([5, 5, 9], [], [5, 9], [1 / 3, 0.0], id="tied-events-end-together"),
    ],
)
def test_kaplan_meier_survival(finished, ages, times, surv):
    got_times, got_surv = survival(finished, ages)
    assert got_times == times
    assert got_surv == pytest.approx(surv, abs=1e-12)


def test_two_devices_on_one_node_wait_for_the_second_release():
    # History: half the holdings lasted 10 min, half 20. On each node one claim holds 4 devices
    # and four claims hold one each, all 5 min old. A pod needing 5 H100 on one node: a node is
    # ready once its 4-device claim and at least one single have ended (the singles give 4 at most).
    sim = cluster(fallback={"mode": "adaptive", "maxWait": "1h"})
    for i, length in enumerate([10, 20] * 4):
        name = hold(sim, "h100-000", [i], name=f"past-{i}")
        sim.now += length * MIN
        _release(sim, name)
        sim.now -= length * MIN
    sim.now += 20 * MIN
    for node in H100_NODES:
        hold(sim, node, [0, 1, 2, 3], name=f"big-{node}")
        for dev in (4, 5, 6, 7):
            hold(sim, node, [dev], name=f"one-{node}-{dev}")
    sim.now += 5 * MIN
    est = estimate(sim.world, ("H100",), 5, sim.now, 3_600_000)
    # each holding ends at 10 min of age (5 min from now) with probability 1/2 (KM with the ten
    # running ones censored at 5 min leaves S(10) = 1/2), else at 20 min (15 min from now).
    # A node is ready at 5 min when its big claim and one single end then: 1/2 * (1 - 1/16);
    # otherwise at 15 min. Two nodes: P(not ready at 5 min) = (1 - 15/32)^2.
    p_late = (1 - 15 / 32) ** 2
    assert est.basis == "estimate"
    assert est.expected_ms == round(5 * MIN + p_late * 10 * MIN)
    assert (est.history, est.running) == (8, 10)


def test_durations_read_as_a_person_reads_them():
    assert [duration_text(ms) for ms in (0, 45_000, 120_000, 192_000, 3_900_000)] == ["0s", "45s", "2m", "3m12s", "1h05m"]


# ---- a simulated run under adaptive fallback ------------------------------------------------------

SCENARIO = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "replay", "busy-small.yaml")


@functools.lru_cache(maxsize=2)
def _adaptive_run(queueing: str = "best-effort") -> SimulationResult:
    with open(SCENARIO, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "busy-small.yaml")
    for doc in [sc.policy, *(d for _, d in sc.policy_changes)]:
        doc["spec"]["fallback"] = {"mode": "adaptive", "maxWait": "10m"}
        doc["spec"]["queueing"] = {"mode": queueing}
    return simulate(sc, seed=3, hours=3.0)


@pytest.mark.parametrize("queueing", ["best-effort", "strict"])
def test_every_decision_of_an_adaptive_run_replays_to_its_digests(queueing):
    from audit.replay import MemorySource, Verifier

    res = _adaptive_run(queueing)
    results = list(Verifier(MemorySource(res.events)).run(res.records))
    assert len(results) == len(res.records) > 1200
    assert [r.decision_id for r in results if not r.match] == []
    # the run exercised both choices, from an estimate and from no history
    said = [(r.outcome, b.detail["choice"], b.detail["basis"]) for r in res.records for b in r.blockers
            if b.code == "fallback_estimate"]
    assert ("deferred", "wait", "estimate") in said
    assert ("allocated", "fallback", "estimate") in said
    assert ("allocated", "fallback", "no_history") in said


@pytest.mark.parametrize(("queueing", "from_h"), [
    pytest.param("best-effort", 1.5, id="best-effort"),
    pytest.param("strict", 0.25, id="strict"),  # (heads held in the first half hour: a window starts among them)
])
def test_a_counterfactual_window_under_the_recorded_adaptive_policy_reproduces_it(queueing, from_h):
    res = _adaptive_run(queueing)
    t0 = parse_time_ms(res.events[0].time)
    since, until = t0 + int(from_h * HOUR) + 777, t0 + int((from_h + 1) * HOUR)
    active = [e for e in res.events if e.object_kind == "Policy" and parse_time_ms(e.time) < since][-1]
    start = World(res.world.cluster)
    for e in res.events:
        if parse_time_ms(e.time) < since:
            start.apply(e)
    w = whatif(start, res.events, res.records, active.payload, since, until)
    assert len(w.recorded.records) > 300
    assert any(b.code == "fallback_estimate" and b.detail["choice"] == "wait"
               for r in w.recorded.records for b in r.blockers)
    assert to_jsonl(w.counterfactual.records) == to_jsonl(w.recorded.records)
    assert [e.to_dict() for e in w.counterfactual.events] == [e.to_dict() for e in w.recorded.events]


def test_the_tenant_sees_its_whole_estimate():
    from audit.api.tenant_view import tenant_view

    sim = _world([30] * 16, 28)
    r = decide_and_bind(sim, submit(sim, "job-1")).record
    view = tenant_view(r.to_dict())
    assert view["blockers"][-1] == {"code": "fallback_estimate", "tier": 0, "detail": r.blockers[-1].detail}
    assert view["message"] == r.message


@given(finished=st.lists(st.integers(1, 10_000), min_size=1, max_size=40),
       ages=st.lists(st.integers(0, 12_000), max_size=40))
def test_the_survival_falls_from_one_and_without_censoring_is_the_empirical_one(finished, ages):
    times, surv = survival(finished, ages)
    assert times == sorted(set(finished))
    assert all(0.0 <= s <= 1.0 for s in surv)
    assert all(a >= b for a, b in zip([1.0, *surv], surv, strict=False))
    plain_times, plain = survival(finished, [])
    assert plain == pytest.approx([sum(1 for f in finished if f > t) / len(finished) for t in plain_times])


def test_a_world_rebuilt_from_its_checkpoint_estimates_as_the_live_one():
    """Checkpoints carry the holding times: a replay that starts from one decides as the run did."""
    res = _adaptive_run()
    live = World(res.world.cluster)
    compared = 0
    for i, ev in enumerate(res.events):
        live.apply(ev)
        if i % 500 == 499:
            rebuilt = World.from_snapshot(json.loads(json.dumps(live.snapshot())))
            for count in (1, 2, 4):
                for later in (0, 5 * MIN):
                    at = live.time_ms + later
                    assert (estimate(rebuilt, ("H100",), count, at, 600_000)
                            == estimate(live, ("H100",), count, at, 600_000))
                    compared += 1
    assert compared > 30


@given(own=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 3)), max_size=5),
       lent=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 3)), max_size=5),
       finished=st.lists(st.integers(1, 60), min_size=1, max_size=12),
       to_nominal=st.integers(1, 6), to_limit=st.one_of(st.none(), st.integers(-3, 6)),
       together=st.integers(-2, 8), offset=st.integers(0, 60))
def test_the_quota_groups_chance_of_not_yet_is_that_of_every_way_the_holdings_can_end(
        own, lent, finished, to_nominal, to_limit, together, offset):
    """The quota group's P(not reopened at t) equals the sum, over every subset of holdings still
    held at t, of its probability where the devices given back do not close the gap."""
    import itertools

    import numpy as np

    from audit.scheduler.quota import QuotaGap
    from audit.scheduler.release_estimate import _Curve, _Holding, _QuotaGroup

    mine = [_Holding("H100", a, d) for a, d in own]
    theirs = [_Holding("H100", a, d) for a, d in lent]
    times, surv = survival(finished, [h.age_ms for h in mine + theirs])
    last = times[-1]
    mine = [h for h in mine if h.age_ms < last]
    theirs = [h for h in theirs if h.age_ms < last]
    gap = QuotaGap("H100", to_nominal, to_limit, together, ("beta",))
    group = _QuotaGroup(gap, mine, theirs)
    curve = _Curve(times, surv)
    at = np.array([offset])
    got = float(group.table(curve, at)[0][0])
    held = [float(p) for p in curve.held_rows(mine + theirs, at)[0][:, 0]]
    want = 0.0
    for ended in itertools.product((False, True), repeat=len(held)):
        p = 1.0
        for gone, p_held in zip(ended, held, strict=True):
            p *= (1.0 - p_held) if gone else p_held
        i = sum(h.devices for h, gone in zip(mine, ended, strict=False) if gone)
        j = sum(h.devices for h, gone in zip(theirs, ended[len(mine):], strict=True) if gone)
        ready = i >= to_nominal or ((to_limit is None or i >= to_limit) and i + j >= together)
        if not ready:
            want += p
    assert got == pytest.approx(want, abs=1e-9)



# ---- the tenant's pods ahead that can only use the first choice --------------------------------------------


def _dp_h100_world(sole_choice_first: bool = False):  # noqa: ANN202
    """The small cluster with one H100 device-plugin node too. Alpha (H100 quota 4, no borrowing)
    holds 4 H100 one claim each: one 28 min old (every finished holding lasted 30 min, so it ends
    in 2 min), three 1 min old (29 min away)."""
    from audit.policy import parse_policy, policy_document
    from ingest.simulate.loop import Simulator
    from tests.scheduler.worlds import FIXTURES

    with open(os.path.join(FIXTURES, "small-cluster.yaml"), encoding="utf-8") as fh:
        text = fh.read()
    dp = "    - {model: L4, nodes: 1, gpusPerNode: 4, devicePlugin: true}\n"
    assert dp in text
    sc = load_scenario_text(text.replace(dp, dp + "    - {model: H100, nodes: 1, gpusPerNode: 8, devicePlugin: true}\n"),
                            "small-cluster.yaml")
    doc = policy_document(parse_policy(sc.policy))
    doc["spec"].update(fallback={"mode": "adaptive", "maxWait": "10m"},
                       tenants=[{"name": "alpha", "namespaces": ["alpha"], "weight": 1,
                                 "quotas": {"H100": {"nominal": 4, "borrowingLimit": 0}}}])
    if sole_choice_first:
        doc["spec"]["queueing"] = {"mode": "best-effort", "soleChoiceFirst": True}
    sc.policy = doc
    sim = Simulator(sc, seed=7)
    sim.setup([])
    for i in range(16):  # the finished history
        name = hold(sim, H100_NODES[i % 2], [(i // 2) % 8], name=f"past-{i}")
        sim.now += 30 * MIN
        _release(sim, name)
        sim.now -= 30 * MIN
    sim.now += 30 * MIN
    for dev, age in ((0, 28), (1, 1), (2, 1), (3, 1)):
        sim.now -= age * MIN
        hold(sim, "h100-000", [dev], name=f"alpha-{dev}", namespace="alpha")
        sim.now += age * MIN
    return sim


@pytest.mark.parametrize(
    ("pinned", "sole_choice_first", "outcome", "choice", "basis", "ahead", "who"),
    [
        # alone, it needs the first of alpha's releases: in 2 min
        pytest.param("", False, "deferred", "wait", "estimate", 0, "", id="alone-it-waits-for-the-release-near"),
        # behind alpha's device-plugin pod pinned to H100, the first release is that pod's; the
        # second is 29 min away
        pytest.param("before", False, "allocated", "fallback", "at_least", 1, "earlier device-plugin pods",
                     id="behind-a-pod-that-can-only-use-h100-it-falls-back"),
        # by default a younger pinned pod is behind it in the line: the release near is its own
        pytest.param("after", False, "deferred", "wait", "estimate", 0, "",
                     id="a-younger-pinned-pod-is-behind-it-by-default"),
        # with soleChoiceFirst a pod with no other choice is ahead however young it is
        pytest.param("after", True, "allocated", "fallback", "at_least", 1, "pods with no other choice",
                     id="with-sole-choice-first-a-younger-pinned-pod-is-ahead"),
    ],
)
def test_the_tenants_pods_ahead_that_can_only_use_the_first_choice_take_its_quota_first(
        pinned, sole_choice_first, outcome, choice, basis, ahead, who):
    from ingest.simulate.loop import Job

    sim = _dp_h100_world(sole_choice_first)
    if pinned == "before":
        sim.submit(Job("dp-0", "alpha", sim.now, 1, HOUR, "h100-first", True, node_model="H100"))
    sim.now += 1_000
    key = submit(sim, "job-1")
    if pinned == "after":
        sim.now += 1_000
        sim.submit(Job("dp-0", "alpha", sim.now, 1, HOUR, "h100-first", True, node_model="H100"))
    r = decide_and_bind(sim, key).record
    assert r.outcome == outcome
    said = [b.detail for b in r.blockers if b.code == "fallback_estimate"]
    assert len(said) == 1
    assert (said[0]["choice"], said[0]["basis"], said[0]["wait_on"], said[0]["ahead"], said[0]["quota_short"]) == (
        choice, basis, "quota", ahead, 1 + ahead)
    assert ("ahead_rule" in said[0]) == sole_choice_first
    if outcome == "deferred":
        assert said[0]["expected_free_ms"] == 2 * MIN  # 1 s short of it, on the 15 s grid that errs long
    else:
        assert (r.allocated_model, r.fallback) == ("A100", True)
        assert f"(after 1 for {who})" in r.message


@pytest.mark.parametrize(
    ("me", "devices_ahead"),
    [
        pytest.param((0, "ns/a"), 0, id="older-than-every-pod-in-line"),
        pytest.param((5, "ns/a"), 2, id="created-with-a-pod-and-before-it-by-name"),
        pytest.param((5, "ns/b"), 2, id="a-pod-in-line-is-not-ahead-of-itself"),
        pytest.param((5, "ns/c"), 6, id="created-with-a-pod-and-after-it-by-name"),
        pytest.param((9, "ns/z"), 7, id="younger-than-every-pod-in-line"),
    ],
)
def test_the_devices_ahead_of_a_pod_are_those_of_the_pods_before_it_in_line(me, devices_ahead):
    from audit.scheduler.adaptive import _Line

    line = _Line([(1, "ns/x", 2), (5, "ns/b", 4), (7, "ns/y", 1)])
    assert line.before(me) == devices_ahead
    assert (line.total, line.devices.get(me[1], 0)) == (7, 4 if me[1] == "ns/b" else 0)
