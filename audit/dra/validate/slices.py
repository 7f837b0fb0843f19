"""ResourceSlice: pool, node selection, devices with attributes, capacity, counters and taints."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audit.dra.quantity import Quantity
from audit.dra.semver import is_semver_spec
from audit.dra.validate.check import Check
from audit.dra.validate.common import check_node_selector, check_taint
from audit.dra.validate.names import DNS_SUBDOMAIN, DNS_SUBDOMAIN_MSG
from audit.dra.validate.rules import (
    ATTRIBUTE_STRING_MAX,
    ATTRIBUTE_VALUES_MAX,
    ATTRIBUTE_VERSION_MAX,
    ATTRIBUTES_AND_CAPACITIES_MAX,
    BINDING_CONDITIONS_MAX,
    CONSUMES_COUNTERS_MAX,
    COUNTER_CONSUMPTION_FIELDS,
    COUNTER_FIELDS,
    COUNTER_SET_FIELDS,
    COUNTER_SETS_MAX,
    COUNTERS_PER_SET_MAX,
    DEVICE_CAPACITY_FIELDS,
    DEVICE_FIELDS,
    POOL_FIELDS,
    POOL_NAME_MAX,
    REQUEST_POLICY_FIELDS,
    SLICE_DEVICES_ADVANCED_MAX,
    SLICE_DEVICES_MAX,
    SLICE_SPEC_FIELDS,
    TAINTS_MAX,
    VALID_RANGE_FIELDS,
    VALID_VALUES_MAX,
    field_set,
)

_ATTRIBUTE_SCALARS = ("int", "bool", "string", "version")
_ATTRIBUTE_LISTS = ("ints", "bools", "strings", "versions")


def _attribute(c: Check, value: Any, path: str) -> int:
    """Validate one attribute value; returns how many values it holds (lists count each)."""
    if value is None:
        c.required(path, "exactly one value must be specified")
        return 1
    attr = c.mapping(value, path, field_set(*_ATTRIBUTE_SCALARS, *_ATTRIBUTE_LISTS))
    if attr is None:
        return 1
    present = [k for k in (*_ATTRIBUTE_SCALARS, *_ATTRIBUTE_LISTS) if attr.get(k) is not None]
    if not present:
        c.required(path, "exactly one value must be specified")
        return 1
    if len(present) > 1:
        c.invalid(path, None, f"exactly one value must be specified, got {', '.join(present)}")
    kind = present[0]
    if kind in _ATTRIBUTE_SCALARS:
        _scalar_attribute(c, kind, attr[kind], f"{path}.{kind}")
        return 1
    values = c.listing(attr[kind], f"{path}.{kind}") or []
    for i, item in enumerate(values):
        _scalar_attribute(c, kind[:-1], item, f"{path}.{kind}[{i}]")
    return len(values)


def _scalar_attribute(c: Check, kind: str, value: Any, path: str) -> None:
    if kind == "int":
        c.integer(value, path)
    elif kind == "bool":
        c.boolean(value, path)
    elif kind == "string":
        text = c.string(value, path)
        if text is not None and len(text) > ATTRIBUTE_STRING_MAX:
            c.too_long(path, ATTRIBUTE_STRING_MAX)
    else:
        text = c.string(value, path)
        if text is None:
            return
        if len(text) > ATTRIBUTE_VERSION_MAX:
            c.too_long(path, ATTRIBUTE_VERSION_MAX)
        if not is_semver_spec(text):
            c.invalid(path, text, "must be a string compatible with semver.org spec 2.0.0")


def _request_policy(c: Check, value: Any, capacity: Quantity | None, path: str) -> None:
    policy = c.mapping(value, path, REQUEST_POLICY_FIELDS)
    if policy is None:
        return
    default = c.quantity(policy["default"], f"{path}.default") if policy.get("default") is not None else None
    valid_values = policy.get("validValues")
    valid_range = policy.get("validRange")
    if valid_values is not None and valid_range is not None:
        c.invalid(path, None, "exactly one of `validValues` or `validRange` may be set, but multiple fields are set")
    if valid_values is not None:
        previous: Quantity | None = None
        for p, item in c.items(valid_values, f"{path}.validValues", VALID_VALUES_MAX):
            q = c.quantity(item, p)
            if q is None:
                continue
            if previous is not None and q <= previous:
                c.invalid(p, item, "values must be sorted in ascending order and unique")
            if capacity is not None and q > capacity:
                c.invalid(p, item, f"must be less than or equal to the capacity value ({capacity})")
            previous = q
    rng = c.mapping(valid_range, f"{path}.validRange", VALID_RANGE_FIELDS)
    if rng is not None:
        low = c.quantity(rng.get("min"), f"{path}.validRange.min")
        high = c.quantity(rng["max"], f"{path}.validRange.max") if rng.get("max") is not None else None
        step = c.quantity(rng["step"], f"{path}.validRange.step") if rng.get("step") is not None else None
        if low is not None and high is not None and high < low:
            c.invalid(f"{path}.validRange.max", rng["max"], "must be greater than or equal to min")
        if step is not None and step.sign() <= 0:
            c.invalid(f"{path}.validRange.step", rng["step"], "must be greater than zero")
    if default is not None and capacity is not None and default > capacity:
        c.invalid(f"{path}.default", policy["default"], f"must be less than or equal to the capacity value ({capacity})")


def _counters(c: Check, value: Any, path: str, limit: int) -> None:
    counters = c.mapping(value, path)
    if counters is None:
        c.required(path)
        return
    if len(counters) > limit:
        c.too_many(path, len(counters), limit, is_list=False)
    for name, counter in counters.items():
        c.dns_label(str(name), f"{path}[{name}]")
        entry = c.mapping(counter, f"{path}[{name}]", COUNTER_FIELDS)
        if entry is not None:
            c.quantity(entry.get("value"), f"{path}[{name}].value")


def _node_selection(c: Check, holder: Mapping[str, Any], path: str, allow_per_device: bool) -> int:
    """Exactly one of the node selection fields; returns how many are set."""
    fields = ["nodeName", "nodeSelector", "allNodes"] + (["perDeviceNodeSelection"] if allow_per_device else [])
    set_fields = [f for f in fields if holder.get(f) not in (None, False, "")]
    listed = ", ".join(f"`{f}`" for f in fields)
    if not set_fields:
        c.required(path, f"exactly one of {listed} is required")
    elif len(set_fields) > 1:
        c.invalid(path, "{" + ", ".join(set_fields) + "}", f"exactly one of {listed} is required, but multiple fields are set")
    prefix = f"{path}."
    node_name = c.string(holder.get("nodeName"), f"{prefix}nodeName")
    if node_name:
        c.dns_subdomain(node_name, f"{prefix}nodeName")
    selector = c.mapping(holder.get("nodeSelector"), f"{prefix}nodeSelector")
    if selector is not None:
        check_node_selector(c, selector, f"{prefix}nodeSelector", exactly_one_term=True)
    c.boolean(holder.get("allNodes"), f"{prefix}allNodes")
    return len(set_fields)



def _device(c: Check, device: Mapping[str, Any], path: str, per_device_nodes: bool) -> bool:
    """Validate one device; returns whether it uses the features that lower the device limit."""
    attributes = c.mapping(device.get("attributes"), f"{path}.attributes") or {}
    capacity = c.mapping(device.get("capacity"), f"{path}.capacity") or {}
    if len(attributes) + len(capacity) > ATTRIBUTES_AND_CAPACITIES_MAX:
        c.invalid(path, len(attributes) + len(capacity),
                  f"the total number of attributes and capacities must not exceed {ATTRIBUTES_AND_CAPACITIES_MAX}")
    advanced = False
    values = 0
    for name, attr in attributes.items():
        p = f"{path}.attributes[{name}]"
        c.qualified_name(str(name), p)
        values += _attribute(c, attr, p)
        if isinstance(attr, dict) and any(attr.get(k) is not None for k in _ATTRIBUTE_LISTS):
            advanced = True
    if values > ATTRIBUTE_VALUES_MAX:
        c.invalid(f"{path}.attributes", values, f"the total number of attribute values must not exceed {ATTRIBUTE_VALUES_MAX}")
    for name, entry in capacity.items():
        p = f"{path}.capacity[{name}]"
        c.qualified_name(str(name), p)
        cap = c.mapping(entry, p, DEVICE_CAPACITY_FIELDS)
        if cap is None:
            c.required(f"{p}.value")
            continue
        amount = c.quantity(cap.get("value"), f"{p}.value")
        _request_policy(c, cap.get("requestPolicy"), amount, f"{p}.requestPolicy")
    consumes = c.items(device.get("consumesCounters"), f"{path}.consumesCounters", CONSUMES_COUNTERS_MAX)
    for p, item in consumes:
        consumption = c.mapping(item, p, COUNTER_CONSUMPTION_FIELDS)
        if consumption is None:
            continue
        counter_set = c.string(consumption.get("counterSet"), f"{p}.counterSet")
        if not counter_set:
            c.required(f"{p}.counterSet")
        else:
            c.dns_label(counter_set, f"{p}.counterSet")
        _counters(c, consumption.get("counters"), f"{p}.counters", COUNTERS_PER_SET_MAX)
    taints = c.items(device.get("taints"), f"{path}.taints", TAINTS_MAX)
    for p, item in taints:
        check_taint(c, item, p)
    for field in ("bindingConditions", "bindingFailureConditions"):
        for p, item in c.items(device.get(field), f"{path}.{field}", BINDING_CONDITIONS_MAX):
            condition = c.string(item, p)
            if condition is not None:
                c.label_key(condition, p)
    if bool(device.get("bindingConditions")) != bool(device.get("bindingFailureConditions")):
        c.invalid(f"{path}.bindingFailureConditions", None,
                  "bindingConditions and bindingFailureConditions must be set together")
    c.boolean(device.get("allowMultipleAllocations"), f"{path}.allowMultipleAllocations")
    c.boolean(device.get("bindsToNode"), f"{path}.bindsToNode")
    node_fields = [f for f in ("nodeName", "nodeSelector", "allNodes") if device.get(f) not in (None, False, "")]
    if per_device_nodes:
        _node_selection(c, device, path, allow_per_device=False)
    elif node_fields:
        for field in node_fields:
            c.forbidden(f"{path}.{field}", "only allowed when `perDeviceNodeSelection` is set in the ResourceSlice spec")
    return advanced or bool(consumes) or bool(taints)


def check_resource_slice(c: Check, raw: Mapping[str, Any]) -> None:
    spec = c.mapping(raw.get("spec"), "spec", SLICE_SPEC_FIELDS)
    if spec is None:
        c.required("spec")
        return
    driver = spec.get("driver")
    if driver is None or driver == "":
        c.required("spec.driver")
    else:
        c.driver_name(driver, "spec.driver")
    pool = c.mapping(spec.get("pool"), "spec.pool", POOL_FIELDS)
    if pool is None:
        c.required("spec.pool")
    else:
        name = c.string(pool.get("name"), "spec.pool.name")
        if not name:
            c.required("spec.pool.name")
        else:
            if len(name) > POOL_NAME_MAX:
                c.too_long("spec.pool.name", POOL_NAME_MAX)
            for part in name.split("/"):
                if not DNS_SUBDOMAIN.fullmatch(part):
                    c.invalid("spec.pool.name", name, DNS_SUBDOMAIN_MSG)
                    break
        generation = c.integer(pool.get("generation"), "spec.pool.generation")
        if generation is not None and generation < 0:
            c.invalid("spec.pool.generation", generation, "must be greater than or equal to 0")
        count = c.integer(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount")
        if count is None:
            c.required("spec.pool.resourceSliceCount")
        elif count <= 0:
            c.invalid("spec.pool.resourceSliceCount", count, "must be greater than zero")
    _node_selection(c, spec, "spec", allow_per_device=True)
    per_device = spec.get("perDeviceNodeSelection") is True
    devices = c.listing(spec.get("devices"), "spec.devices") or []
    counter_sets = c.listing(spec.get("sharedCounters"), "spec.sharedCounters") or []
    if devices and counter_sets:
        c.invalid("spec", None, "exactly one of `devices` or `sharedCounters` may be set, but multiple fields are set")
    advanced = False
    seen: set[str] = set()
    for i, item in enumerate(devices):
        p = f"spec.devices[{i}]"
        device = c.mapping(item, p, DEVICE_FIELDS)
        if device is None:
            continue
        name = c.string(device.get("name"), f"{p}.name")
        if not name:
            c.required(f"{p}.name")
        elif c.dns_label(name, f"{p}.name"):
            if name in seen:
                c.duplicate(f"{p}.name", name)
            seen.add(name)
        advanced = _device(c, device, p, per_device) or advanced
    limit = SLICE_DEVICES_ADVANCED_MAX if advanced else SLICE_DEVICES_MAX
    if len(devices) > limit:
        c.too_many("spec.devices", len(devices), limit)
    if len(counter_sets) > COUNTER_SETS_MAX:
        c.too_many("spec.sharedCounters", len(counter_sets), COUNTER_SETS_MAX)
    set_names: set[str] = set()
    for i, item in enumerate(counter_sets):
        p = f"spec.sharedCounters[{i}]"
        counter_set = c.mapping(item, p, COUNTER_SET_FIELDS)
        if counter_set is None:
            continue
        name = c.string(counter_set.get("name"), f"{p}.name")
        if not name:
            c.required(f"{p}.name")
        elif c.dns_label(name, f"{p}.name"):
            if name in set_names:
                c.duplicate(f"{p}.name", name)
            set_names.add(name)
        _counters(c, counter_set.get("counters"), f"{p}.counters", COUNTERS_PER_SET_MAX)
