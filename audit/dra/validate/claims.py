"""ResourceClaim and ResourceClaimTemplate: requests, subrequests, constraints, config and status."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audit.dra.validate.check import Check
from audit.dra.validate.common import check_opaque, check_selectors, check_tolerations
from audit.dra.validate.rules import (
    ALLOCATION_RESULTS_MAX,
    CAPACITY_REQUIREMENTS_FIELDS,
    CLAIM_CONFIG_FIELDS,
    CLAIM_SPEC_FIELDS,
    CONFIG_MAX,
    CONSTRAINT_FIELDS,
    CONSTRAINTS_MAX,
    DEVICE_CLAIM_FIELDS,
    DEVICE_REQUESTS_MAX,
    EXACT_FIELDS,
    FIRST_AVAILABLE_MAX,
    REQUEST_FIELDS,
    RESERVED_FOR_MAX,
    SUBREQUEST_FIELDS,
    TEMPLATE_SPEC_FIELDS,
)


def _allocation_mode(c: Check, request: Mapping[str, Any], path: str) -> None:
    mode = c.string(request.get("allocationMode"), f"{path}.allocationMode") or "ExactCount"
    count = c.integer(request.get("count"), f"{path}.count")
    if mode == "All":
        if count:
            c.invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'")
    elif mode == "ExactCount":
        if count is not None and count <= 0:
            c.invalid(f"{path}.count", count, "must be greater than zero")
    else:
        c.not_supported(f"{path}.allocationMode", mode, ("All", "ExactCount"))


def _capacity_requests(c: Check, value: Any, path: str) -> None:
    capacity = c.mapping(value, path, CAPACITY_REQUIREMENTS_FIELDS)
    if capacity is None:
        return
    requests = c.mapping(capacity.get("requests"), f"{path}.requests")
    for name, amount in (requests or {}).items():
        c.qualified_name(str(name), f"{path}.requests[{name}]")
        c.quantity(amount, f"{path}.requests[{name}]")


def _request_body(c: Check, request: Mapping[str, Any], path: str) -> None:
    """The fields ExactDeviceRequest and DeviceSubRequest share."""
    class_name = c.string(request.get("deviceClassName"), f"{path}.deviceClassName")
    if not class_name:
        c.required(f"{path}.deviceClassName")
    else:
        c.dns_subdomain(class_name, f"{path}.deviceClassName")
    check_selectors(c, request.get("selectors"), f"{path}.selectors")
    _allocation_mode(c, request, path)
    check_tolerations(c, request.get("tolerations"), f"{path}.tolerations")
    _capacity_requests(c, request.get("capacity"), f"{path}.capacity")


def _claim_spec(c: Check, spec: Mapping[str, Any], path: str) -> None:
    c.mapping(spec, path, CLAIM_SPEC_FIELDS)
    devices = c.mapping(spec.get("devices"), f"{path}.devices", DEVICE_CLAIM_FIELDS)
    if devices is None:
        return
    path = f"{path}.devices"
    request_names: dict[str, set[str]] = {}
    for p, item in c.items(devices.get("requests"), f"{path}.requests", DEVICE_REQUESTS_MAX):
        request = c.mapping(item, p, REQUEST_FIELDS)
        if request is None:
            continue
        name = c.string(request.get("name"), f"{p}.name")
        if not name:
            c.required(f"{p}.name")
        elif c.dns_label(name, f"{p}.name"):
            if name in request_names:
                c.duplicate(f"{p}.name", name)
            request_names.setdefault(name, set())
        exactly = request.get("exactly")
        first = request.get("firstAvailable")
        if exactly is None and first is None:
            c.required(p, "exactly one of `exactly` or `firstAvailable` is required")
        elif exactly is not None and first is not None:
            c.invalid(p, None, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set")
        if exactly is not None:
            body = c.mapping(exactly, f"{p}.exactly", EXACT_FIELDS)
            if body is not None:
                _request_body(c, body, f"{p}.exactly")
                c.boolean(body.get("adminAccess"), f"{p}.exactly.adminAccess")
        if first is not None:
            subrequests = c.items(first, f"{p}.firstAvailable", FIRST_AVAILABLE_MAX)
            if not subrequests and isinstance(first, list):
                c.required(f"{p}.firstAvailable")
            seen: set[str] = set()
            for sp, sub_item in subrequests:
                sub = c.mapping(sub_item, sp, SUBREQUEST_FIELDS | {"adminAccess"})
                if sub is None:
                    continue
                sub_name = c.string(sub.get("name"), f"{sp}.name")
                if not sub_name:
                    c.required(f"{sp}.name")
                elif c.dns_label(sub_name, f"{sp}.name"):
                    if sub_name in seen:
                        c.duplicate(f"{sp}.name", sub_name)
                    seen.add(sub_name)
                    if name:
                        request_names.setdefault(name, set()).add(sub_name)
                if "adminAccess" in sub:
                    c.forbidden(f"{sp}.adminAccess", "adminAccess is not supported in subrequests")
                _request_body(c, sub, sp)

    def request_refs(value: Any, ref_path: str) -> None:
        seen_refs: set[str] = set()
        for rp, ref in c.items(value, ref_path, DEVICE_REQUESTS_MAX):
            text = c.string(ref, rp)
            if text is None:
                continue
            if text in seen_refs:
                c.duplicate(rp, text)
            seen_refs.add(text)
            req, sep, sub = text.partition("/")
            known = req in request_names and (not sep or sub in request_names[req])
            if not known:
                c.invalid(rp, text, "must be the name of a request in the claim or the name of a request "
                                    "and a subrequest separated by '/'")

    for p, item in c.items(devices.get("constraints"), f"{path}.constraints", CONSTRAINTS_MAX):
        constraint = c.mapping(item, p, CONSTRAINT_FIELDS)
        if constraint is None:
            continue
        request_refs(constraint.get("requests"), f"{p}.requests")
        match, distinct = constraint.get("matchAttribute"), constraint.get("distinctAttribute")
        if match is None and distinct is None:
            c.required(p, "exactly one of `matchAttribute` or `distinctAttribute` is required")
        elif match is not None and distinct is not None:
            c.invalid(p, None, "exactly one of `matchAttribute` or `distinctAttribute` is required, but multiple fields are set")
        if match is not None:
            c.fully_qualified_name(match, f"{p}.matchAttribute")
        if distinct is not None:
            c.fully_qualified_name(distinct, f"{p}.distinctAttribute")
    for p, item in c.items(devices.get("config"), f"{path}.config", CONFIG_MAX):
        config = c.mapping(item, p, CLAIM_CONFIG_FIELDS)
        if config is None:
            continue
        request_refs(config.get("requests"), f"{p}.requests")
        check_opaque(c, config.get("opaque"), f"{p}.opaque")


def _claim_status(c: Check, status: Mapping[str, Any]) -> None:
    allocation = c.mapping(status.get("allocation"), "status.allocation")
    if allocation is not None:
        devices = c.mapping(allocation.get("devices"), "status.allocation.devices") or {}
        for p, item in c.items(devices.get("results"), "status.allocation.devices.results", ALLOCATION_RESULTS_MAX):
            result = c.mapping(item, p)
            if result is None:
                continue
            for field in ("request", "driver", "pool", "device"):
                if not c.string(result.get(field), f"{p}.{field}"):
                    c.required(f"{p}.{field}")
    c.items(status.get("reservedFor"), "status.reservedFor", RESERVED_FOR_MAX)


def check_resource_claim(c: Check, raw: Mapping[str, Any]) -> None:
    spec = c.mapping(raw.get("spec"), "spec")
    if spec is None:
        c.required("spec")
    else:
        _claim_spec(c, spec, "spec")
    status = c.mapping(raw.get("status"), "status")
    if status is not None:
        _claim_status(c, status)


def check_resource_claim_template(c: Check, raw: Mapping[str, Any]) -> None:
    spec = c.mapping(raw.get("spec"), "spec", TEMPLATE_SPEC_FIELDS)
    if spec is None:
        c.required("spec")
        return
    meta = c.mapping(spec.get("metadata"), "spec.metadata") or {}
    for key in sorted(meta):
        if key not in ("labels", "annotations"):
            c.forbidden(f"spec.metadata.{key}", "only labels and annotations may be set")
    inner = c.mapping(spec.get("spec"), "spec.spec")
    if inner is None:
        c.required("spec.spec")
    else:
        _claim_spec(c, inner, "spec.spec")
