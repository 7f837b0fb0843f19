"""Explaining from a stored decision alone: counts, blockers, outcome and the sentence."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.explain import explain_record
from audit.records import Reason
from tests.api import factory


def test_fallback_sentence_names_counts_quota_and_the_allocation() -> None:
    answer = explain_record(factory.FALLBACK, "H100")
    assert answer.skipped is True
    assert answer.reasons == {"node_filtered": 16, "in_use": 40, "unhealthy": 8}
    assert answer.blockers == [{"code": "quota_exhausted", "tier": 0, "model": "H100", "used": 8, "requested": 1,
                                "nominal": 8, "limit": 8}]
    assert answer.summary == (
        "H100 skipped: of 64 H100, 16 on nodes the pod cannot use, 40 in use, 8 unhealthy "
        "(taint gpu.nvidia.com/unhealthy); tenant quota 8/8 H100 used. "
        "Allocated A100 gpu-3 on node a100-07 (tier 1) under policy v7.")
    assert answer.outcome == {"result": "allocated", "model": "A100", "devices": ["gpu.nvidia.com/a100-07/gpu-3"],
                              "node": "a100-07", "tier": 1, "retry_class": "", "fallback": True}


def test_allocated_model_is_not_skipped() -> None:
    answer = explain_record(factory.GOT_H100, "H100")
    assert answer.skipped is False
    assert answer.reasons == {"selected": 1, "in_use": 10, "available": 53}
    assert answer.summary.startswith("H100 chosen: of 64 H100, 1 allocated to this pod, 10 in use, 53 available.")
    assert answer.summary.endswith("Allocated H100 gpu-0 on node h100-02 (tier 0) under policy v7.")


def test_pending_decision_names_its_retry_class() -> None:
    answer = explain_record(factory.PENDING, "A100")
    assert answer.reasons == {"in_use": 8}
    assert answer.summary == ("A100 skipped: of 8 A100, 8 in use. "
                              "Pod not allocated (unschedulable, retry class unschedulable) under policy v7.")


def test_fair_share_deferral_shows_both_shares() -> None:
    answer = explain_record(factory.DEFERRED, "H100")
    assert answer.blockers[0]["code"] == "fair_share_deferred"
    assert "deferred for fair share (tenant share 0.62 vs 0.18 for team-a)" in answer.summary


def test_model_outside_the_preference_is_not_requested() -> None:
    answer = explain_record(factory.FALLBACK, "L40S")
    assert answer.reasons == {}
    assert answer.blockers == [{"code": "not_requested", "preference": ["H100", "A100"]}]
    assert answer.summary.startswith("L40S skipped: no L40S visible to the pod's claims; "
                                     "L40S is not in the pod's preference list (H100, A100).")


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from([r.value for r in Reason]), st.integers(min_value=0, max_value=500),
                       min_size=1))
def test_reason_counts_add_up_to_the_devices_the_tier_considered(reasons: dict[str, int]) -> None:
    record = factory._record(9, "team-a", "team-a", "p", "unschedulable", tiers=[factory.h100_tier(reasons)])
    answer = explain_record(record, "H100")
    assert answer.visible == record.tiers[0].considered
    assert all(n > 0 for n in answer.reasons.values())
    assert f"of {answer.visible} H100" in answer.summary or answer.visible == 0


@pytest.mark.parametrize("model", ["H100", "A100"], ids=["preferred", "fallback"])
def test_explanation_json_has_the_documented_keys(model: str) -> None:
    body = explain_record(factory.FALLBACK, model).to_dict()
    assert set(body) == {"pod", "decision_id", "model", "skipped", "outcome", "reasons", "blockers", "summary",
                         "policy_version"}
    assert body["pod"] == "team-a/train-1" and body["decision_id"] == factory.FALLBACK.decision_id


def test_a_model_only_a_tier_of_several_models_asks_for_is_answered_from_that_tier() -> None:
    """The preference list names L40S in its last tier: the answer comes from that tier, whose
    counts cover all its models, and says so."""
    from audit.records import TierSummary

    anyone = TierSummary(index=2, request="gpu/compatible", model="A100|H100|L40S", considered=424,
                         reasons={"in_use": 409, "not_reached": 15})
    record = factory._record(15, "team-a", "team-a", "p", "unschedulable", retry_class="unschedulable",
                             tiers=[factory.h100_tier({"in_use": 112}), factory.a100_tier({"in_use": 192}), anyone])
    answer = explain_record(record, "L40S")
    assert answer.reasons == {"in_use": 409, "available": 15}
    assert answer.summary == ("L40S skipped: of 424 A100|H100|L40S, 409 in use, 15 available. Pod not allocated "
                              "(unschedulable, retry class unschedulable) under policy v7.")
