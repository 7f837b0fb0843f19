"""A tenant that floods the queue cannot push another active tenant below its entitlement."""

import os

import pytest

from audit.metrics import jain_index, tenant_shares, usage_intervals
from audit.policy import parse_policy, policy_document
from ingest.simulate.loop import simulate
from ingest.simulate.scenario import load_scenario_text

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "scenarios", "fairness.yaml")
HOUR = 3_600_000
CAPACITY = 32


def _run(mode):
    with open(FIXTURE, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "fairness.yaml")
    doc = policy_document(parse_policy(sc.policy))
    doc["spec"]["fairness"]["mode"] = mode
    sc.policy = doc
    result = simulate(sc, seed=3)
    policy = parse_policy(doc)
    intervals = usage_intervals(result.records, result.events, result.end_ms)
    # contention window: the flood is still queued from 1 h to 4 h in both modes
    window = (result.start_ms + HOUR, result.start_ms + 4 * HOUR)
    return tenant_shares(intervals, policy, CAPACITY, window, ["flood", "steady"])


@pytest.fixture(scope="module")
def shares():
    return {mode: _run(mode) for mode in ("drf", "off")}


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
