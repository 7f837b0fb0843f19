"""matchAttribute and distinctAttribute constraints, including the 1.36 quirk."""

from __future__ import annotations

import pytest

from audit.allocator import Quirks, Status
from tests.allocator.helpers import (
    NODE_1,
    claim,
    device,
    device_class,
    first_available,
    picks,
    request,
    resource_slice,
    run,
    sub,
    verdicts,
)

CLASS_A = device_class("class-a")


def slice_with(*attrs: dict) -> dict:
    return resource_slice("slice-1", NODE_1, "pool-1", devices=[device(f"device-{i + 1}", a) for i, a in enumerate(attrs)])


MATCH_CASES = [
    pytest.param([{"x": 1}, {"x": 2}, {"x": 2}], "driver-a/x", ["device-2", "device-3"], id="with-constraint-int"),
    pytest.param([{"x": "a"}, {"x": "b"}, {"x": "a"}], "driver-a/x", ["device-1", "device-3"], id="with-constraint-string"),
    pytest.param([{"x": True}, {"x": False}, {"x": True}], "driver-a/x", ["device-1", "device-3"], id="with-constraint-bool"),
    pytest.param([{"v": {"version": "1.0.0"}}, {"v": {"version": "1.0.0+build"}}, {"v": {"version": "1.0.0"}}], "driver-a/v",
                 ["device-1", "device-3"], id="versions-compare-as-exact-strings"),
    pytest.param([{"x": 1}, {"x": "1"}, {"x": 1}], "driver-a/x", ["device-1", "device-3"], id="different-types-never-match"),
    pytest.param([{}, {"x": 1}, {"x": 1}], "driver-a/x", ["device-2", "device-3"], id="with-constraint-non-existent-attribute-skips-device"),
    pytest.param([{"example.com/x": 1}, {"x": 1}, {"example.com/x": 1}], "example.com/x", ["device-1", "device-3"],
                 id="foreign-domain-needs-qualified-attribute"),
    pytest.param([{"driver-a/x": 1}, {"x": 1}], "driver-a/x", ["device-1", "device-2"], id="driver-domain-matches-unqualified"),
]


@pytest.mark.parametrize(("attrs", "attribute", "expected"), MATCH_CASES)
def test_match_attribute(attrs: list, attribute: str, expected: list[str]) -> None:
    outcome = run([CLASS_A, slice_with(*attrs), claim("claim-0", request("req-0", "class-a", 2), constraints=[{"matchAttribute": attribute}])])
    assert [p[2].split("/")[1] for p in picks(outcome)] == expected


def test_constraint_limited_to_listed_requests() -> None:
    objs = [CLASS_A, slice_with({"x": 1}, {"x": 2}, {"x": 2}),
            claim("claim-0", request("req-0", "class-a"), request("req-1", "class-a"), request("req-2", "class-a"),
                  constraints=[{"requests": ["req-1", "req-2"], "matchAttribute": "driver-a/x"}])]
    assert [p[2] for p in picks(run(objs))] == ["pool-1/device-1", "pool-1/device-2", "pool-1/device-3"]


def test_constraint_naming_a_subrequest_applies_only_to_it() -> None:
    objs = [CLASS_A, slice_with({"x": 1}, {"x": 2}, {"x": 1}),
            claim("claim-0", request("req-0", "class-a"),
                  first_available("req-1", sub("sub-0", "class-a"), sub("sub-1", "class-a")),
                  constraints=[{"requests": ["req-0", "req-1/sub-0"], "matchAttribute": "driver-a/x"}])]
    assert picks(run(objs)) == [("claim-0", "req-0", "pool-1/device-1"), ("claim-0", "req-1/sub-0", "pool-1/device-3")]


def test_constraint_naming_the_parent_request_covers_all_subrequests() -> None:
    objs = [CLASS_A, slice_with({"x": 1}, {"x": 2}),
            claim("claim-0", request("req-0", "class-a"),
                  first_available("req-1", sub("sub-0", "class-a"), sub("sub-1", "class-a")),
                  constraints=[{"requests": ["req-0", "req-1"], "matchAttribute": "driver-a/x"}])]
    assert run(objs).status is Status.UNSATISFIABLE


def test_constraint_verdict_names_the_attribute() -> None:
    objs = [CLASS_A, slice_with({"x": 1}, {"x": 2}, {"x": 1}),
            claim("claim-0", request("req-0", "class-a", 2), constraints=[{"matchAttribute": "driver-a/x"}])]
    outcome = run(objs, explain=True)
    assert verdicts(outcome, "req-0") == {"device-1": "selected", "device-2": "constraint_unsatisfied", "device-3": "selected"}
    assert outcome.evidence[0].verdicts[1].detail_dict() == {"constraint": "matchAttribute", "attribute": "driver-a/x"}


def test_distinct_attribute_picks_different_values() -> None:
    objs = [CLASS_A, slice_with({"x": 1}, {"x": 1}, {"x": 2}),
            claim("claim-0", request("req-0", "class-a"), request("req-1", "class-a"), constraints=[{"distinctAttribute": "driver-a/x"}])]
    assert [p[2] for p in picks(run(objs))] == ["pool-1/device-1", "pool-1/device-3"]


@pytest.mark.parametrize(("quirks", "expected"), [
    pytest.param(Quirks(), ["device-1", "device-2", "device-3"], id="base-request-key-lets-a-duplicate-through"),
    pytest.param(Quirks(distinct_by_base_request=False), ["device-1", "device-2", "device-4"], id="per-device-values"),
])
def test_distinct_attribute_keyed_by_base_request_quirk(quirks: Quirks, expected: list[str]) -> None:
    # With count 3 the second device overwrites the first one's stored value, so the third device
    # may repeat the first value (1) in 1.36.
    objs = [CLASS_A, slice_with({"x": 1}, {"x": 2}, {"x": 1}, {"x": 3}),
            claim("claim-0", request("req-0", "class-a", 3), constraints=[{"distinctAttribute": "driver-a/x"}])]
    assert [p[2].split("/")[1] for p in picks(run(objs, quirks=quirks))] == expected


@pytest.mark.parametrize(("gates", "expected"), [
    pytest.param("", None, id="list-attribute-is-an-unknown-type-without-the-gate"),
    pytest.param("DRAListTypeAttributes=true", ["device-1", "device-2"], id="list-attributes-intersect-with-the-gate"),
])
def test_list_type_attributes_in_match_constraints(gates: str, expected: list[str] | None) -> None:
    # The class has no CEL selector: without the gate a list value makes every CEL evaluation fail.
    objs = [device_class("class-a", driver=None), slice_with({"x": {"ints": [1, 2]}}, {"x": {"ints": [2, 3]}}),
            claim("claim-0", request("req-0", "class-a", 2), constraints=[{"matchAttribute": "driver-a/x"}])]
    outcome = run(objs, gates=gates)
    if expected is None:
        assert outcome.status is Status.UNSATISFIABLE
    else:
        assert [p[2].split("/")[1] for p in picks(outcome)] == expected


def test_list_attribute_without_the_gate_fails_cel_on_that_device() -> None:
    objs = [CLASS_A, slice_with({"x": {"ints": [1, 2]}}), claim("claim-0", request("req-0", "class-a"))]
    outcome = run(objs)
    assert (outcome.status, outcome.message) == (
        Status.ERROR, "class class-a: selector #0: CEL runtime error: attribute x: unsupported attribute value")
