"""API-server validation of raw DRA objects: limits, name syntax, one-of rules and messages."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.dra.validate import Finding, validate_object

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "dra" / "validate"
DNS_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def _fixture(name: str) -> list[dict[str, Any]]:
    with open(FIXTURES / name, encoding="utf-8") as handle:
        return [doc for doc in yaml.safe_load_all(handle) if doc]


def _lines(objects: list[dict[str, Any]]) -> list[str]:
    return [str(f) for obj in objects for f in validate_object(obj)]


def test_valid_cluster_has_no_findings() -> None:
    objects = _fixture("valid-cluster.yaml")
    assert [obj["kind"] for obj in objects] == ["DeviceClass", "DeviceClass", "ResourceSlice", "ResourceClaimTemplate",
                                                "ResourceClaim", "DeviceTaintRule", "Node", "Pod"]
    assert _lines(objects) == []


def test_too_many_subrequests_names_object_and_list() -> None:
    assert _lines(_fixture("claim-too-many-subrequests.yaml")) == [
        "ResourceClaim default/train-0: spec.devices.requests[0].firstAvailable[9]: too many subrequests (max 8)",
    ]


def test_hand_written_claim_reports_every_mistake_in_field_order() -> None:
    obj = "ResourceClaim team-a/Train_1"
    r = "spec.devices.requests"
    assert _lines(_fixture("claim-mistakes.yaml")) == [
        f"{obj}: metadata.name: Invalid value: \"Train_1\": a lowercase RFC 1123 subdomain must consist of lower case "
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        f'{obj}: {r}[0].name: Invalid value: "GPU": {DNS_LABEL_MSG}',
        f"{obj}: {r}[0].exactly.count: Invalid value: 0: must be greater than zero",
        f"{obj}: {r}[1]: Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, "
        "but multiple fields are set",
        f'{obj}: {r}[1].exactly.allocationMode: Unsupported value: "Any": supported values: "All", "ExactCount"',
        f"{obj}: {r}[2].exactly.count: Invalid value: 2: must not be specified when allocationMode is 'All'",
        f"{obj}: {r}[3].firstAvailable[0].adminAccess: Forbidden: adminAccess is not supported in subrequests",
        f'{obj}: {r}[3].firstAvailable[1].name: Duplicate value: "h100"',
        f'{obj}: {r}[3].firstAvailable[1].selectors[0].cel.expression: Invalid value: '
        '"device.attributes[\\"gpu.nvidia.com\\"].productName.startswith(\\"NVIDIA H100\\")": compilation failed: '
        "ERROR: <input>:1:59: undeclared reference to 'startswith' (in container '')",
        f"{obj}: {r}[3].firstAvailable[1].tolerations[0].value: Invalid value: \"79\": value must be empty when "
        "`operator` is 'Exists'",
        f'{obj}: {r}[3].firstAvailable[1].tolerations[0].effect: Unsupported value: "NoSchedul": supported values: '
        '"NoExecute", "NoSchedule", "None"',
        f"{obj}: {r}[3].firstAvailable[1].capacity.requests[memory]: Required value",
        f'{obj}: {r}[4].name: Duplicate value: "fallback"',
        f'{obj}: spec.devices.constraints[0].requests[0]: Invalid value: "GPU": must be the name of a request in the '
        "claim or the name of a request and a subrequest separated by '/'",
        f'{obj}: spec.devices.constraints[0].requests[1]: Invalid value: "missing": must be the name of a request in '
        "the claim or the name of a request and a subrequest separated by '/'",
        f'{obj}: spec.devices.constraints[0].requests[2]: Invalid value: "fallback/h200": must be the name of a '
        "request in the claim or the name of a request and a subrequest separated by '/'",
        f'{obj}: spec.devices.constraints[0].matchAttribute: Invalid value: "pcieRoot": must include a domain',
    ]


def test_hand_written_slice_reports_every_mistake() -> None:
    obj = "ResourceSlice node-b-gpus"
    d = "spec.devices[0]"
    lines = _lines(_fixture("slice-mistakes.yaml"))
    assert lines[1:] == [
        f"{obj}: spec.pool.name: Required value",
        f"{obj}: spec.pool.resourceSliceCount: Invalid value: 0: must be greater than zero",
        f'{obj}: spec: Invalid value: "{{nodeName, allNodes}}": exactly one of `nodeName`, `nodeSelector`, '
        "`allNodes`, `perDeviceNodeSelection` is required, but multiple fields are set",
        f"{obj}: spec: Invalid value: null: exactly one of `devices` or `sharedCounters` may be set, "
        "but multiple fields are set",
        f'{obj}: {d}.name: Invalid value: "gpu_0": {DNS_LABEL_MSG}',
        f"{obj}: {d}.attributes[productName].string: Too long: may not be more than 64 bytes",
        f'{obj}: {d}.attributes[driverVersion].version: Invalid value: "v580.105.8": must be a string compatible '
        "with semver.org spec 2.0.0",
        f"{obj}: {d}.attributes[index]: Invalid value: null: exactly one value must be specified, got int, string",
        f'{obj}: {d}.attributes[gpu.nvidia.com/uuid/extra]: Invalid value: "gpu.nvidia.com/uuid/extra": must '
        "include at most one '/' separator",
        f'{obj}: {d}.capacity[memory].value: Invalid value: "80GB": quantities must match the regular expression '
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
        f"{obj}: {d}.consumesCounters[2]: too many counter consumptions (max 2)",
        f'{obj}: {d}.consumesCounters[2].counters[copyEngines]: Invalid value: "copyEngines": {DNS_LABEL_MSG}',
        f'{obj}: {d}.taints[0].effect: Unsupported value: "NoSchedul": supported values: "NoExecute", '
        '"NoSchedule", "None"',
        f'{obj}: spec.devices[2].name: Duplicate value: "gpu-1"',
    ]
    assert lines[0].startswith(f'{obj}: spec.driver: Invalid value: "GPU.nvidia.com": a lowercase RFC 1123 subdomain')


def test_class_selector_typos_and_unsupported_versions() -> None:
    assert _lines(_fixture("class-mistakes.yaml")) == [
        'DeviceClass h100.nvidia.com: spec.selectors[0].cel.expression: Invalid value: '
        '"device.drivr == \\"gpu.nvidia.com\\"": compilation failed: ERROR: <input>:1:7: undefined field \'drivr\'',
        'DeviceClass h100.nvidia.com: spec.selectors[1].cel.expression: Invalid value: '
        '"device.attributes[\\"gpu.nvidia.com\\"].productName == \\"NVIDIA H100\\" &&": compilation failed: '
        "ERROR: <input>:1:68: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', "
        "'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}",
        'DeviceClass h100.nvidia.com: spec.selectors[2].expression: unknown field "expression"',
        "DeviceClass h100.nvidia.com: spec.selectors[2].cel: Required value",
        "DeviceClass h100.nvidia.com: spec.config[0].opaque.driver: Required value",
        'DeviceClass a100.nvidia.com: apiVersion: Unsupported value: "resource.k8s.io/v1beta1": supported values: '
        '"resource.k8s.io/v1"',
        'DeviceTaintRule quarantine-node-c: spec.taint.effect: Unsupported value: "Evict": supported values: '
        '"NoExecute", "NoSchedule", "None"',
    ]


# --- limits, built from one valid object of each kind ---------------------------------------------

CLAIM: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
    "metadata": {"name": "c", "namespace": "ns"},
    "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
}
SLICE: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
    "spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n", "generation": 0, "resourceSliceCount": 1},
             "devices": [{"name": "gpu-0"}]},
}
CLASS: dict[str, Any] = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"}, "spec": {}}


def _claim(**exactly: Any) -> dict[str, Any]:
    obj = copy.deepcopy(CLAIM)
    obj["spec"]["devices"]["requests"][0]["exactly"].update(exactly)
    return obj


def _slice(devices: list[dict[str, Any]] | None = None, **spec: Any) -> dict[str, Any]:
    obj = copy.deepcopy(SLICE)
    if devices is not None:
        obj["spec"]["devices"] = devices
    obj["spec"].update(spec)
    return obj


def _devices(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"name": f"gpu-{i}", **copy.deepcopy(extra)} for i in range(n)]


def _selector(expression: str = 'device.driver == "gpu.nvidia.com"') -> dict[str, Any]:
    return {"cel": {"expression": expression}}


def _requests(n: int) -> dict[str, Any]:
    obj = copy.deepcopy(CLAIM)
    obj["spec"]["devices"]["requests"] = [{"name": f"r{i}", "exactly": {"deviceClassName": "c"}} for i in range(n)]
    return obj


def _constraints(n: int) -> dict[str, Any]:
    obj = copy.deepcopy(CLAIM)
    obj["spec"]["devices"]["constraints"] = [{"matchAttribute": "example.com/x"}] * n
    return obj


def _config(n: int) -> dict[str, Any]:
    obj = copy.deepcopy(CLAIM)
    obj["spec"]["devices"]["config"] = [{"opaque": {"driver": "d.example.com", "parameters": {}}}] * n
    return obj


TAINT = {"key": "example.com/t", "effect": "NoSchedule"}
LIMITS = [
    ("requests-32-ok", _requests(32), None),
    ("requests-33", _requests(33), "spec.devices.requests[32]: too many requests (max 32)"),
    ("selectors-33", _claim(selectors=[_selector()] * 33),
     "spec.devices.requests[0].exactly.selectors[32]: too many selectors (max 32)"),
    ("tolerations-17", _claim(tolerations=[{"operator": "Exists"}] * 17),
     "spec.devices.requests[0].exactly.tolerations[16]: too many tolerations (max 16)"),
    ("constraints-33", _constraints(33), "spec.devices.constraints[32]: too many constraints (max 32)"),
    ("config-33", _config(33), "spec.devices.config[32]: too many config entries (max 32)"),
    ("class-selectors-33", {**CLASS, "spec": {"selectors": [_selector()] * 33}},
     "spec.selectors[32]: too many selectors (max 32)"),
    ("devices-128-ok", _slice(_devices(128)), None),
    ("devices-129", _slice(_devices(129)), "spec.devices[128]: too many devices (max 128)"),
    ("devices-64-with-taints-ok", _slice(_devices(64, taints=[TAINT])), None),
    ("devices-65-with-taints", _slice(_devices(65, taints=[TAINT])), "spec.devices[64]: too many devices (max 64)"),
    ("devices-65-consuming-counters", _slice(_devices(65, consumesCounters=[{"counterSet": "s", "counters": {"m": {"value": "1"}}}])),
     "spec.devices[64]: too many devices (max 64)"),
    ("devices-65-with-list-attribute", _slice(_devices(65, attributes={"models": {"strings": ["a"]}})),
     "spec.devices[64]: too many devices (max 64)"),
    ("taints-17", _slice(_devices(1, taints=[TAINT] * 17)), "spec.devices[0].taints[16]: too many taints (max 16)"),
    ("attributes-and-capacity-33",
     _slice(_devices(1, attributes={f"a{i}": {"int": i} for i in range(20)}, capacity={f"c{i}": {"value": "1"} for i in range(13)})),
     "spec.devices[0]: Invalid value: 33: the total number of attributes and capacities must not exceed 32"),
    ("attribute-values-49", _slice(_devices(1, attributes={"a": {"ints": list(range(49))}})),
     "spec.devices[0].attributes: Invalid value: 49: the total number of attribute values must not exceed 48"),
    ("counter-sets-9", _slice([], sharedCounters=[{"name": f"s{i}", "counters": {"m": {"value": "1"}}} for i in range(9)]),
     "spec.sharedCounters[8]: too many counter sets (max 8)"),
    ("counters-33", _slice([], sharedCounters=[{"name": "s", "counters": {f"c{i}": {"value": "1"} for i in range(33)}}]),
     "spec.sharedCounters[0].counters: too many counters (max 32)"),
    ("version-too-long", _slice(_devices(1, attributes={"v": {"version": "1.0.0-" + "a" * 60}})),
     "spec.devices[0].attributes[v].version: Too long: may not be more than 64 bytes"),
    ("cel-too-long", _claim(selectors=[_selector("true" + " " * 10237)]),
     "spec.devices.requests[0].exactly.selectors[0].cel.expression: Too long: may not be more than 10240 bytes"),
    ("id-longer-than-32", _slice(_devices(1, attributes={"a" * 33: {"int": 1}})),
     "spec.devices[0].attributes[" + "a" * 33 + "]: Too long: may not be more than 32 bytes"),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in LIMITS], ids=[c[0] for c in LIMITS])
def test_api_server_limits(obj: dict[str, Any], expected: str | None) -> None:
    messages = [f"{f.path}: {f.message}" for f in validate_object(obj)]
    assert messages == ([] if expected is None else [expected])


RULES = [
    ("count-default-is-one", _claim(), None),
    ("all-without-count", _claim(allocationMode="All"), None),
    ("missing-device-class", _claim(deviceClassName=None), "spec.devices.requests[0].exactly.deviceClassName: Required value"),
    ("neither-exactly-nor-first-available",
     {**CLAIM, "spec": {"devices": {"requests": [{"name": "gpu"}]}}},
     "spec.devices.requests[0]: Required value: exactly one of `exactly` or `firstAvailable` is required"),
    ("capacity-request-not-a-quantity", _claim(capacity={"requests": {"memory": "lots"}}),
     "spec.devices.requests[0].exactly.capacity.requests[memory]: Invalid value: \"lots\": quantities must match "
     "the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ("capacity-request-int-ok", _claim(capacity={"requests": {"memory": 1024}}), None),
    ("toleration-without-key-needs-exists", _claim(tolerations=[{"value": "x"}]),
     "spec.devices.requests[0].exactly.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists "
     "when `key` is empty, which means \"match all values and all keys\""),
    ("toleration-bad-operator", _claim(tolerations=[{"key": "k", "operator": "In"}]),
     "spec.devices.requests[0].exactly.tolerations[0].operator: Unsupported value: \"In\": supported values: "
     "\"Equal\", \"Exists\""),
    ("admin-access-in-exactly-ok", _claim(adminAccess=True), None),
    ("selector-on-undeclared-variable", _claim(selectors=[_selector("gpu.memory > 1")]),
     "spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: \"gpu.memory > 1\": compilation "
     "failed: ERROR: <input>:1:1: undeclared reference to 'gpu' (in container '')"),
    ("distinct-attribute-needs-domain", {**CLAIM, "spec": {"devices": {**CLAIM["spec"]["devices"],
                                                                      "constraints": [{"distinctAttribute": "uuid"}]}}},
     'spec.devices.constraints[0].distinctAttribute: Invalid value: "uuid": must include a domain'),
    ("constraint-without-attribute", {**CLAIM, "spec": {"devices": {**CLAIM["spec"]["devices"], "constraints": [{}]}}},
     "spec.devices.constraints[0]: Required value: exactly one of `matchAttribute` or `distinctAttribute` is required"),
    ("slice-without-node-selection", _slice(nodeName=None),
     "spec: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"),
    ("slice-node-selector-two-terms",
     _slice(nodeName=None, nodeSelector={"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}] * 2}),
     "spec.nodeSelector.nodeSelectorTerms: Invalid value: 2: must have exactly one node selector term"),
    ("per-device-node-selection-requires-device-choice",
     _slice(_devices(1), nodeName=None, perDeviceNodeSelection=True),
     "spec.devices[0]: Required value: exactly one of `nodeName`, `nodeSelector`, `allNodes` is required"),
    ("per-device-node-selection-ok", _slice(_devices(1, nodeName="n"), nodeName=None, perDeviceNodeSelection=True), None),
    ("device-node-name-without-per-device", _slice(_devices(1, nodeName="n")),
     "spec.devices[0].nodeName: Forbidden: only allowed when `perDeviceNodeSelection` is set in the ResourceSlice spec"),
    ("wrong-type-for-devices", {**SLICE, "spec": {**SLICE["spec"], "devices": {"gpu-0": {}}}},
     "spec.devices: Invalid value: <object>: must be a list, got object"),
    ("taint-without-effect", _slice(_devices(1, taints=[{"key": "example.com/t"}])),
     "spec.devices[0].taints[0].effect: Required value"),
    ("valid-values-not-ascending",
     _slice(_devices(1, capacity={"memory": {"value": "80Gi", "requestPolicy": {"validValues": ["10Gi", "5Gi"]}}})),
     'spec.devices[0].capacity[memory].requestPolicy.validValues[1]: Invalid value: "5Gi": values must be sorted '
     "in ascending order and unique"),
    ("binding-conditions-alone", _slice(_devices(1, bindingConditions=["example.com/ready"])),
     "spec.devices[0].bindingFailureConditions: Invalid value: null: bindingConditions and bindingFailureConditions "
     "must be set together"),
    ("unknown-field-typo", _claim(selector=[_selector()]),
     'spec.devices.requests[0].exactly.selector: unknown field "selector"'),
    ("unknown-top-level-field", {**CLASS, "sepc": {}}, 'sepc: unknown field "sepc"'),
    ("unknown-slice-device-field", _slice(_devices(1, attribute={"a": {"int": 1}})),
     'spec.devices[0].attribute: unknown field "attribute"'),
    ("unknown-attribute-type", _slice(_devices(1, attributes={"a": {"integer": 1}})),
     ['spec.devices[0].attributes[a].integer: unknown field "integer"',
      "spec.devices[0].attributes[a]: Required value: exactly one value must be specified"]),
    ("other-kind-is-not-checked", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "X_"}}, None),
    ("missing-kind", {"apiVersion": "v1", "metadata": {"name": "x"}}, "kind: Required value"),
    ("missing-api-version", {**CLASS, "apiVersion": None}, "apiVersion: Required value"),
    ("attribute-of-wrong-type", _slice(_devices(1, attributes={"memory": ["80Gi"]})),
     "spec.devices[0].attributes[memory]: Invalid value: <list>: must be an object, got list"),
    ("missing-name", {**CLASS, "metadata": {}}, "metadata.name: Required value: name or generateName is required"),
    ("v1-device-taint-rule", {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "metadata": {"name": "r"},
                              "spec": {"taint": {"key": "example.com/x", "effect": "None"}}}, None),
    ("pod-claim-needs-source", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                "spec": {"resourceClaims": [{"name": "gpu"}], "containers": []}},
     "spec.resourceClaims[0]: Required value: must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"),
    ("pod-container-claim-unknown", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                     "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
                                              "containers": [{"name": "m", "resources": {"claims": [{"name": "gpus"}]}}]}},
     'spec.containers[0].resources.claims[0].name: Unsupported value: "gpus": supported values: "gpu"'),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in RULES], ids=[c[0] for c in RULES])
def test_api_server_rules(obj: dict[str, Any], expected: str | list[str] | None) -> None:
    messages = [f"{f.path}: {f.message}" for f in validate_object(obj)]
    assert messages == ([] if expected is None else [expected] if isinstance(expected, str) else expected)


def test_template_claim_spec_is_validated_under_spec_spec() -> None:
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "t", "namespace": "ns"},
                "spec": {"metadata": {"name": "x"}, "spec": copy.deepcopy(_claim(count=0)["spec"])}}
    assert [str(f) for f in validate_object(template)] == [
        "ResourceClaimTemplate ns/t: spec.metadata.name: Forbidden: only labels and annotations may be set",
        "ResourceClaimTemplate ns/t: spec.spec.devices.requests[0].exactly.count: Invalid value: 0: must be greater than zero",
    ]


def test_finding_prints_object_path_and_message() -> None:
    finding = Finding("ResourceClaim default/train-0", "spec.devices.requests[0].firstAvailable[9]", "too many subrequests (max 8)")
    assert str(finding) == "ResourceClaim default/train-0: spec.devices.requests[0].firstAvailable[9]: too many subrequests (max 8)"


def test_non_mapping_input_is_a_finding_not_a_crash() -> None:
    assert [str(f) for f in validate_object(["not", "an", "object"])] == [  # type: ignore[arg-type]
        "object: : Invalid value: <list>: must be an object, got list"]


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=1, max_value=12), st.integers(min_value=0, max_value=40))
def test_subrequest_and_request_limits_hold_for_any_size(subrequests: int, requests: int) -> None:
    obj = copy.deepcopy(CLAIM)
    first = [{"name": f"s{i}", "deviceClassName": "c"} for i in range(subrequests)]
    obj["spec"]["devices"]["requests"] = [{"name": "gpu", "firstAvailable": first}] + [
        {"name": f"r{i}", "exactly": {"deviceClassName": "c"}} for i in range(requests)]
    paths = [f.path for f in validate_object(obj)]
    expected = []
    if requests + 1 > 32:
        expected.append(f"spec.devices.requests[{requests}]")
    if subrequests > 8:
        expected.append(f"spec.devices.requests[0].firstAvailable[{subrequests - 1}]")
    assert paths == expected


dns_label = st.from_regex(r"[a-z]([-a-z0-9]{0,10}[a-z0-9])?", fullmatch=True)
c_identifier = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,20}", fullmatch=True)
quantity_text = st.builds(lambda n, s: f"{n}{s}", st.integers(0, 10**6), st.sampled_from(["", "m", "k", "Mi", "Gi"]))
attribute_value = st.one_of(
    st.integers(-(2**31), 2**31).map(lambda v: {"int": v}),
    st.booleans().map(lambda v: {"bool": v}),
    st.text(alphabet="abcXYZ 0-9", max_size=64).map(lambda v: {"string": v}),
    st.tuples(st.integers(0, 999), st.integers(0, 999), st.integers(0, 999)).map(lambda v: {"version": ".".join(map(str, v))}),
)


@st.composite
def valid_claims(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(dns_label, min_size=1, max_size=6, unique=True))
    requests: list[dict[str, Any]] = []
    for name in names:
        if draw(st.booleans()):
            requests.append({"name": name, "exactly": {"deviceClassName": "gpu.nvidia.com", "count": draw(st.integers(1, 8))}})
        else:
            subs = draw(st.lists(dns_label, min_size=1, max_size=8, unique=True))
            requests.append({"name": name, "firstAvailable": [{"name": s, "deviceClassName": "gpu.nvidia.com"} for s in subs]})
    refs = draw(st.lists(st.sampled_from(names), max_size=len(names), unique=True))
    spec: dict[str, Any] = {"devices": {"requests": requests}}
    if refs:
        spec["devices"]["constraints"] = [{"requests": refs, "matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": draw(dns_label), "namespace": draw(dns_label)}, "spec": spec}


@st.composite
def valid_slices(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(dns_label, max_size=20, unique=True))
    devices = []
    for name in names:
        attributes = draw(st.dictionaries(c_identifier, attribute_value, max_size=10))
        capacity = draw(st.dictionaries(c_identifier.map(lambda s: "example.com/" + s),
                                        quantity_text.map(lambda q: {"value": q}), max_size=10))
        devices.append({"name": name, "attributes": attributes, "capacity": capacity})
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": draw(dns_label)},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": draw(dns_label),
                     "pool": {"name": draw(dns_label), "generation": draw(st.integers(0, 10)), "resourceSliceCount": 1},
                     "devices": devices}}


@settings(max_examples=40, deadline=None)
@given(st.one_of(valid_claims(), valid_slices()))
def test_objects_within_every_rule_have_no_findings(obj: dict[str, Any]) -> None:
    assert validate_object(obj) == []


json_like = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5) | st.floats(allow_nan=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
MUTATION_BASES = _fixture("valid-cluster.yaml") + _fixture("slice-mistakes.yaml")


def _field_paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _field_paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _field_paths(item, prefix + (index,))
    return found


@settings(max_examples=80, deadline=None)
@given(st.integers(0, len(MUTATION_BASES) - 1), st.randoms(use_true_random=False), json_like)
def test_any_value_in_any_field_gives_findings_not_exceptions(index: int, rnd: Any, value: Any) -> None:
    obj = copy.deepcopy(MUTATION_BASES[index])
    path = rnd.choice(_field_paths(obj)[1:])
    holder = obj
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    findings = validate_object(obj)
    assert all(isinstance(f, Finding) and f.message for f in findings)
