"""Counterfactual replay: the recorded policy reproduces history; another quota table shows its deltas."""

from __future__ import annotations

import copy
import json

import pytest

from audit.records import to_jsonl
from audit.replay.source import MemorySource
from audit.replay.whatif import deltas, whatif
from audit.timestamps import parse_time_ms
from audit.world import World
from tests.replay.runs import busy

WINDOW_H = 2.5  # before the recorded policy change at 3h


def _window():
    result = busy()
    first = result.events[0]
    assert first.object_kind == "Policy"
    since = parse_time_ms(first.time)
    return result, first.payload, since, since + int(WINDOW_H * 3_600_000)


@pytest.fixture(scope="module")
def same():
    result, doc, since, until = _window()
    return whatif(World(result.world.cluster), result.events, result.records, doc, since, until)


@pytest.fixture(scope="module")
def tighter():
    result, doc, since, until = _window()
    doc = copy.deepcopy(doc)
    for t in doc["spec"]["tenants"]:
        if t["name"] == "team-b":
            t["quotas"] = {"H100": {"nominal": 2, "borrowingLimit": 0}}
    return whatif(World(result.world.cluster), result.events, result.records, doc, since, until)


def test_the_recorded_policy_reproduces_the_history_byte_for_byte(same):
    assert len(same.recorded.records) > 1500
    assert to_jsonl(same.counterfactual.records) == to_jsonl(same.recorded.records)
    assert [e.to_dict() for e in same.counterfactual.events] == [e.to_dict() for e in same.recorded.events]
    d = deltas(same)
    assert all(a == b for a, b in d["tenants"]["team-b"].values())
    assert d["quota_violations"] == [0, 0]


