"""A tenant that floods the queue cannot push another active tenant below its entitlement."""

import os

import pytest

from audit.metrics import jain_index, tenant_shares, usage_intervals
from audit.policy import parse_policy, policy_document
from ingest.simulate.loop import simulate
from ingest.simulate.scenario import load_scenario_text
from tests.simulate.runs import replay_every_decision

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "scenarios", "fairness.yaml")
HOUR = 3_600_000
CAPACITY = 32


def _simulate(mode, defer=False):
    with open(FIXTURE, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "fairness.yaml")
    doc = policy_document(parse_policy(sc.policy))
    doc["spec"]["fairness"]["mode"] = mode
    doc["spec"]["fairness"]["deferAboveShare"] = defer
    sc.policy = doc
    return doc, simulate(sc, seed=3)


def _run(mode, defer=False):
    doc, result = _simulate(mode, defer)
    policy = parse_policy(doc)
    intervals = usage_intervals(result.records, result.events, result.end_ms)
    # contention window: the flood is still queued from 1 h to 4 h in both modes
    window = (result.start_ms + HOUR, result.start_ms + 4 * HOUR)
    return tenant_shares(intervals, policy, CAPACITY, window, ["flood", "steady"])


@pytest.fixture(scope="module")
def shares():
    return {mode: _run(mode) for mode in ("drf", "off")} | {"drf+defer": _run("drf", defer=True)}


def test_fairness_on_keeps_both_tenants_at_entitlement(shares):
    s = shares["drf"]
    jain = jain_index(x.normalized for x in s.values())
    assert jain >= 0.95, {t: round(x.normalized, 3) for t, x in s.items()}
    assert s["steady"].normalized >= 0.9


def test_fairness_off_shows_the_starvation(shares):
    s = shares["off"]
    jain = jain_index(x.normalized for x in s.values())
    assert jain < 0.8, {t: round(x.normalized, 3) for t, x in s.items()}
    assert s["steady"].normalized < 0.3


def test_deferring_tenants_above_their_share_keeps_fairness_and_says_why(shares):
    s = shares["drf+defer"]
    assert jain_index(x.normalized for x in s.values()) >= 0.95
    _, result = _simulate("drf", defer=True)
    deferred = [r for r in result.records if r.outcome == "deferred"]
    assert "flood" in {r.tenant for r in deferred}
    for r in deferred:
        b = r.blockers[-1]
        other = {"flood": "steady", "steady": "flood"}[r.tenant]
        assert (b.code, b.detail["waiting_tenant"], b.detail["entitlement_eq"]) == ("fair_share_deferred", other, 16.0)
        assert b.detail["held_eq"] >= 16.0 > b.detail["waiting_held_eq"]
        assert (r.retry_class, r.tiers[0].reasons) == ("fair_share", {"fair_share_deferred": 32})
        # a deferred pod waits parked until the deferral lifts: only a first attempt is deferred
        assert r.attempt == 1, (r.pod, r.attempt)
    # every decision of the day, deferrals included, replays from the event log to its digests
    assert replay_every_decision(result) == len(result.records)
    # without the option nobody is deferred
    assert not any(r.outcome == "deferred" for r in _simulate("drf")[1].records)
