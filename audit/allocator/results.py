"""Building ``status.allocation`` byte for byte: result items, config and node selector.

Result items carry ``adminAccess`` only when true, a copy of the request's (defaulted)
tolerations, the device's binding conditions when that feature is on, and ``shareID`` plus
``consumedCapacity`` only for shares of multi-allocatable devices, as Go's ``omitempty`` prints
them. Upstream 1.36 rules (``Allocate`` in ``allocator_incubating.go``): class configs first, one entry per class config with the
requests of that class collected in order; then claim configs — all of them when they name no
request, otherwise once per claim request they name (the 1.36 duplicate quirk) or once (fixed
behaviour). The node selector is ``metadata.name In [node]`` as soon as one device is local to
the node or binds to it; otherwise the union of the devices' single-term node selectors; ``None``
when every device is reachable from every node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from audit.allocator.inventory import DeviceEntry
from audit.dra.model import DeviceClass, NodeSelectorRequirement, ResourceClaim, Toleration
from audit.dra.quantity import Quantity


def result_item(request: str, entry: DeviceEntry, admin: bool, tolerations: Sequence[Toleration], device_binding: bool,
                share_id: str | None, consumed: Mapping[str, Quantity] | None) -> dict[str, Any]:
    """One ``DeviceRequestAllocationResult`` in the API's field order."""
    item: dict[str, Any] = {"request": request, "driver": entry.driver, "pool": entry.pool, "device": entry.device.name}
    if admin:
        item["adminAccess"] = True
    if tolerations:
        item["tolerations"] = [t.to_api() for t in tolerations]
    if device_binding:
        if entry.device.binding_conditions:
            item["bindingConditions"] = list(entry.device.binding_conditions)
        if entry.device.binding_failure_conditions:
            item["bindingFailureConditions"] = list(entry.device.binding_failure_conditions)
    if share_id is not None:
        item["shareID"] = share_id
    if consumed:  # a device without capacities records none
        item["consumedCapacity"] = {name: str(q) for name, q in consumed.items()}
    return item


class ResultError(ValueError):
    """The result cannot be expressed (a device node selector with several terms)."""


def build_config(claim: ResourceClaim, requests: Sequence[tuple[str, str, DeviceClass]],
                 duplicates: bool) -> list[dict[str, Any]]:
    """``requests``: per claim request in spec order, (base name, allocated name, class)."""
    config: list[dict[str, Any]] = []
    by_class: dict[str, list[dict[str, Any]]] = {}
    for _base, name, device_class in requests:
        entries = by_class.get(device_class.name)
        if entries is not None:
            for entry in entries:
                entry["requests"].append(name)
            continue
        entries = []
        for item in device_class.config:
            entry = {"source": "FromClass", "requests": [name], **_copy(item)}
            entries.append(entry)
            config.append(entry)
        by_class[device_class.name] = entries
    for claim_config in claim.spec.config:
        if not claim_config.requests:
            config.append({"source": "FromClaim", **_copy(claim_config.raw)})
            continue
        named = set(claim_config.requests)
        for base, name, _cls in requests:
            if base in named or name in named:
                config.append({"source": "FromClaim", "requests": list(claim_config.requests), **_copy(claim_config.raw)})
                if not duplicates:
                    break
    return config


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def build_node_selector(node_name: str, devices: Sequence[tuple[DeviceEntry, bool]]) -> dict[str, Any] | None:
    """``devices``: (entry, binding feature on) per allocated device, in result order."""
    fields: list[NodeSelectorRequirement] = []
    expressions: list[NodeSelectorRequirement] = []
    for entry, binding in devices:
        if entry.node_local or (binding and entry.device.binds_to_node):
            return {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node_name]}]}]}
        selector = entry.node_selector
        if selector is None or not selector.terms:
            continue
        if len(selector.terms) != 1:
            raise ResultError(f"unsupported ResourceSlice.NodeSelector with {len(selector.terms)} terms")
        term = selector.terms[0]
        for req in term.match_fields:
            if req not in fields:
                fields.append(req)
        for req in term.match_expressions:
            if req not in expressions:
                expressions.append(req)
    if not fields and not expressions:
        return None
    term_out: dict[str, Any] = {}
    if expressions:
        term_out["matchExpressions"] = [r.to_api() for r in expressions]
    if fields:
        term_out["matchFields"] = [r.to_api() for r in fields]
    return {"nodeSelectorTerms": [term_out]}
