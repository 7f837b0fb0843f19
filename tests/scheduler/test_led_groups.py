"""A wake that lets a whole group of alike parked pods through queues only the first of them, the
lead; the rest wait behind it and join the queue one at a time as each lead leaves it. Picks, parks
and decisions are the same as with every pod queued at once."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest

from audit.records import to_jsonl
from audit.scheduler.loop import ClusterLoop
from audit.scheduler.pending import PendingQueues
from benchmarks.cluster_day import cluster_day
from ingest.simulate.loop import simulate
from tests.scheduler.worlds import cluster, submit

GROUP = ("alpha", "g")


def _parked_three() -> tuple[object, PendingQueues, list[str]]:
    """Three pods of alpha, oldest first, parked in one group in another order than their age."""
    sim = cluster(fairness={"mode": "off"})
    keys = []
    for name in ("p1", "p2", "p3"):
        keys.append(submit(sim, name))
        sim.now += 1000
    queues = PendingQueues()
    for key in (keys[2], keys[0], keys[1]):
        queues.put_back("alpha", sim.world.pending[key], key, strict=False, group="g")
    return sim, queues, keys


def _line(queues: PendingQueues) -> tuple[list[str], list[str], list[str]]:
    """(queued, behind the lead, parked) pod keys of the group's tenant."""
    return ([k for _, k in queues.queues.get("alpha", [])], [k for _, k in queues.behind.get(GROUP, [])],
            [k for _, k in queues.parked.get(GROUP, [])])


def test_parked_pods_of_a_group_wait_oldest_first():
    _, queues, keys = _parked_three()
    assert _line(queues) == ([], [], keys)


@pytest.mark.parametrize(("alike", "queued", "behind"), [
    pytest.param(True, ["alpha/p1"], ["alpha/p2", "alpha/p3"], id="alike-the-oldest-leads-the-rest-wait-behind-it"),
    pytest.param(False, ["alpha/p1", "alpha/p2", "alpha/p3"], [], id="not-alike-every-pod-is-queued"),
])
def test_a_wake_queues_one_lead_for_a_group_of_alike_pods(alike, queued, behind):
    _, queues, _ = _parked_three()
    queues.unpark(lambda tenant, pods: pods, lambda tenant: alike)
    assert _line(queues) == (queued, behind, [])
    assert queues.waiting() == 3


def test_each_pick_of_a_lead_queues_the_next_pod_of_its_group():
    sim, queues, keys = _parked_three()
    queues.unpark(lambda tenant, pods: pods, lambda tenant: True)
    picked = []
    while (nxt := queues.pop_next(sim.world, sim.world.policy, sim.now)) is not None:
        picked.append(nxt[1])
        assert _line(queues)[0] == keys[len(picked):len(picked) + 1]  # the next one and no other
    assert picked == keys
    assert queues.behind == {} and queues.waiting() == 0


def test_a_lead_parked_again_takes_the_pods_it_led_with_it():
    _, queues, keys = _parked_three()
    queues.unpark(lambda tenant, pods: pods, lambda tenant: True)
    queues.park_all(strict=False, group=lambda key: "g")
    assert _line(queues) == ([], [], keys)


@pytest.mark.parametrize(("gone", "after"), [
    pytest.param("alpha/p1", (["alpha/p2"], ["alpha/p3"], []), id="a-lead-deleted-hands-over-to-the-next"),
    pytest.param("alpha/p2", (["alpha/p1"], ["alpha/p3"], []), id="a-pod-behind-the-lead-deleted-leaves-the-line"),
])
def test_a_deleted_pod_of_a_led_group(gone, after):
    _, queues, _ = _parked_three()
    queues.unpark(lambda tenant, pods: pods, lambda tenant: True)
    queues.discard(gone)
    assert _line(queues) == after


def test_a_wake_of_every_pod_queues_those_behind_a_lead_too():
    _, queues, keys = _parked_three()
    queues.unpark(lambda tenant, pods: pods, lambda tenant: True)
    queues.unpark()
    assert _line(queues) == (keys, [], [])


def test_pods_parked_at_a_windows_start_are_never_led():
    """``park_all`` parks pods that may never have been tried, whose first attempt must be made."""
    sim = cluster()
    keys = [submit(sim, f"p{i}") for i in range(3)]
    queues = PendingQueues()
    for key in keys:
        queues.add("alpha", sim.world.pending[key], key)
    queues.park_all(strict=False, group=lambda key: "g")
    queues.unpark(lambda tenant, pods: pods, lambda tenant: True)
    assert _line(queues) == (keys, [], [])


@pytest.mark.parametrize(("spec", "alike"), [
    pytest.param({}, True, id="immediate-fallback-best-effort"),
    pytest.param({"fallback": {"mode": "strict"}}, True, id="strict-fallback-holds-every-pod-alike"),
    pytest.param({"queueing": {"mode": "strict"}}, False, id="strict-queueing-parks-nothing"),
    pytest.param({"fallback": {"mode": "wait-for-preferred", "wait": "5m"}}, False, id="a-hold-that-ends-with-age"),
    pytest.param({"fallback": {"mode": "adaptive", "maxWait": "10m"}}, False, id="an-adaptive-hold-per-pod"),
    pytest.param({"queueing": {"mode": "best-effort", "reserveAfter": "10m"}}, False, id="reservations"),
    pytest.param({"queueing": {"mode": "best-effort", "soleChoiceFirst": True}}, False,
                 id="a-place-in-line-read-on-joining"),
])
def test_pods_of_one_spec_are_alike_only_where_nothing_but_the_world_tells_them_apart(spec, alike):
    assert cluster(**spec)._alike("alpha") is alike


def _day(policy: dict, alike: bool, monkeypatch: pytest.MonkeyPatch) -> tuple[str, int]:
    """Six hours of the default scenario under ``policy`` (merged into its policies' specs): the
    records' digest, and how many times a lead handed over to the pod behind it."""
    sc = cluster_day(lambda spec: spec.update(policy))
    handed = Counter()
    promote = PendingQueues._promote

    def counted(self: PendingQueues, key: str) -> None:
        handed["over"] += bool(self.behind.get(self._lead.get(key)))
        promote(self, key)

    monkeypatch.setattr(PendingQueues, "_promote", counted)
    if not alike:
        monkeypatch.setattr(ClusterLoop, "_alike", lambda self, tenant: False)
    result = simulate(sc, seed=1, hours=6)
    monkeypatch.undo()
    return hashlib.sha256(to_jsonl(result.records).encode()).hexdigest(), handed["over"]


@pytest.mark.slow
@pytest.mark.parametrize("policy", [
    pytest.param({}, id="drf-immediate-fallback"),
    pytest.param({"fairness": {"mode": "off"}}, id="fifo-with-backfill"),
    pytest.param({"fairness": {"mode": "drf", "deferAboveShare": True}}, id="fair-share-deferral"),
    pytest.param({"preemption": {"enabled": True, "minRuntime": "10m"}}, id="reclaim-of-quota"),
])
def test_leading_alike_pods_changes_no_decision(policy, monkeypatch):
    lazy, handed = _day(policy, True, monkeypatch)
    eager, none = _day(policy, False, monkeypatch)
    assert handed > 0 and none == 0  # leads were used, and only where allowed
    assert lazy == eager
