"""DeviceClass, DeviceTaintRule and the DRA-relevant parts of Node and Pod."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audit.dra.validate.check import Check
from audit.dra.validate.common import check_opaque, check_selectors, check_taint
from audit.dra.validate.names import DNS_SUBDOMAIN, DNS_SUBDOMAIN_MSG
from audit.dra.validate.rules import (
    CLASS_CONFIG_FIELDS,
    CLASS_SPEC_FIELDS,
    CONFIG_MAX,
    TAINT_RULE_SELECTOR_FIELDS,
    TAINT_RULE_SPEC_FIELDS,
)


def check_device_class(c: Check, raw: Mapping[str, Any]) -> None:
    spec = c.mapping(raw.get("spec"), "spec", CLASS_SPEC_FIELDS) or {}
    check_selectors(c, spec.get("selectors"), "spec.selectors")
    for p, item in c.items(spec.get("config"), "spec.config", CONFIG_MAX):
        config = c.mapping(item, p, CLASS_CONFIG_FIELDS)
        if config is not None:
            check_opaque(c, config.get("opaque"), f"{p}.opaque")
    name = c.string(spec.get("extendedResourceName"), "spec.extendedResourceName")
    if name is not None:
        c.label_key(name, "spec.extendedResourceName")
        if "/" not in name:
            c.invalid("spec.extendedResourceName", name, "must be a fully-qualified name (e.g. 'example.com/gpu')")



def check_device_taint_rule(c: Check, raw: Mapping[str, Any]) -> None:
    spec = c.mapping(raw.get("spec"), "spec", TAINT_RULE_SPEC_FIELDS)
    if spec is None:
        c.required("spec")
        return
    selector = c.mapping(spec.get("deviceSelector"), "spec.deviceSelector", TAINT_RULE_SELECTOR_FIELDS)
    if selector is not None:
        if selector.get("driver") is not None:
            c.driver_name(selector["driver"], "spec.deviceSelector.driver")
        pool = c.string(selector.get("pool"), "spec.deviceSelector.pool")
        if pool:
            for part in pool.split("/"):
                if not DNS_SUBDOMAIN.fullmatch(part):
                    c.invalid("spec.deviceSelector.pool", pool, DNS_SUBDOMAIN_MSG)
                    break
        device = c.string(selector.get("device"), "spec.deviceSelector.device")
        if device:
            c.dns_label(device, "spec.deviceSelector.device")
        class_name = c.string(selector.get("deviceClassName"), "spec.deviceSelector.deviceClassName")
        if class_name:
            c.dns_subdomain(class_name, "spec.deviceSelector.deviceClassName")
        check_selectors(c, selector.get("selectors"), "spec.deviceSelector.selectors")
    check_taint(c, spec.get("taint"), "spec.taint")


def check_node(c: Check, raw: Mapping[str, Any]) -> None:
    spec = c.mapping(raw.get("spec"), "spec") or {}
    for p, item in c.items(spec.get("taints"), "spec.taints", None):
        taint = c.mapping(item, p)
        if taint is None:
            continue
        key = c.string(taint.get("key"), f"{p}.key")
        if not key:
            c.required(f"{p}.key")
        else:
            c.label_key(key, f"{p}.key")
        effect = c.string(taint.get("effect"), f"{p}.effect")
        if not effect:
            c.required(f"{p}.effect")
        elif effect not in ("NoExecute", "NoSchedule", "PreferNoSchedule"):
            c.not_supported(f"{p}.effect", effect, ("NoExecute", "NoSchedule", "PreferNoSchedule"))


def check_pod(c: Check, raw: Mapping[str, Any]) -> None:
    spec = c.mapping(raw.get("spec"), "spec")
    if spec is None:
        c.required("spec")
        return
    claim_names: set[str] = set()
    for p, item in c.items(spec.get("resourceClaims"), "spec.resourceClaims", None):
        claim = c.mapping(item, p)
        if claim is None:
            continue
        name = c.string(claim.get("name"), f"{p}.name")
        if not name:
            c.required(f"{p}.name")
        elif c.dns_label(name, f"{p}.name"):
            if name in claim_names:
                c.duplicate(f"{p}.name", name)
            claim_names.add(name)
        by_name = c.string(claim.get("resourceClaimName"), f"{p}.resourceClaimName")
        by_template = c.string(claim.get("resourceClaimTemplateName"), f"{p}.resourceClaimTemplateName")
        if by_name and by_template:
            c.invalid(p, None, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified")
        elif not by_name and not by_template:
            c.required(p, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`")
        for field, value in (("resourceClaimName", by_name), ("resourceClaimTemplateName", by_template)):
            if value:
                c.dns_subdomain(value, f"{p}.{field}")
    for field in ("initContainers", "containers"):
        for p, item in c.items(spec.get(field), f"spec.{field}", None):
            container = c.mapping(item, p) or {}
            resources = c.mapping(container.get("resources"), f"{p}.resources") or {}
            for cp, claim_item in c.items(resources.get("claims"), f"{p}.resources.claims", None):
                ref = c.mapping(claim_item, cp)
                if ref is None:
                    continue
                name = c.string(ref.get("name"), f"{cp}.name")
                if not name:
                    c.required(f"{cp}.name")
                elif name not in claim_names:
                    c.not_supported(f"{cp}.name", name, tuple(sorted(claim_names)))
