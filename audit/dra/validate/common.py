"""Parts several kinds share: object metadata, CEL selectors, opaque configuration, tolerations,
taints and node selectors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from audit.dra.cel import MAX_EXPRESSION_LENGTH, CelCompileError
from audit.dra.validate.check import Check
from audit.dra.validate.rules import (
    CEL_FIELDS,
    METADATA_FIELDS,
    OPAQUE_FIELDS,
    OPAQUE_PARAMETERS_MAX,
    SELECTOR_FIELDS,
    SELECTORS_MAX,
    TAINT_EFFECTS,
    TAINT_FIELDS,
    TOLERATION_EFFECTS,
    TOLERATION_FIELDS,
    TOLERATIONS_MAX,
)


def check_metadata(c: Check, raw: Mapping[str, Any], namespaced: bool) -> None:
    meta = c.mapping(raw.get("metadata"), "metadata", METADATA_FIELDS)
    if meta is None:
        c.required("metadata.name", "name or generateName is required")
        return
    name = c.string(meta.get("name"), "metadata.name")
    generate = c.string(meta.get("generateName"), "metadata.generateName")
    if not name and not generate:
        c.required("metadata.name", "name or generateName is required")
    elif name:
        c.dns_subdomain(name, "metadata.name")
    if namespaced:
        ns = c.string(meta.get("namespace"), "metadata.namespace")
        if ns:
            c.dns_label(ns, "metadata.namespace")
    for field in ("labels", "annotations"):
        entries = c.mapping(meta.get(field), f"metadata.{field}")
        for key, value in (entries or {}).items():
            c.label_key(str(key), f"metadata.{field}")
            if field == "labels":
                text = c.string(value, f"metadata.labels[{key}]")
                if text is not None:
                    c.label_value(text, f"metadata.labels[{key}]")


def check_selectors(c: Check, value: Any, path: str) -> None:
    for p, item in c.items(value, path, SELECTORS_MAX):
        selector = c.mapping(item, p, SELECTOR_FIELDS)
        if selector is None:
            continue
        cel = c.mapping(selector.get("cel"), f"{p}.cel", CEL_FIELDS)
        if cel is None:
            if "cel" not in selector:
                c.required(f"{p}.cel")
            continue
        expression = c.string(cel.get("expression"), f"{p}.cel.expression")
        if expression is None:
            c.required(f"{p}.cel.expression")
            continue
        if not expression:
            c.required(f"{p}.cel.expression")
            continue
        if len(expression.encode()) > MAX_EXPRESSION_LENGTH:
            # The API server does not compile expressions that are too long.
            c.too_long(f"{p}.cel.expression", MAX_EXPRESSION_LENGTH)
            continue
        try:
            c.cel.compile(expression)
        except CelCompileError as exc:
            # First line only: it carries the position; the source excerpt would break one-line output.
            c.invalid(f"{p}.cel.expression", expression, str(exc).splitlines()[0])


def check_opaque(c: Check, value: Any, path: str) -> None:
    opaque = c.mapping(value, path, OPAQUE_FIELDS)
    if opaque is None:
        c.required(path)
        return
    driver = opaque.get("driver")
    if driver is None:
        c.required(f"{path}.driver")
    else:
        c.driver_name(driver, f"{path}.driver")
    if "parameters" not in opaque or opaque.get("parameters") is None:
        c.required(f"{path}.parameters")
    elif len(json.dumps(opaque["parameters"], separators=(",", ":"))) > OPAQUE_PARAMETERS_MAX:
        c.too_long(f"{path}.parameters", OPAQUE_PARAMETERS_MAX)



def check_tolerations(c: Check, value: Any, path: str) -> None:
    for p, item in c.items(value, path, TOLERATIONS_MAX):
        toleration = c.mapping(item, p, TOLERATION_FIELDS)
        if toleration is None:
            continue
        key = c.string(toleration.get("key"), f"{p}.key") or ""
        operator = c.string(toleration.get("operator"), f"{p}.operator") or "Equal"
        if key:
            c.label_key(key, f"{p}.key")
        elif operator != "Exists":
            c.invalid(f"{p}.operator", operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\"")
        value_text = c.string(toleration.get("value"), f"{p}.value")
        if operator == "Exists":
            if value_text:
                c.invalid(f"{p}.value", value_text, "value must be empty when `operator` is 'Exists'")
        elif operator == "Equal":
            if value_text:
                c.label_value(value_text, f"{p}.value")
        else:
            c.not_supported(f"{p}.operator", operator, ("Equal", "Exists"))
        effect = c.string(toleration.get("effect"), f"{p}.effect")
        if effect and effect not in TOLERATION_EFFECTS:
            c.not_supported(f"{p}.effect", effect, TOLERATION_EFFECTS)
        # DeviceToleration ignores tolerationSeconds unless the effect is NoExecute (types.go); not an error.
        c.integer(toleration.get("tolerationSeconds"), f"{p}.tolerationSeconds")



_SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")


def check_node_selector(c: Check, selector: Mapping[str, Any], path: str, exactly_one_term: bool) -> None:
    terms = c.items(selector.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms", None)
    if exactly_one_term and len(terms) != 1:
        c.invalid(f"{path}.nodeSelectorTerms", len(terms), "must have exactly one node selector term")
    elif not terms:
        c.required(f"{path}.nodeSelectorTerms", "must have at least one node selector term")
    for tp, item in terms:
        term = c.mapping(item, tp) or {}
        for field in ("matchExpressions", "matchFields"):
            for rp, req_item in c.items(term.get(field), f"{tp}.{field}", None):
                requirement = c.mapping(req_item, rp)
                if requirement is None:
                    continue
                key = c.string(requirement.get("key"), f"{rp}.key")
                if not key:
                    c.required(f"{rp}.key")
                elif field == "matchExpressions":
                    c.label_key(key, f"{rp}.key")
                operator = c.string(requirement.get("operator"), f"{rp}.operator")
                values = c.listing(requirement.get("values"), f"{rp}.values") or []
                if operator not in _SELECTOR_OPERATORS:
                    c.not_supported(f"{rp}.operator", operator, _SELECTOR_OPERATORS)
                elif operator in ("In", "NotIn") and not values:
                    c.required(f"{rp}.values", "must be specified when `operator` is 'In' or 'NotIn'")
                elif operator in ("Exists", "DoesNotExist") and values:
                    c.forbidden(f"{rp}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
                elif operator in ("Gt", "Lt") and len(values) != 1:
                    c.required(f"{rp}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'")


def check_taint(c: Check, value: Any, path: str) -> None:
    taint = c.mapping(value, path, TAINT_FIELDS)
    if taint is None:
        c.required(path)
        return
    key = c.string(taint.get("key"), f"{path}.key")
    if not key:
        c.required(f"{path}.key")
    else:
        c.label_key(key, f"{path}.key")
    text = c.string(taint.get("value"), f"{path}.value")
    if text:
        c.label_value(text, f"{path}.value")
    effect = c.string(taint.get("effect"), f"{path}.effect")
    if not effect:
        c.required(f"{path}.effect")
    elif effect not in TAINT_EFFECTS:
        c.not_supported(f"{path}.effect", effect, TAINT_EFFECTS)
