"""The replay service's own rules: which policy a version names, and how ids not found are answered."""

from __future__ import annotations

import pytest

from audit.events import WorldEvent
from audit.replay.service import PolicyNotFound, not_found, policy_by_version, verify_ids
from audit.replay.source import MemorySource


def _policy(seq: int, version: str, fallback: str) -> WorldEvent:
    return WorldEvent(cluster="c", seq=seq, time=f"2026-11-01T00:00:0{seq}Z", type="upsert", object_kind="Policy",
                      namespace="", name="policy", payload={"spec": {"version": version, "fallback": fallback}})


HISTORY = [_policy(0, "v1", "immediate"), _policy(1, "v2", "never"), _policy(2, "v1", "after")]


@pytest.mark.parametrize(("version", "fallback"), [("v1", "after"), ("v2", "never")],
                         ids=["latest-of-a-version-twice", "only-one"])
def test_a_version_names_the_latest_policy_event_that_carries_it(version: str, fallback: str) -> None:
    doc = policy_by_version(HISTORY, version)
    assert doc == {"kind": "Policy", "spec": {"version": version, "fallback": fallback}}


def test_a_version_no_policy_event_carries_is_not_found_by_name() -> None:
    with pytest.raises(PolicyNotFound, match=r"^policy version 'v3' not found in the cluster's history$"):
        policy_by_version(HISTORY, "v3")


class _NoDecisions(MemorySource):
    def get_decisions(self, decision_ids, tenant):  # noqa: ANN001, ANN201 - the History protocol's shape
        return {}


def test_ids_not_found_are_answered_once_each_as_missing_events() -> None:
    results = verify_ids(_NoDecisions(HISTORY), ["a", "b", "a"])
    assert [r.to_dict() for r in results] == [not_found("a").to_dict(), not_found("b").to_dict()]
    assert results[0].to_dict() == {"decision_id": "a", "engine_version": "", "policy_digest": "", "match": False,
                                    "cause": "missing_events", "diff": ["decision a: not found"], "observed": False}