def test_a_tighter_quota_moves_team_b_off_h100_without_violations(same, tighter):
    d = deltas(tighter)
    assert d["quota_violations"] == [0, 0]
    rec_b, cf_b = d["models"]["team-b/H100"]
    assert rec_b > 0 and cf_b < rec_b
    before, after = d["tenants"]["team-b"]["first_choice_rate"]
    assert after < before
    # history diverges from the first team-b allocation that would have needed a third H100
    assert to_jsonl(tighter.counterfactual.records) != to_jsonl(same.recorded.records)
    # nothing in the counterfactual holds more than the limit: each allocation record's world
    held = {}
    for ev in tighter.counterfactual.events:
        if ev.object_kind == "ResourceClaim" and ev.namespace == "team-b":
            results = (((ev.payload.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results")
            held[ev.name] = sum("h100" in r["pool"] for r in results or []) if ev.type == "upsert" else 0
            assert sum(held.values()) <= 2
    assert max(held.values()) >= 1


def test_the_quota_blocker_names_the_new_limit(tighter):
    blocked = [r for r in tighter.counterfactual.records if r.tenant == "team-b"
               and any(b.code == "quota_exhausted" for b in r.blockers)]
    assert blocked
    detail = next(b.detail for b in blocked[0].blockers if b.code == "quota_exhausted")
    assert json.loads(json.dumps(detail))["nominal"] == 2 and detail["limit"] == 2


def test_a_window_in_the_middle_of_history_resumes_the_queues_and_reproduces_it():
    """Pending pods, their retries and which tenants were waiting are recovered at the window start."""
    from audit.replay.source import WorldCursor
    from tests.replay.runs import busy_source

    result = busy()
    t0 = parse_time_ms(result.events[0].time)
    since, until = t0 + 5 * 3_600_000 + 777, t0 + int(7.5 * 3_600_000)
    before = [e for e in result.events if parse_time_ms(e.time) < since]
    active = [e for e in before if e.object_kind == "Policy"][-1].payload
    assert active["spec"]["version"] == "2"  # the window is after the recorded policy change
    start = WorldCursor(busy_source(), result.world.cluster).at(before[-1].seq)
    assert start.pending, "the window must start with pods waiting"
    w = whatif(start, result.events, result.records, active, since, until)
    assert len(w.recorded.records) > 1000
    assert to_jsonl(w.counterfactual.records) == to_jsonl(w.recorded.records)
    assert [e.to_dict() for e in w.counterfactual.events] == [e.to_dict() for e in w.recorded.events]


def _elsewhere(records, cluster: str, shift_ms: int):
    """The records as another cluster of the same scenario would hold them: same pods, other cluster."""
    import dataclasses

    from audit.timestamps import format_time_ms

    return [dataclasses.replace(r, cluster=cluster, time=format_time_ms(parse_time_ms(r.time) + shift_ms))
            for r in records]


@pytest.mark.parametrize("shift_ms", [0, -1_800_000, 1_800_000],
                         ids=["same-times", "half-an-hour-earlier", "half-an-hour-later"])
def test_a_whatif_counts_and_replays_only_its_own_clusters_decisions(shift_ms):
    """Records of another cluster (a store or file holding two) neither count in the recorded
    column nor steer the counterfactual run, even when their pods have this cluster's names."""
    from audit.replay.service import counterfactual

    result = busy(2.0)
    cluster, doc = result.world.cluster, result.events[0].payload
    since = parse_time_ms(result.events[0].time) + 1_800_000
    until = since + 3_600_000
    source = MemorySource(result.events)
    alone = deltas(counterfactual(source, cluster, result.events, result.records, doc, since, until))
    mixed = result.records + _elsewhere(result.records, "elsewhere", shift_ms)
    both = deltas(counterfactual(source, cluster, result.events, mixed, doc, since, until))
    assert both == alone
    assert alone["decisions"][0] == alone["decisions"][1] > 0


@pytest.mark.parametrize(("first", "second"), [
    pytest.param("b", "a", id="placed-first-named-last"),
    pytest.param("a", "b", id="placed-first-named-first"),
])
def test_pods_running_at_the_window_start_that_finish_together_finish_in_the_recorded_order(first, second):
    """Two pods running when the window starts end at the same instant: the counterfactual ends
    them in the order the recorded run did (the order they were placed), not by name, so the
    window's events keep their seqs."""
    from ingest.simulate.loop import Job, Simulator
    from tests.scheduler.worlds import scenario

    sc = scenario()
    t0 = parse_time_ms(sc.start)
    minute = 60_000
    sc.explicit_jobs = [Job(first, "alpha", t0 + minute, 1, 10 * minute, "h100-first"),
                        Job(second, "alpha", t0 + 2 * minute, 1, 9 * minute, "h100-first")]
    result = Simulator(sc, seed=7, hours=0.5).run()
    ends = [(e.name, e.time) for e in result.events if e.object_kind == "Pod" and e.type == "delete"]
    assert ends == [(first, "2026-11-02T00:11:00.000Z"), (second, "2026-11-02T00:11:00.000Z")]
    since = t0 + 5 * minute
    start = World(result.world.cluster)
    for e in result.events:
        if parse_time_ms(e.time) < since:
            start.apply(e)
    w = whatif(start, result.events, result.records, result.events[0].payload, since, t0 + 30 * minute)
    assert [e.to_dict() for e in w.counterfactual.events] == [e.to_dict() for e in w.recorded.events]


def test_a_window_after_a_policy_change_reads_each_wake_under_the_policy_that_armed_it():
    """A strict head deferred for its preferred model under ``wait: 5m`` asked for a wake at 5 min;
    a policy with ``wait: 10m`` came in force at 1 min (no release comes). The wake still decides
    the head again at 5 min, as armed then, and the new policy's end falls back at 10 min. A window
    from 2 min, with the recorded policy, reads that wake under the policy of its record and
    decides as the run did, not at the 10 min the later policy would have armed it."""
    from tests.scheduler.test_policy_change_deadlines import waiting_for_h100
    from tests.scheduler.worlds import MINUTE

    sim, submitted, doc = waiting_for_h100({"mode": "wait-for-preferred", "wait": "5m"},
                                           {"mode": "wait-for-preferred", "wait": "10m"}, 1, 12,
                                           queueing={"mode": "strict"})
    assert [(r.time, r.outcome, r.allocated_model, r.policy_version) for r in sim.records] == [
        ("2026-11-02T00:00:00.000Z", "deferred", "", "1"), ("2026-11-02T00:05:00.000Z", "deferred", "", "2"),
        ("2026-11-02T00:10:00.000Z", "allocated", "A100", "2")]
    since = submitted + 2 * MINUTE
    start = World(sim.world.cluster)
    for e in sim.events:
        if parse_time_ms(e.time) < since:
            start.apply(e)
    w = whatif(start, sim.events, sim.records, doc, since, submitted + 12 * MINUTE)
    assert to_jsonl(w.counterfactual.records) == to_jsonl(w.recorded.records)
    assert [(r.time, r.outcome) for r in w.counterfactual.records] == [
        ("2026-11-02T00:05:00.000Z", "deferred"), ("2026-11-02T00:10:00.000Z", "allocated")]
