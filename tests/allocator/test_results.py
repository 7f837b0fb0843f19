"""The allocation result echoed byte-exactly: results, config and node selector."""

from __future__ import annotations

import pytest

from audit.allocator import Quirks
from tests.allocator.helpers import (
    NODE_1,
    claim,
    device,
    device_class,
    first_available,
    opaque,
    request,
    resource_slice,
    run,
    sub,
)

CLASS_A = device_class("class-a", config=[opaque("driver-a", {"kind": "class"})])
CLASS_B = device_class("class-b", config=[opaque("driver-a", {"kind": "b1"}), opaque("driver-a", {"kind": "b2"})])
LOCAL = resource_slice("slice-1", NODE_1, "pool-1", devices=[device(f"device-{i}") for i in range(1, 5)])
LOCAL_SELECTOR = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE_1]}]}]}


def test_simple_result_shape() -> None:
    outcome = run([CLASS_A, LOCAL, claim("claim-0", request("req-0", "class-a"))])
    assert outcome.allocations[0].to_api() == {
        "claim": "claim-0",
        "results": [{"request": "req-0", "driver": "driver-a", "pool": "pool-1", "device": "device-1"}],
        "nodeSelector": LOCAL_SELECTOR,
        "config": [{"source": "FromClass", "requests": ["req-0"], "opaque": {"driver": "driver-a", "parameters": {"kind": "class"}}}],
    }


def test_admin_access_only_when_true() -> None:
    outcome = run([CLASS_A, LOCAL, claim("claim-0", request("req-0", "class-a", admin=True), request("req-1", "class-a", admin=False))])
    assert [r.get("adminAccess") for r in outcome.allocations[0].results] == [True, None]


def test_class_configs_collect_requests_of_the_same_class() -> None:
    objs = [CLASS_A, CLASS_B, LOCAL, claim("claim-0", request("req-0", "class-b"), request("req-1", "class-a"), request("req-2", "class-b"))]
    config = run(objs).allocations[0].config
    assert [(c["source"], c["requests"], c["opaque"]["parameters"]["kind"]) for c in config] == [
        ("FromClass", ["req-0", "req-2"], "b1"), ("FromClass", ["req-0", "req-2"], "b2"), ("FromClass", ["req-1"], "class")]


def test_class_config_names_the_chosen_subrequest() -> None:
    objs = [CLASS_A, LOCAL, claim("claim-0", first_available("req-0", sub("sub-0", "class-a")))]
    assert run(objs).allocations[0].config[0]["requests"] == ["req-0/sub-0"]


@pytest.mark.parametrize(("quirks", "copies"), [
    pytest.param(Quirks(), 2, id="claim-config-copied-per-named-request-1.36"),
    pytest.param(Quirks(config_duplicates=False), 1, id="claim-config-copied-once-fixed"),
])
def test_claim_config_duplicate_quirk(quirks: Quirks, copies: int) -> None:
    cfg = {"requests": ["req-0", "req-1"], **opaque("driver-a", {"kind": "claim"})}
    everywhere = opaque("driver-a", {"kind": "all"})
    objs = [device_class("class-n"), LOCAL, claim("claim-0", request("req-0", "class-n"), request("req-1", "class-n"),
                                                  config=[everywhere, cfg])]
    config = run(objs, quirks=quirks).allocations[0].config
    assert config[0] == {"source": "FromClaim", **everywhere}
    assert config[1:] == [{"source": "FromClaim", "requests": ["req-0", "req-1"], **opaque("driver-a", {"kind": "claim"})}] * copies


def test_claim_config_for_a_subrequest() -> None:
    cfg = {"requests": ["req-0/sub-1"], **opaque("driver-a", {"kind": "sub"})}
    objs = [device_class("class-n"), LOCAL,
            claim("claim-0", first_available("req-0", sub("sub-0", "class-n", 9), sub("sub-1", "class-n")), config=[cfg])]
    outcome = run(objs)
    assert outcome.allocations[0].results[0]["request"] == "req-0/sub-1"
    assert outcome.allocations[0].config == [{"source": "FromClaim", **cfg}]


REGION = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["east"]}]}]}
RACK = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "rack", "operator": "Exists"}]}]}


@pytest.mark.parametrize(("slices", "expected"), [
    pytest.param([resource_slice("slice-1", None, "pool-1", allNodes=True, devices=[device("d-1"), device("d-2")])], None,
                 id="all-nodes-devices-have-no-selector"),
    pytest.param([resource_slice("slice-1", None, "pool-1", nodeSelector=REGION, devices=[device("d-1"), device("d-2")])], REGION,
                 id="network-attached-device-selector"),
    pytest.param([resource_slice("slice-1", None, "pool-1", nodeSelector=REGION, devices=[device("d-1")]),
                  resource_slice("slice-2", None, "pool-2", nodeSelector=RACK, devices=[device("d-2")])],
                 {"nodeSelectorTerms": [{"matchExpressions": [{"key": "region", "operator": "In", "values": ["east"]},
                                                              {"key": "rack", "operator": "Exists"}]}]},
                 id="union-of-two-node-selectors"),
    pytest.param([resource_slice("slice-1", None, "pool-1", nodeSelector=REGION, devices=[device("d-1")]),
                  resource_slice("slice-2", NODE_1, "pool-2", devices=[device("d-2")])], LOCAL_SELECTOR,
                 id="one-node-local-device-pins-the-node"),
    pytest.param([resource_slice("slice-1", None, "pool-1", allNodes=True, devices=[device("d-1", bindsToNode=True), device("d-2")])],
                 LOCAL_SELECTOR, id="binds-to-node-pins-the-node"),
])
def test_node_selector(slices: list, expected: dict | None) -> None:
    outcome = run([device_class("class-n"), *slices, claim("claim-0", request("req-0", "class-n", 2))],
                  labels={"region": "east", "rack": "r1"})
    assert outcome.allocations[0].node_selector == expected


def test_binding_conditions_copied_when_enabled() -> None:
    dev = device("d-1", bindingConditions=["attached"], bindingFailureConditions=["failed"])
    objs = [device_class("class-n"), resource_slice("slice-1", NODE_1, "pool-1", devices=[dev]), claim("claim-0", request("req-0", "class-n"))]
    res = run(objs).allocations[0].results[0]
    assert (res["bindingConditions"], res["bindingFailureConditions"]) == (["attached"], ["failed"])
    assert run(objs, gates="DRADeviceBindingConditions=false").status.value == "unsatisfiable"


def test_config_omitted_fields_stay_omitted() -> None:
    outcome = run([device_class("class-n"), LOCAL, claim("claim-0", request("req-0", "class-n"))])
    assert outcome.allocations[0].config == []
    assert set(outcome.allocations[0].results[0]) == {"request", "driver", "pool", "device"}
