"""Device taints and request tolerations, including DeviceTaintRules."""

from __future__ import annotations

import pytest

from audit.allocator import AllocatedState, Allocator, Status
from audit.dra.model import DeviceTaint
from tests.allocator.helpers import (
    NODE_1,
    build,
    claim,
    device,
    device_class,
    node,
    picks,
    request,
    resource_slice,
    run,
    taint_rule,
    verdicts,
)

CLASS_A = device_class("class-a")
NO_SCHEDULE = {"key": "example.com/maintenance", "value": "yes", "effect": "NoSchedule"}


def tainted_slice(*taints: dict) -> dict:
    return resource_slice("slice-1", NODE_1, "pool-1", devices=[device("device-1", taints=list(taints)), device("device-2")])


TOLERATION_CASES = [
    pytest.param([NO_SCHEDULE], [], "device-2", id="tainted-device-skipped"),
    pytest.param([{**NO_SCHEDULE, "effect": "NoExecute"}], [], "device-2", id="no-execute-skipped"),
    pytest.param([{**NO_SCHEDULE, "effect": "None"}], [], "device-1", id="effect-none-ignored"),
    pytest.param([{**NO_SCHEDULE, "effect": "PreferNoSchedule"}], [], "device-1", id="unknown-effect-treated-as-none"),
    pytest.param([NO_SCHEDULE], [{"key": "example.com/maintenance", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}],
                 "device-1", id="tolerated-equal"),
    pytest.param([NO_SCHEDULE], [{"key": "example.com/maintenance", "value": "yes"}], "device-1", id="operator-defaults-to-equal"),
    pytest.param([NO_SCHEDULE], [{"key": "example.com/maintenance", "value": "no"}], "device-2", id="equal-value-mismatch"),
    pytest.param([NO_SCHEDULE], [{"operator": "Exists"}], "device-1", id="exists-with-empty-key-tolerates-all"),
    pytest.param([NO_SCHEDULE], [{"key": "example.com/maintenance", "operator": "Exists", "effect": "NoExecute"}], "device-2",
                 id="effect-mismatch"),
    pytest.param([NO_SCHEDULE], [{"key": "example.com/maintenance", "operator": "Lt"}], "device-2", id="unknown-operator-tolerates-nothing"),
    pytest.param([NO_SCHEDULE, {"key": "other", "effect": "NoExecute"}], [{"key": "example.com/maintenance", "operator": "Exists"}],
                 "device-2", id="every-taint-must-be-tolerated"),
]


@pytest.mark.parametrize(("taints", "tolerations", "expected"), TOLERATION_CASES)
def test_taint_toleration(taints: list, tolerations: list, expected: str) -> None:
    outcome = run([CLASS_A, tainted_slice(*taints), claim("claim-0", request("req-0", "class-a", tolerations=tolerations))])
    assert picks(outcome) == [("claim-0", "req-0", f"pool-1/{expected}")]


def test_tolerations_are_copied_into_the_result_defaulted() -> None:
    tol = {"key": "example.com/maintenance", "value": "yes", "tolerationSeconds": 30}
    outcome = run([CLASS_A, tainted_slice(NO_SCHEDULE), claim("claim-0", request("req-0", "class-a", tolerations=[tol]))])
    assert outcome.allocations[0].results[0]["tolerations"] == [
        {"key": "example.com/maintenance", "operator": "Equal", "value": "yes", "tolerationSeconds": 30}]


def test_tainted_admin_access_is_still_blocked() -> None:
    sl = resource_slice("slice-1", NODE_1, "pool-1", devices=[device("device-1", taints=[NO_SCHEDULE])])
    outcome = run([CLASS_A, sl, claim("claim-0", request("req-0", "class-a", admin=True))])
    assert outcome.status is Status.UNSATISFIABLE


def test_taints_ignored_when_gate_disabled() -> None:
    outcome = run([CLASS_A, tainted_slice(NO_SCHEDULE), claim("claim-0", request("req-0", "class-a"))], gates="DRADeviceTaints=false")
    assert picks(outcome) == [("claim-0", "req-0", "pool-1/device-1")]


@pytest.mark.parametrize(("rule_selector", "expected"), [
    pytest.param({"dev": "device-1"}, "device-2", id="rule-by-device"),
    pytest.param({"pool": "pool-1"}, None, id="rule-by-pool-taints-all"),
    pytest.param({"driver": "driver-b"}, "device-1", id="rule-for-other-driver"),
])
def test_device_taint_rule_merged_into_devices(rule_selector: dict, expected: str | None) -> None:
    rule = taint_rule("rule-1", NO_SCHEDULE, **rule_selector)
    outcome = run([CLASS_A, tainted_slice(), rule, claim("claim-0", request("req-0", "class-a"))])
    if expected is None:
        assert outcome.status is Status.UNSATISFIABLE
    else:
        assert picks(outcome) == [("claim-0", "req-0", f"pool-1/{expected}")]


@pytest.mark.parametrize(("key", "reason"), [
    pytest.param("gpu.nvidia.com/unhealthy", "unhealthy", id="health-taint"),
    pytest.param("example.com/maintenance", "taint_not_tolerated", id="other-taint"),
])
def test_untolerated_taint_verdict_distinguishes_health(key: str, reason: str) -> None:
    taint = {"key": key, "effect": "NoExecute"}
    outcome = run([CLASS_A, tainted_slice(taint), claim("claim-0", request("req-0", "class-a"))], explain=True)
    assert verdicts(outcome, "req-0") == {"device-1": reason, "device-2": "selected"}
    detail = outcome.evidence[0].verdicts[0].detail_dict()
    assert detail == {"key": key, "value": "", "effect": "NoExecute"}


def test_health_predicate_is_injectable() -> None:
    inventory, pending, _ = build([CLASS_A, tainted_slice(NO_SCHEDULE), claim("claim-0", request("req-0", "class-a"))])

    def maintenance_is_health(taint: DeviceTaint) -> bool:
        return taint.key == "example.com/maintenance"

    outcome = Allocator(inventory, AllocatedState(), health=maintenance_is_health).allocate(node(), pending, explain=True)
    assert outcome.evidence[0].verdicts[0].reason == "unhealthy"


def test_device_taint_rules_gate_off_ignores_rules() -> None:
    rule = taint_rule("rule-1", NO_SCHEDULE, dev="device-1")
    outcome = run([CLASS_A, tainted_slice(), rule, claim("claim-0", request("req-0", "class-a"))], gates="DRADeviceTaintRules=false")
    assert picks(outcome) == [("claim-0", "req-0", "pool-1/device-1")]
