"""Up-front checks and fatal errors carry upstream's exact texts."""

from __future__ import annotations

import pytest

from audit.allocator import Status
from tests.allocator.helpers import (
    NODE_1,
    claim,
    device,
    device_class,
    exact,
    first_available,
    request,
    resource_slice,
    run,
    sub,
)

SLICE = resource_slice("slice-1", NODE_1, "pool-1", devices=[device("device-1", {"model": "a"}), device("device-2", {"model": "b"})])
CLASS_A = device_class("class-a")


def no_cel_selector() -> dict:
    req = request("req-0", "class-a")
    req["exactly"]["selectors"] = [{}]
    return req


CASES = [
    pytest.param([first_available("req-0", sub("sub-0", "class-a"))], "DRAPrioritizedList=false", "feature_disabled",
                 "claim default/claim-0, request req-0: has subrequests, but the DRAPrioritizedList feature is disabled",
                 id="subrequests-with-prioritized-list-disabled"),
    pytest.param([request("req-0", "class-a", capacity={"memory": "1Gi"})], "DRAConsumableCapacity=false", "feature_disabled",
                 "claim default/claim-0, request req-0: has capacity requests, but the DRAConsumableCapacity feature is disabled",
                 id="capacity-requests-with-consumable-capacity-disabled"),
    pytest.param([no_cel_selector()], "", "unsupported_selector",
                 "claim default/claim-0, request req-0, selector #0: CEL expression empty (unsupported selector type?)",
                 id="unknown-selector"),
    pytest.param([request("req-0", "class-a", admin=False)], "DRAAdminAccess=false", "feature_disabled",
                 "claim default/claim-0, request req-0: admin access is requested, but the feature is disabled",
                 id="admin-access-field-set-false-with-gate-disabled"),
    pytest.param([{"name": "req-0", "exactly": {"deviceClassName": ""}}], "", "unsupported_request",
                 "claim default/claim-0, request req-0: missing device class name (unsupported request type?)",
                 id="missing-class-name"),
    pytest.param([{"name": "req-0"}], "", "unsupported_request",
                 "claim default/claim-0, request req-0: missing device class name (unsupported request type?)",
                 id="request-without-exactly-or-first-available"),
    pytest.param([request("req-0", "class-x")], "", "class_not_found",
                 'claim default/claim-0, request req-0: could not retrieve device class class-x: '
                 'deviceclass.resource.k8s.io "class-x" not found',
                 id="missing-class"),
    pytest.param([request("req-0", "class-a", mode="Other")], "", "unsupported_mode",
                 "claim default/claim-0, request req-0: unsupported count mode Other", id="unknown-allocation-mode"),
    pytest.param([first_available("req-0", sub("sub-0", "class-a", mode="Other"))], "", "unsupported_mode",
                 "claim default/claim-0, request sub-0: unsupported count mode Other", id="unknown-allocation-mode-in-subrequest"),
    pytest.param([request("req-0", "class-a", 33)], "", "too_many_devices",
                 "claim default/claim-0: number of requested devices 33 exceeds the claim limit of 32",
                 id="too-many-devices-single-request"),
    pytest.param([request("req-0", "class-a", 16), request("req-1", "class-a", 17)], "", "too_many_devices",
                 "claim default/claim-0: number of requested devices 33 exceeds the claim limit of 32",
                 id="too-many-devices-total"),
    pytest.param([request("req-0", "class-a", 31), first_available("req-1", sub("sub-0", "class-a", 3), sub("sub-1", "class-a", 2))],
                 "", "too_many_devices", "claim default/claim-0: number of requested devices 33 exceeds the claim limit of 32",
                 id="too-many-devices-counts-smallest-subrequest"),
    pytest.param([request("req-0", "class-a", selectors=["device.attributes['driver-a'].model =="])], "", "cel_compile",
                 None, id="invalid-cel-in-request"),
    pytest.param([request("req-0", "class-a", selectors=["device.attributes['driver-a'].missing == 'x'"])], "", "cel_runtime",
                 "claim default/claim-0: selector #0: CEL runtime error: no such key: missing", id="missing-attribute-runtime-error"),
]


