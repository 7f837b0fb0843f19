"""A policy's digest names what it says beyond the defaults, so schema growth keeps old digests.

Decisions carry the digest of the policy they were made under, and replay recomputes it from the
recorded document. A digest that moved whenever a defaulted field joined the schema would make
every recorded decision mismatch after an upgrade.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from audit.canonical import digest
from audit.policy import (
    API_VERSION,
    DIGEST_DEFAULTS_VERSION,
    KIND,
    default_policy,
    digest_input,
    parse_policy,
    policy_document,
)


def _minimal(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "prod"}, "spec": {"version": "3", **spec}}


SPELLED_OUT_DEFAULTS = _minimal(
    fairness={"mode": "drf", "usageHalfLife": "1h", "waitAgingPerHour": 0.5, "deferAboveShare": False},
    timeouts={"allocation": "10s", "bindingConditions": "10m", "starvation": "60m"},
    fallback={"mode": "immediate", "wait": "600s", "maxWait": "10m"},
    mixedModels=True,
    health={"unhealthyTaintSuffixes": ["/unhealthy"]},
    preemption={"enabled": False, "minRuntime": "10m"},
)


def test_a_document_spelling_out_the_defaults_has_the_minimal_documents_digest() -> None:
    assert parse_policy(SPELLED_OUT_DEFAULTS).digest == parse_policy(_minimal()).digest


def test_the_minimal_document_is_digested_as_its_name_and_version_alone() -> None:
    policy = parse_policy(_minimal())
    assert policy.digest == digest({"digestDefaults": DIGEST_DEFAULTS_VERSION, "name": "prod", "version": "3"})


def test_a_field_added_at_its_default_leaves_the_digest_unchanged() -> None:
    policy = parse_policy(_minimal(fallback={"mode": "strict"}))
    defaults = default_policy().canonical
    grown = {**policy.canonical, "placement": {"spread": False}, "fallback": {**policy.canonical["fallback"], "maxTier": 8}}
    grown_defaults = {**defaults, "placement": {"spread": False}, "fallback": {**defaults["fallback"], "maxTier": 8}}
    assert digest(digest_input(grown, grown_defaults)) == policy.digest
    assert digest(digest_input(grown, {**grown_defaults, "placement": {"spread": True}})) != policy.digest


@pytest.mark.parametrize(
    ("section", "value"),
    [
        ("fairness", {"mode": "off"}),
        ("fairness", {"usageHalfLife": "2h"}),
        ("fairness", {"deferAboveShare": True}),
        ("retry", {"maxAttempts": 9}),
        ("timeouts", {"starvation": "2h"}),
        ("health", {"unhealthyTaintKeys": ["example.com/xid"]}),
        ("fallback", {"mode": "wait-for-preferred"}),
        ("fallback", {"wait": "5m"}),
        ("fallback", {"mode": "adaptive"}),
        ("fallback", {"maxWait": "20m"}),
        ("mixedModels", False),
        ("preemption", {"enabled": True}),
        ("preemption", {"enabled": True, "minRuntime": "20m"}),
        ("preemption", {"enabled": True, "basis": "fairShare"}),
        ("topology", {"matchAttributes": ["resource.kubernetes.io/pcieRoot"]}),
        ("tenants", [{"name": "vision", "namespaces": ["team-vision"]}]),
        ("deviceModels", [{"model": "H100", "match": "^NVIDIA H100"}]),
    ],
)
def test_any_value_other_than_the_default_changes_the_digest(section: str, value: Any) -> None:
    assert parse_policy(_minimal(**{section: copy.deepcopy(value)})).digest != parse_policy(_minimal()).digest


def test_a_value_equal_to_its_default_but_of_another_type_is_kept() -> None:
    # True == 1 in Python; a boolean that happened to equal a numeric default must still count
    assert digest_input({"a": True, "b": 1.0}, {"a": 1, "b": 1.0}) == {"digestDefaults": DIGEST_DEFAULTS_VERSION, "a": True}


def test_the_recorded_document_digests_back_to_the_policy() -> None:
    policy = parse_policy(_minimal(fallback={"mode": "strict"}, retry={"maxAttempts": 2}))
    assert parse_policy(policy_document(policy)).digest == policy.digest


@pytest.mark.parametrize("preemption", [{"enabled": False}, {"enabled": True}, {"enabled": True, "minRuntime": "90s"},
                                        {"enabled": True, "basis": "fairShare"}])
def test_the_recorded_document_keeps_reclaim_settings(preemption: dict[str, Any]) -> None:
    policy = parse_policy(_minimal(preemption=preemption))
    back = parse_policy(policy_document(policy))
    assert (back.digest, back.preemption, back.preemption_min_runtime_ms, back.preemption_basis) == (
        policy.digest, policy.preemption, policy.preemption_min_runtime_ms, policy.preemption_basis)


def test_a_policy_without_reclaim_records_the_same_document_as_before() -> None:
    # the Policy event the simulator writes for such a policy is part of every pinned chain digest
    assert policy_document(default_policy())["spec"]["preemption"] == {"enabled": False}
