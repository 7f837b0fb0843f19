"""A device of the common shape parses through a short path to exactly what the general path makes.

``_device`` first tries ``_plain_device`` (a name, scalar attributes and capacities, nothing
else). Each device below is parsed twice, with the short path and with it turned off: the typed
devices must be equal, API-shaped attributes included, and devices outside the common shape must
leave the short path (so their errors and fields come from the general one).
"""

from __future__ import annotations

from typing import Any

import pytest

from audit.dra import model
from audit.dra.model import ModelError, parse_object

_GPU = {"name": "gpu-0",
        "attributes": {"productName": {"string": "NVIDIA H100"}, "driverVersion": {"version": "570.1.0"},
                       "cores": {"int": 132}, "mig": {"bool": False}},
        "capacity": {"memory": {"value": "80Gi"}}}


def _slice(*devices: Any) -> dict[str, Any]:
    return {"kind": "ResourceSlice", "metadata": {"name": "s"},
            "spec": {"driver": "gpu.example.com", "nodeName": "n", "pool": {"name": "n"}, "devices": list(devices)}}


def _parse(raw: dict[str, Any], short: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    with monkeypatch.context() as m:
        if not short:
            m.setattr(model, "_plain_device", lambda *_: None)
        return parse_object(raw)


@pytest.mark.parametrize("device", [
    _GPU,
    {"name": "gpu-0"},
    {"attributes": _GPU["attributes"]},
    {"name": "gpu-0", "attributes": None, "capacity": None},
    {"name": "gpu-0", "attributes": {}, "capacity": {}},
    {"name": "gpu-0", "attributes": {"a": {"string": "x"}}, "capacity": {"m": {"value": "1"}, "n": {"value": 2}}},
], ids=["gpu", "name-only", "no-name", "null-maps", "empty-maps", "two-capacities"])
def test_common_devices_parse_alike_on_both_paths(device: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    short, general = _parse(_slice(device), True, monkeypatch), _parse(_slice(device), False, monkeypatch)
    assert short.devices == general.devices
    assert [(d.raw_attributes, d.raw_capacity) for d in short.devices] == \
        [(d.raw_attributes, d.raw_capacity) for d in general.devices]


@pytest.mark.parametrize("device", [
    {**_GPU, "taints": [{"key": "k", "effect": "NoSchedule"}]},
    {**_GPU, "bindsToNode": True},
    {**_GPU, "attributes": {"ids": {"ints": [1, 2]}}},
    {**_GPU, "attributes": {"cores": {"int": True}}},
    {**_GPU, "name": 7},
    {**_GPU, "attributes": ["not", "a", "map"]},
], ids=["taints", "binds-to-node", "list-attribute", "bool-as-int", "name-not-text", "attributes-not-a-map"])
def test_other_devices_leave_the_short_path(device: dict[str, Any]) -> None:
    assert model._plain_device(model._Reader("x"), device, "spec.devices[0]") is None


@pytest.mark.parametrize("device, message", [
    ({**_GPU, "capacity": {"memory": {"value": ["80Gi"]}}}, "spec.devices[0].capacity.memory.value: expected a quantity"),
    ({**_GPU, "capacity": {"memory": {}}}, "spec.devices[0].capacity.memory.value: required quantity is missing"),
], ids=["bad-quantity", "missing-quantity"])
def test_capacity_errors_name_the_same_field_on_both_paths(device: dict[str, Any], message: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    texts = []
    for short in (True, False):
        with pytest.raises(ModelError) as err:
            _parse(_slice(device), short, monkeypatch)
        texts.append(str(err.value))
    assert texts[0] == texts[1]
    assert message in texts[0]
