"""A policy activation is a world event; each decision names the policy in force at its seq."""

from audit.policy import parse_policy
from ingest.simulate.loop import simulate
from ingest.simulate.scenario import load_scenario_text
from tests.simulate.runs import SCENARIO

HOUR = 3_600_000


def test_decisions_name_the_policy_active_at_their_seq():
    with open(SCENARIO, encoding="utf-8") as fh:
        sc = load_scenario_text(fh.read(), "cluster-day.yaml")
    new_doc = sc.policy_changes[0][1]
    sc.policy_changes = [(HOUR, new_doc)]
    result = simulate(sc, seed=2, hours=2)
    old, new = parse_policy(sc.policy), parse_policy(new_doc)
    change = next(e for e in result.events if e.object_kind == "Policy" and e.payload["spec"]["version"] == new.version)
    before = [r for r in result.records if r.seq < change.seq]
    after = [r for r in result.records if r.seq > change.seq]
    assert before and after
    assert {(r.policy_version, r.policy_digest) for r in before} == {(old.version, old.digest)}
    assert {(r.policy_version, r.policy_digest) for r in after} == {(new.version, new.digest)}
    # the new policy waits for H100 before falling back: its first-hour records include such deferrals
    # (of DRA pods: device-plugin pods are deferred on quota under either policy)
    assert any(r.outcome == "deferred" and r.track == "dra" for r in after)
    assert not any(r.outcome == "deferred" and r.track == "dra" for r in before)
