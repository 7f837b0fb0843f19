"""A tenant that floods the queue cannot push another active tenant below its entitlement.

Judged by the defined figures (``audit.metrics.fairness_report``: H100-eq-hours against the
weighted entitlement, and Jain's index over them) while the flood is still queued, 1 h to 4 h
into the run in every mode: the two tenants weigh the same, so each is entitled to 48 of the 32
GPUs' 96 H100-eq-hours."""

import os

import pytest

from audit.metrics import Window, fairness_report, fold_lifecycle
from audit.policy import parse_policy, policy_document
from ingest.simulate.loop import simulate
from ingest.simulate.scenario import load_scenario_text
from tests.simulate.runs import replay_every_decision

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "scenarios", "fairness.yaml")
HOUR = 3_600_000


def _simulate(mode, defer=False):
    with open(FIXTURE, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "fairness.yaml")
    doc = policy_document(parse_policy(sc.policy))
    doc["spec"]["fairness"]["mode"] = mode
    doc["spec"]["fairness"]["deferAboveShare"] = defer
    sc.policy = doc
    return doc, simulate(sc, seed=3)


def _run(mode, defer=False):
    _, result = _simulate(mode, defer)
    life = fold_lifecycle(result.events, result.world.cluster)
    report = fairness_report(life, Window(result.start_ms + HOUR, result.start_ms + 4 * HOUR))
    assert [t["entitlement_h100_eq_hours"] for t in report["tenants"]] == [48.0, 48.0]
    return report


def share(report, tenant):
    """The tenant's H100-eq-hours over its entitlement."""
    row = next(t for t in report["tenants"] if t["tenant"] == tenant)
    return row["h100_eq_hours"] / row["entitlement_h100_eq_hours"]


@pytest.fixture(scope="module")
def reports():
    return {mode: _run(mode) for mode in ("drf", "off")} | {"drf+defer": _run("drf", defer=True)}


def test_fairness_on_keeps_both_tenants_at_entitlement(reports):
    r = reports["drf"]
    assert r["jain_whole"] >= 0.99, r["tenants"]
    assert share(r, "steady") >= 0.95


def test_fairness_off_shows_the_starvation(reports):
    r = reports["off"]
    assert r["jain_whole"] < 0.6, r["tenants"]
    assert share(r, "steady") < 0.1


def test_deferring_tenants_above_their_share_keeps_fairness_and_says_why(reports):
    r = reports["drf+defer"]
    assert (r["jain_whole"], share(r, "flood"), share(r, "steady")) == (1.0, 1.0, 1.0)
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
