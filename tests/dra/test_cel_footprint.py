"""Selector footprints: which device values a selector reads, and evaluation shared across devices
that agree on them giving exactly the answers (and error texts) of evaluating each whole device."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.dra.cel import CelEnvironment, CelOptions, CelRuntimeError, CompiledSelector, device_context
from audit.dra.cel.device import CelDevice
from audit.dra.cel.footprint import footprint

NV = "gpu.nvidia.com"

FOOTPRINTS = [
    ("driver", 'device.driver == "gpu.nvidia.com"', [("driver",)]),
    ("bracket-domain-field-id", 'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA")',
     [("attributes", NV, "productName")]),
    ("bracket-domain-bracket-id", "device.attributes['gpu.nvidia.com']['productName'] == 'x'",
     [("attributes", NV, "productName")]),
    ("field-domain", "device.attributes.example.zone == 'a'", [("attributes", "example", "zone")]),
    ("capacity", 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0',
     [("capacity", NV, "memory")]),
    ("allow-multiple", "device.allowMultipleAllocations", [("allowMultipleAllocations",)]),
    ("has-of-id", 'has(device.attributes["gpu.nvidia.com"].uuid)', [("attributes", NV, "uuid")]),
    ("several-sorted-once", 'device.attributes["b.io"].x == 1 || device.driver == "d" && device.attributes["a.io"].y '
                            '&& device.attributes["b.io"].x > 0',
     [("attributes", "a.io", "y"), ("attributes", "b.io", "x"), ("driver",)]),
    ("no-device", "1 < 2", []),
    ("field-of-other-value-is-not-device", '[{"device": 1}].all(m, m.device == 1)', []),
    ("id-with-slash", 'device.attributes["a.io"]["b/c"] == "v"', [("attributes", "a.io", "b/c")]),
]

NO_FOOTPRINT = [
    ("domain-map-size", 'size(device.attributes["gpu.nvidia.com"]) == 0'),
    ("domain-presence", '"gpu.nvidia.com" in device.attributes'),
    ("has-of-domain", "has(device.attributes.example)"),
    ("macro-over-domains", 'device.attributes.exists(d, d == "x")'),
    ("computed-domain", "device.attributes[device.driver].index == 3"),
    ("computed-id", 'device.attributes["a.io"][device.driver] == 1'),
    ("escaped-key", 'device.attributes["a\\x2eio"].x == 1'),
    ("raw-string-key", "device.attributes[r'a.io'].x == 1"),
    ("bytes-key", "device.attributes[b'a.io'].x == 1"),
    ("method-on-domain-map", 'device.attributes["a.io"].x() == 1'),
    ("method-on-device-field", "device.driver() == 1"),
    ("whole-device", "size(device) == 3"),
    ("device-rebound-by-macro", "[1].all(device, device > 0)"),
    ("whole-attributes", "device.attributes == {}"),
]


@pytest.mark.parametrize(("expression", "paths"), [c[1:] for c in FOOTPRINTS], ids=[c[0] for c in FOOTPRINTS])
def test_footprint_names_the_values_a_selector_reads(expression: str, paths: list[tuple[str, ...]]) -> None:
    assert footprint(expression) == tuple(paths)


@pytest.mark.parametrize("expression", [c[1] for c in NO_FOOTPRINT], ids=[c[0] for c in NO_FOOTPRINT])
def test_selector_that_may_read_more_has_no_footprint(expression: str) -> None:
    assert footprint(expression) is None


def outcome(evaluate: Any, device: CelDevice) -> tuple[str, object]:
    try:
        return ("value", evaluate(device))
    except CelRuntimeError as exc:
        return ("error", str(exc))


def whole(selector: CompiledSelector) -> Any:
    """Evaluation on the whole device, without footprint or caches."""
    def run(device: CelDevice) -> bool:
        result = selector._run(device)
        if isinstance(result, CelRuntimeError):
            raise result
        return result
    return run


SELECTORS = [
    'device.driver == "gpu.nvidia.com"',
    'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100")',
    'device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100"',
    'has(device.attributes["gpu.nvidia.com"].uuid)',
    'device.attributes["gpu.nvidia.com"].index > 1',
    'device.attributes["gpu.nvidia.com"].index > 1 || device.driver == "gpu.nvidia.com"',
    'device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.0.0"))',
    'device.attributes["gpu.nvidia.com"].driverVersion == semver("580.105.8+build")',
    'device.attributes["example.com"].zone == "a"',
    'has(device.attributes["example.com"].zone) && device.attributes["example.com"].zone != "b"',
    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0',
    'device.capacity["gpu.nvidia.com"].memory == quantity("40960Mi")',
    'device.capacity["example.com"].slots.isLessThan(quantity("8"))',
    "device.allowMultipleAllocations",
    'device.attributes["gpu.nvidia.com"].mig',
    'device.attributes["gpu.nvidia.com"].mig == true',
    'device.attributes["gpu.nvidia.com"].index == 1',
    'device.attributes["gpu.nvidia.com"].productName',
]

ATTRIBUTE_NAMES = ["productName", "gpu.nvidia.com/productName", "uuid", "index", "gpu.nvidia.com/index", "mig",
                   "driverVersion", "example.com/zone"]
ATTRIBUTE_VALUES = st.one_of(
    st.sampled_from(["NVIDIA H100 80GB", "NVIDIA A100", "a", "b"]).map(lambda s: {"string": s}),
    st.sampled_from([0, 1, 2]).map(lambda i: {"int": i}),
    st.booleans().map(lambda b: {"bool": b}),
    st.sampled_from(["550.0.0", "580.105.8", "580.105.8+other", "1.0.0-rc.1"]).map(lambda v: {"version": v}),
)
CAPACITY_NAMES = ["memory", "gpu.nvidia.com/memory", "example.com/slots"]
CAPACITY_VALUES = st.sampled_from(["40Gi", "40960Mi", "80Gi", "4", "8"]).map(lambda q: {"value": q})
DEVICES = st.tuples(
    st.sampled_from([NV, "other.example.com"]),
    st.dictionaries(st.sampled_from(ATTRIBUTE_NAMES), ATTRIBUTE_VALUES, max_size=6),
    st.dictionaries(st.sampled_from(CAPACITY_NAMES), CAPACITY_VALUES, max_size=3),
    st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(DEVICES, min_size=1, max_size=8), st.booleans())
def test_shared_evaluation_answers_as_the_whole_device(devices: list[Any], consumable: bool) -> None:
    options = CelOptions(consumable_capacity=consumable)
    env = CelEnvironment(options)
    selectors = [env.compile(e) for e in SELECTORS if consumable or "allowMultiple" not in e]
    assert all(s.footprint is not None for s in selectors)
    for driver, attributes, capacity, multiple in devices:
        device = device_context(driver, attributes, capacity, multiple, options)
        for selector in selectors:
            assert outcome(selector.evaluate, device) == outcome(whole(selector), device), selector.expression


def test_devices_agreeing_on_the_footprint_share_one_answer() -> None:
    env = CelEnvironment()
    selector = env.compile('device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100")')
    first = device_context(NV, {"productName": {"string": "NVIDIA H100"}, "uuid": {"string": "GPU-1"}}, {}, False)
    second = device_context(NV, {"productName": {"string": "NVIDIA H100"}, "uuid": {"string": "GPU-2"}}, {}, False)
    other = device_context(NV, {"productName": {"string": "NVIDIA L40S"}, "uuid": {"string": "GPU-3"}}, {}, False)
    assert [selector.evaluate(first), selector.evaluate(second), selector.evaluate(other)] == [True, True, False]
    assert first.values_at(selector.footprint or ()) == second.values_at(selector.footprint or ())
    assert first.values_at(selector.footprint or ()) != other.values_at(selector.footprint or ())


VALUE_KEYS = [
    ("bool-is-not-int", {"x": {"bool": True}}, {"x": {"int": 1}}),
    ("string-is-not-version", {"x": {"string": "1.0.0"}}, {"x": {"version": "1.0.0"}}),
    ("missing-is-not-empty-string", {}, {"x": {"string": ""}}),
    ("unqualified-and-qualified-differ", {"x": {"int": 1}, "gpu.nvidia.com/x": {"int": 2}}, {"x": {"int": 2}}),
]


@pytest.mark.parametrize(("left", "right"), [c[1:] for c in VALUE_KEYS], ids=[c[0] for c in VALUE_KEYS])
def test_values_of_different_type_or_presence_never_share_an_answer(left: dict, right: dict) -> None:
    paths = (("attributes", NV, "x"),)
    assert device_context(NV, left, {}, False).values_at(paths) != device_context(NV, right, {}, False).values_at(paths)


def test_name_sorted_last_wins_for_one_id_as_in_the_whole_device() -> None:
    env = CelEnvironment()
    selector = env.compile('device.attributes["gpu.nvidia.com"].x == 2')
    device = device_context(NV, {"x": {"int": 2}, "gpu.nvidia.com/x": {"int": 1}}, {}, False)
    # "x" sorts after "gpu.nvidia.com/x", so it is the value selectors see.
    assert selector.evaluate(device) is True
    assert selector._run(device) is True


@pytest.mark.parametrize("attributes", [{}, {"example.com/other": {"string": "v"}}], ids=["domain-missing", "id-missing"])
def test_missing_domain_and_missing_id_fail_alike(attributes: dict) -> None:
    env = CelEnvironment()
    selector = env.compile('device.attributes["example.com"].zone == "a"')
    device = device_context(NV, attributes, {}, False)
    assert outcome(selector.evaluate, device) == ("error", "no such key: zone")
    assert outcome(whole(selector), device) == ("error", "no such key: zone")


def test_unconvertible_device_fails_every_selector_with_a_footprint() -> None:
    env = CelEnvironment()
    selector = env.compile('device.driver == "gpu.nvidia.com"')
    good = device_context(NV, {"v": {"version": "1.0.0"}}, {}, False)
    bad = device_context(NV, {"v": {"version": "01.0.0"}}, {}, False)
    assert selector.evaluate(good) is True
    with pytest.raises(CelRuntimeError, match="^attribute v: parse semantic version: "):
        selector.evaluate(bad)


def test_a_shared_error_does_not_grow_its_traceback_with_every_device() -> None:
    env = CelEnvironment()
    selector = env.compile('device.attributes["example.com"].zone == "a"')
    depths = []
    for _ in range(20):
        try:
            selector.evaluate(device_context(NV, {}, {}, False))
        except CelRuntimeError as exc:
            depth, tb = 0, exc.__traceback__
            while tb is not None:
                depth, tb = depth + 1, tb.tb_next
            depths.append(depth)
    assert len(depths) == 20 and depths[0] == depths[-1]
