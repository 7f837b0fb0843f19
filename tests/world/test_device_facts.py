"""A device's model and signature are the same however often they are memoised or shared."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.canonical import digest
from audit.policy import default_policy
from audit.world import IDENTITY_ATTRIBUTES, DeviceFacts

DRIVER = "gpu.nvidia.com"


def _h100(uuid: str, **extra: dict) -> dict:
    return {"type": {"string": "gpu"}, "uuid": {"string": uuid}, "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "driverVersion": {"version": "570.133.20"}, "resource.kubernetes.io/pciBusID": {"string": uuid[-4:]},
            **extra}


def _plain_signature(model: str, attributes: dict, capacity: dict) -> str:
    """The definition: the digest of driver, model, attributes without identity, capacity."""
    return digest([DRIVER, model, {k: v for k, v in attributes.items() if k not in IDENTITY_ATTRIBUTES}, capacity])


@pytest.mark.parametrize(("first", "second", "same"), [
    (_h100("GPU-a"), _h100("GPU-b"), True),
    (_h100("GPU-a"), _h100("GPU-b", brand={"string": "Nvidia"}), False),
    (_h100("GPU-a", cores={"int": 1}), _h100("GPU-b", cores={"int": True}), False),
    (_h100("GPU-a", cores={"int": 1}), _h100("GPU-b", cores={"int": 1.0}), False),
    (_h100("GPU-a", cores={"int": 0.0}), _h100("GPU-b", cores={"int": -0.0}), False),
    (_h100("GPU-a", cores={"int": 7}), _h100("GPU-b", cores={"int": 7}), True),
], ids=["identity-only-differs", "attribute-differs", "one-vs-true", "one-vs-one-point-zero",
        "zero-vs-minus-zero", "equal-numbers"])
def test_a_device_equal_to_an_earlier_one_shares_its_signature_only_when_the_encodings_agree(first, second, same):
    facts = DeviceFacts(default_policy())
    capacity = {"memory": {"value": "80Gi"}}
    a = facts.signature(DRIVER, "H100", first, capacity)
    b = facts.signature(DRIVER, "H100", second, copy.deepcopy(capacity))
    assert a == _plain_signature("H100", first, capacity)
    assert b == _plain_signature("H100", second, capacity)
    assert (a == b) is same


def test_facts_are_remembered_per_device_object_and_never_for_another():
    facts = DeviceFacts(default_policy())
    device = {"name": "gpu-0", "attributes": _h100("GPU-a"), "capacity": {}}
    model, signature = facts.of(DRIVER, device, device["attributes"], device["capacity"])
    assert model == "H100"
    twin = copy.deepcopy(device)
    twin["attributes"]["productName"] = {"string": "NVIDIA A100-SXM4-80GB"}
    assert facts.of(DRIVER, twin, twin["attributes"], twin["capacity"])[0] == "A100"
    assert facts.of(DRIVER, device, device["attributes"], device["capacity"]) == (model, signature)


json_text = st.text(max_size=4)
attribute_value = st.one_of(
    st.fixed_dictionaries({"string": json_text}), st.fixed_dictionaries({"version": json_text}),
    st.fixed_dictionaries({"int": st.integers(-2, 2)}), st.fixed_dictionaries({"bool": st.booleans()}),
    st.fixed_dictionaries({"int": st.sampled_from([0.0, -0.0, 1.0, True, False])}))
attributes = st.dictionaries(st.sampled_from(["a", "b", "uuid", "productName", "pciBusID"]), attribute_value,
                             max_size=4)


@settings(max_examples=200, deadline=None)
@given(devices=st.lists(st.tuples(attributes, st.dictionaries(st.sampled_from(["memory", "cores"]),
                                                             st.fixed_dictionaries({"value": json_text}),
                                                             max_size=2)), min_size=1, max_size=12))
def test_memoised_signatures_equal_the_definition_for_any_devices(devices):
    facts = DeviceFacts(default_policy())
    for attrs, capacity in devices:
        assert facts.signature(DRIVER, "H100", attrs, capacity) == _plain_signature("H100", attrs, capacity)