@pytest.mark.parametrize(("requests", "gates", "code", "message"), CASES)
def test_fatal_error_text(requests: list, gates: str, code: str, message: str | None) -> None:
    outcome = run([CLASS_A, SLICE, claim("claim-0", *requests)], gates=gates)
    assert outcome.status is Status.ERROR
    assert outcome.error_code == code
    if message is not None:
        assert outcome.message == message
    else:
        assert outcome.message.startswith("claim default/claim-0: selector #0: CEL compile error: ")


@pytest.mark.parametrize(("constraint", "gates"), [
    pytest.param({}, "", id="empty-constraint"),
    # Only the stable allocator lacks distinctAttribute: no consumable capacity and no binding conditions.
    pytest.param({"distinctAttribute": "driver-a/model"}, "DRAConsumableCapacity=false,DRADeviceBindingConditions=false",
                 id="distinct-attribute-unknown-to-stable-allocator"),
])
def test_unknown_constraint_is_fatal(constraint: dict, gates: str) -> None:
    outcome = run([CLASS_A, SLICE, claim("claim-0", request("req-0", "class-a"), constraints=[constraint])], gates=gates)
    assert (outcome.status, outcome.message) == (
        Status.ERROR, "claim default/claim-0, constraint #0: empty constraint (unsupported constraint type?)")


def test_class_selector_compile_error_names_the_class() -> None:
    broken = device_class("class-a", selectors=["device.attributes['driver-a'].model =="])
    outcome = run([broken, SLICE, claim("claim-0", request("req-0", "class-a"))])
    assert outcome.status is Status.ERROR
    assert outcome.error_code == "cel_compile"
    assert outcome.message.startswith("class class-a: selector #1: CEL compile error: ")


def test_class_selector_runtime_error_names_the_class() -> None:
    broken = device_class("class-a", selectors=["device.attributes['driver-a'].nope == 1"])
    outcome = run([broken, SLICE, claim("claim-0", request("req-0", "class-a"))])
    assert (outcome.status, outcome.message) == (Status.ERROR, "class class-a: selector #1: CEL runtime error: no such key: nope")


def test_runtime_error_only_when_the_search_reaches_the_device() -> None:
    # device-1 has the attribute and satisfies the request, so device-2 (without it) is never evaluated.
    sl = resource_slice("slice-1", NODE_1, "pool-1", devices=[device("device-1", {"extra": 1}), device("device-2")])
    selector = ["device.attributes['driver-a'].extra == 1"]
    ok = run([CLASS_A, sl, claim("claim-0", request("req-0", "class-a", selectors=selector))])
    assert ok.status is Status.SUCCESS
    failing = run([CLASS_A, sl, claim("claim-0", request("req-0", "class-a", 2, selectors=selector))])
    assert (failing.status, failing.error_code) == (Status.ERROR, "cel_runtime")


def test_the_first_error_in_claim_order_wins() -> None:
    outcome = run([CLASS_A, SLICE, claim("claim-0", request("req-0", "class-a", mode="Bad")),
                   claim("claim-1", request("req-0", "class-missing"))])
    assert outcome.message == "claim default/claim-0, request req-0: unsupported count mode Bad"


def test_exact_request_without_subrequests_checks_class_before_mode() -> None:
    outcome = run([SLICE, claim("claim-0", {"name": "req-0", "exactly": exact("class-x", mode="Bad")})])
    assert outcome.error_code == "class_not_found"


def test_unparsable_capacity_is_an_inventory_error() -> None:
    sl = resource_slice("slice-1", NODE_1, "pool-1", devices=[device("device-1", capacity={"memory": {"value": "lots"}})])
    outcome = run([CLASS_A, sl, claim("claim-0", request("req-0", "class-a"))])
    assert (outcome.status, outcome.error_code) == (Status.ERROR, "invalid_inventory")
    assert outcome.message.startswith("ResourceSlice slice-1: spec.devices[0].capacity.memory.value: quantities must match")


def test_device_node_selector_with_two_terms_cannot_be_a_result() -> None:
    two_terms = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE_1]}]},
                                       {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]}
    sl = resource_slice("slice-1", None, "pool-1", nodeSelector=two_terms, devices=[device("device-1")])
    outcome = run([device_class("class-n", driver=None), sl, claim("claim-0", request("req-0", "class-n"))])
    assert (outcome.status, outcome.message) == (Status.ERROR, "unsupported ResourceSlice.NodeSelector with 2 terms")
