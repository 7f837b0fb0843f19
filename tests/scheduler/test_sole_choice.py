"""With ``spec.queueing.soleChoiceFirst``, pods with no other choice (one model they can use) go
ahead of flexible pods in their tenant's line, each group in creation order then by pod key; the
flexible pod falls back instead of taking the only model the other can run on. Off by default."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from audit.scheduler.pending import PendingQueues
from audit.scheduler.sole_choice import sole_choice
from ingest.simulate.loop import Job
from tests.scheduler.worlds import cluster, hold, submit

H100 = ("h100-000", "h100-001")
ALL_BUT_ONE = [0, 1, 2, 3, 4, 5, 6]


def _one_free_a100(mode: str = "best-effort", sole_choice_first: bool = True):  # noqa: ANN202
    """Every H100 and L40S device held, one free A100 device (a100-000's gpu-7)."""
    sim = cluster(queueing={"mode": mode, **({"soleChoiceFirst": True} if sole_choice_first else {})})
    for node in (*H100, "l40s-000"):
        hold(sim, node, list(range(8)))
    hold(sim, "a100-000", ALL_BUT_ONE)
    hold(sim, "a100-001", list(range(8)))
    return sim


def _records(sim):  # noqa: ANN001, ANN202
    return [(r.pod, r.attempt, r.outcome) for r in sim.records]


@pytest.mark.parametrize("mode", ["best-effort", "strict"])
def test_a_pod_with_no_other_choice_takes_the_device_before_an_older_flexible_pod(mode):
    sim = _one_free_a100(mode)
    submit(sim, "flexible", template="h100-first")
    sim.now += 60_000
    submit(sim, "a100-only", template="a100-only")
    sim.schedule_pass()
    assert _records(sim)[0] == ("a100-only", 1, "allocated")
    assert sim.records[0].allocated_model == "A100"
    assert ("flexible", 1, "unschedulable") in _records(sim)
    assert sorted(sim.world.pending) == ["alpha/flexible"]


def test_by_default_the_older_flexible_pod_takes_the_device():
    sim = _one_free_a100(sole_choice_first=False)
    submit(sim, "flexible", template="h100-first")
    sim.now += 60_000
    submit(sim, "a100-only", template="a100-only")
    sim.schedule_pass()
    assert _records(sim) == [("flexible", 1, "allocated"), ("a100-only", 1, "unschedulable")]


def test_without_a_pod_with_no_other_choice_the_line_stays_in_creation_order():
    sim = _one_free_a100()
    submit(sim, "older", template="h100-first")
    sim.now += 60_000
    submit(sim, "newer", template="h100-first")
    sim.schedule_pass()
    assert _records(sim) == [("older", 1, "allocated"), ("newer", 1, "unschedulable")]


def test_pods_of_other_tenants_keep_the_fairness_order():
    """The rule orders a tenant's own line only: beta's older flexible pod is beta's head, and the
    fairness order (equal shares, then age) still puts it before alpha's pod."""
    sim = _one_free_a100()
    submit(sim, "flexible", namespace="beta", template="h100-first")
    sim.now += 60_000
    submit(sim, "a100-only", template="a100-only")
    sim.schedule_pass()
    assert _records(sim) == [("flexible", 1, "allocated"), ("a100-only", 1, "unschedulable")]


@pytest.mark.parametrize(("job", "expected"), [
    pytest.param(Job("p", "alpha", 0, 1, 1, "h100-first"), ("", 0), id="firstAvailable-with-alternatives-is-flexible"),
    pytest.param(Job("p", "alpha", 0, 1, 1, "a100-only"), ("A100", 1), id="a-single-alternative-of-one-model"),
    pytest.param(Job("p", "alpha", 0, 2, 1, device_plugin=True, node_model="L4"), ("L4", 2),
                 id="device-plugin-pod-pinned-by-nodeSelector"),
    pytest.param(Job("p", "alpha", 0, 3, 1, device_plugin=True), ("L4", 3),
                 id="device-plugin-pod-whose-only-device-plugin-nodes-are-one-model"),
    pytest.param(Job("p", "alpha", 0, 1, 1, device_plugin=True, node_model="H100"), ("", 0),
                 id="device-plugin-pod-no-node-admits-is-not-pinned-to-a-model"),
])
def test_which_pods_have_no_other_choice(job, expected):
    sim = cluster()
    key = sim.submit(job)
    assert sole_choice(sim.world, key) == expected


@pytest.mark.parametrize(("pods", "expected"), [
    pytest.param([(3, "a/x", False), (1, "a/y", False), (2, "a/z", False)], ["a/y", "a/z", "a/x"],
                 id="flexible-only-by-creation"),
    pytest.param([(1, "a/old", False), (2, "a/pinned", True), (3, "a/new", False), (4, "a/pinned2", True)],
                 ["a/pinned", "a/pinned2", "a/old", "a/new"], id="no-other-choice-first-each-group-by-creation"),
    pytest.param([(5, "a/b", True), (5, "a/a", True), (5, "a/c", False)], ["a/a", "a/b", "a/c"],
                 id="same-creation-by-pod-key"),
])
def test_the_line_order(pods, expected):
    first = {key: f for _, key, f in pods}
    q = PendingQueues(first=first.__getitem__)
    for created, key, _ in pods:
        q.add("a", created, key)
    assert [k for _, k in q.queues["a"]] == expected


@given(st.lists(st.tuples(st.integers(0, 5), st.booleans()), min_size=1, max_size=12))
def test_the_line_is_the_same_whatever_the_arrival_order_and_after_a_park_and_wake(pods):
    entries = [(created, f"a/p{i}", f) for i, (created, f) in enumerate(pods)]
    first = {key: f for _, key, f in entries}
    expected = [k for _, k, _ in sorted(entries, key=lambda e: (not e[2], e[0], e[1]))]
    forward, backward = PendingQueues(first=first.__getitem__), PendingQueues(first=first.__getitem__)
    for created, key, _ in entries:
        forward.add("a", created, key)
    for created, key, _ in reversed(entries):
        backward.add("a", created, key)
    assert [k for _, k in forward.queues["a"]] == [k for _, k in backward.queues["a"]] == expected
    forward.park_all(strict=False)
    forward.wake()
    assert [k for _, k in forward.queues.get("a", [])] == expected


@given(st.lists(st.tuples(st.integers(0, 5), st.booleans(), st.booleans()), min_size=1, max_size=12))
def test_a_wake_merges_parked_pods_into_the_queued_ones_in_line_order(pods):
    """Whether or not some pod goes first (with none, the line sorts by its own tuples)."""
    entries = [(created, f"a/p{i}", f, parked) for i, (created, f, parked) in enumerate(pods)]
    first = {key: f for _, key, f, _ in entries}
    q = PendingQueues(first=first.__getitem__)
    for created, key, _, parked in entries:
        if parked:
            q.put_back("a", created, key, strict=False, group=str(created % 2))
        else:
            q.add("a", created, key)
    q.unpark()
    assert [k for _, k in q.queues["a"]] == [k for _, k, _, _ in sorted(entries, key=lambda e: (not e[2], e[0], e[1]))]


@pytest.mark.parametrize(("queueing", "expected"), [
    pytest.param({}, False, id="off-by-default"),
    pytest.param({"soleChoiceFirst": True}, True, id="on-when-asked"),
])
def test_the_policy_option(queueing, expected):
    from audit.policy import parse_policy

    doc = {"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "p"},
           "spec": {"version": "1", "queueing": queueing}}
    policy = parse_policy(doc)
    assert policy.sole_choice_first is expected
    assert (policy.digest == parse_policy({**doc, "spec": {"version": "1"}}).digest) is not expected


def test_a_bad_option_value_is_named():
    from audit.policy import PolicyError, parse_policy

    with pytest.raises(PolicyError) as exc:
        parse_policy({"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "p"},
                      "spec": {"version": "1", "queueing": {"soleChoiceFirst": "yes"}}})
    assert str(exc.value) == "Policy p: spec.queueing.soleChoiceFirst: expected true or false, got str"


def _cluster_day(sole_choice_first: bool):  # noqa: ANN202
    """Five hours of the cluster day (pinned device-plugin pods of team-a and inference beside
    flexible DRA pods; team-b's flood at 3 h contends for capacity), seed 5: of seeds 1 to 8, the
    one whose five hours hold a pass where the option changes what a pod gets (at 03:25)."""
    import copy
    import os

    from ingest.simulate.loop import simulate
    from ingest.simulate.scenario import load_scenario_text

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "ingest", "simulate",
                        "scenarios", "cluster-day.yaml")
    with open(path, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "cluster-day.yaml")
    sc.policy = copy.deepcopy(sc.policy)
    if sole_choice_first:
        sc.policy["spec"]["queueing"] = {"soleChoiceFirst": True}
    return simulate(sc, seed=5, hours=5.0)


def test_the_option_changes_decisions_and_replay_reproduces_them():
    from audit.records import to_jsonl
    from audit.replay.whatif import whatif
    from audit.timestamps import parse_time_ms
    from audit.world import World

    plain, first = _cluster_day(False), _cluster_day(True)
    assert [(r.pod, r.outcome, r.node) for r in plain.records] != [(r.pod, r.outcome, r.node) for r in first.records]
    t0 = parse_time_ms(first.events[0].time)
    since, until = t0 + 3 * 3_600_000 + 777, t0 + 4 * 3_600_000 + 777
    start = World(first.world.cluster)
    for e in first.events:
        if parse_time_ms(e.time) < since:
            start.apply(e)
    policy = first.events[0].payload
    assert policy["spec"]["queueing"]["soleChoiceFirst"] is True
    w = whatif(start, first.events, first.records, policy, since, until)
    assert len(w.recorded.records) > 100
    assert to_jsonl(w.counterfactual.records) == to_jsonl(w.recorded.records)
    assert [e.to_dict() for e in w.counterfactual.events] == [e.to_dict() for e in w.recorded.events]
