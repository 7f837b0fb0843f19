"""API-server validation of DRA objects, on raw dicts as a user wrote them.

``validate_object`` reports every violation the Kubernetes API server would refuse for
resource.k8s.io/v1 DeviceClass, ResourceSlice, ResourceClaim and ResourceClaimTemplate,
DeviceTaintRule (v1alpha3 and v1), and the DRA-relevant parts of Node and Pod. Rules, limits and
message texts follow ``pkg/apis/resource/validation`` and apimachinery's ``field`` errors
(``Required value``, ``Too many: 12: must have at most 8 items``, ``Invalid value: "x": …``),
one ``Finding`` per error, in field order, with the field path as the API server prints it.
Validation runs after API defaulting, as on the server (allocationMode ExactCount, count 1,
toleration operator Equal). Selectors are compiled in ``audit.dra.cel`` with the gates the API
server uses for validation (consumable capacity and list-type attributes on).

Not checked, because a single file cannot show it: the admin-access namespace label, counter
sets referenced across the slices of a pool, name uniqueness across objects, and CEL cost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from audit.dra.cel import MAX_EXPRESSION_LENGTH, CelCompileError, CelEnvironment, CelOptions
from audit.dra.model import object_label
from audit.dra.quantity import Quantity
from audit.dra.semver import is_semver_spec

__all__ = ["Finding", "VALIDATED_KINDS", "is_validated", "validate_object", "validate_objects"]

# Limits from resource.k8s.io/v1 types.go.
DEVICE_REQUESTS_MAX = 32
FIRST_AVAILABLE_MAX = 8
SELECTORS_MAX = 32
TOLERATIONS_MAX = 16
CONSTRAINTS_MAX = 32
CONFIG_MAX = 32
SLICE_DEVICES_MAX = 128
SLICE_DEVICES_ADVANCED_MAX = 64
ATTRIBUTES_AND_CAPACITIES_MAX = 32
ATTRIBUTE_VALUES_MAX = 48
ATTRIBUTE_STRING_MAX = 64
ATTRIBUTE_VERSION_MAX = 64
ID_MAX = 32
DRIVER_NAME_MAX = 63
POOL_NAME_MAX = 253
COUNTER_SETS_MAX = 8
COUNTERS_PER_SET_MAX = 32
CONSUMES_COUNTERS_MAX = 2
TAINTS_MAX = 16
BINDING_CONDITIONS_MAX = 4
VALID_VALUES_MAX = 10
OPAQUE_PARAMETERS_MAX = 10 * 1024
RESERVED_FOR_MAX = 256
ALLOCATION_RESULTS_MAX = 32

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_LABEL_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")

# apimachinery's validation messages (util/validation).
_DNS_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
_DNS_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
    "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_C_IDENTIFIER_MSG = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
    "characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is "
    "'[A-Za-z_][A-Za-z0-9_]*')"
)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)

RESOURCE_V1 = "resource.k8s.io/v1"
_API_VERSIONS = {
    "DeviceClass": (RESOURCE_V1,),
    "ResourceSlice": (RESOURCE_V1,),
    "ResourceClaim": (RESOURCE_V1,),
    "ResourceClaimTemplate": (RESOURCE_V1,),
    "DeviceTaintRule": ("resource.k8s.io/v1alpha3", RESOURCE_V1),
    "Node": ("v1",),
    "Pod": ("v1",),
}
_TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")
_TOLERATION_EFFECTS = ("NoExecute", "NoSchedule", "None")


def _fields(*names: str) -> frozenset[str]:
    return frozenset(names)


# Field names of the served types (resource.k8s.io/v1, core/v1 ObjectMeta), for strict decoding.
_TOP = _fields("apiVersion", "kind", "metadata", "spec", "status")
_METADATA = _fields("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
                    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
                    "annotations", "ownerReferences", "finalizers", "managedFields")
_CLASS_SPEC = _fields("selectors", "config", "extendedResourceName")
_SELECTOR = _fields("cel")
_CEL = _fields("expression")
_CLASS_CONFIG = _fields("opaque")
_CLAIM_CONFIG = _fields("requests", "opaque")
_OPAQUE = _fields("driver", "parameters")
_CLAIM_SPEC = _fields("devices")
_DEVICE_CLAIM = _fields("requests", "constraints", "config")
_REQUEST = _fields("name", "exactly", "firstAvailable")
_EXACT = _fields("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity")
_SUBREQUEST = _fields("name", "deviceClassName", "selectors", "allocationMode", "count", "tolerations", "capacity")
_TOLERATION = _fields("key", "operator", "value", "effect", "tolerationSeconds")
_CAPACITY_REQUIREMENTS = _fields("requests")
_CONSTRAINT = _fields("requests", "matchAttribute", "distinctAttribute")
_TEMPLATE_SPEC = _fields("metadata", "spec")
_SLICE_SPEC = _fields("driver", "pool", "nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection",
                      "devices", "sharedCounters")
_POOL = _fields("name", "generation", "resourceSliceCount")
_DEVICE = _fields("name", "attributes", "capacity", "consumesCounters", "nodeName", "nodeSelector", "allNodes",
                  "taints", "bindsToNode", "bindingConditions", "bindingFailureConditions",
                  "allowMultipleAllocations", "nodeAllocatableResourceMappings")
_DEVICE_CAPACITY = _fields("value", "requestPolicy")
_REQUEST_POLICY = _fields("default", "validValues", "validRange")
_VALID_RANGE = _fields("min", "max", "step")
_COUNTER_CONSUMPTION = _fields("counterSet", "counters")
_COUNTER = _fields("value")
_COUNTER_SET = _fields("name", "counters")
_TAINT = _fields("key", "value", "effect", "timeAdded")
_TAINT_RULE_SPEC = _fields("deviceSelector", "taint")
_TAINT_RULE_SELECTOR = _fields("deviceClassName", "driver", "pool", "device", "selectors")


@dataclass(frozen=True)
class Finding:
    """One violation: the object, the field path and an API-server style message."""

    obj: str  # e.g. "ResourceClaim default/train-0"
    path: str  # e.g. "spec.devices.requests[0].firstAvailable"
    message: str  # e.g. "Too many: 10: must have at most 8 items"

    def __str__(self) -> str:
        return f"{self.obj}: {self.path}: {self.message}"


def _show(value: Any) -> str:
    """A value inside a message, as apimachinery prints it (strings quoted, numbers bare)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return "<" + _kind(value) + ">"


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "list"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "null" if value is None else type(value).__name__


class _Check:
    """Collects findings for one object; helpers mirror apimachinery's field error types."""

    def __init__(self, obj: str, cel_env: CelEnvironment) -> None:
        self.obj = obj
        self.cel = cel_env
        self.findings: list[Finding] = []

    def add(self, path: str, message: str) -> None:
        self.findings.append(Finding(self.obj, path, message))

    def required(self, path: str, detail: str = "") -> None:
        self.add(path, f"Required value: {detail}" if detail else "Required value")

    def invalid(self, path: str, value: Any, detail: str) -> None:
        self.add(path, f"Invalid value: {_show(value)}: {detail}")

    def forbidden(self, path: str, detail: str) -> None:
        self.add(path, f"Forbidden: {detail}")

    def duplicate(self, path: str, value: Any) -> None:
        self.add(path, f"Duplicate value: {_show(value)}")

    def not_supported(self, path: str, value: Any, supported: tuple[str, ...]) -> None:
        self.add(path, f"Unsupported value: {_show(value)}: supported values: "
                       + ", ".join(json.dumps(s) for s in supported))

    def too_many(self, path: str, actual: int, limit: int) -> None:
        self.add(path, f"Too many: {actual}: must have at most {limit} items")

    def too_long(self, path: str, limit: int) -> None:
        self.add(path, f"Too long: may not be more than {limit} bytes")

    # --- typed access: a wrong type is reported once and the subtree skipped ------------------
    def mapping(self, value: Any, path: str, fields: frozenset[str] | None = None) -> dict[str, Any] | None:
        """The object at ``path``; with ``fields``, keys outside them are reported as strict
        decoding does (``kubectl apply`` refuses unknown fields by default)."""
        if value is None:
            return None
        if not isinstance(value, dict):
            self.invalid(path, value, f"must be an object, got {_kind(value)}")
            return None
        if fields is not None:
            for key in value:
                if key not in fields:
                    self.add(f"{path}.{key}" if path else str(key), f"unknown field {_show(str(key))}")
        return value

    def listing(self, value: Any, path: str) -> list[Any] | None:
        if value is None:
            return None
        if not isinstance(value, list):
            self.invalid(path, value, f"must be a list, got {_kind(value)}")
            return None
        return value

    def string(self, value: Any, path: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.invalid(path, value, f"must be a string, got {_kind(value)}")
            return None
        return value

    def boolean(self, value: Any, path: str) -> bool | None:
        if value is None:
            return None
        if not isinstance(value, bool):
            self.invalid(path, value, f"must be a boolean, got {_kind(value)}")
            return None
        return value

    def integer(self, value: Any, path: str) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.invalid(path, value, f"must be an integer, got {_kind(value)}")
            return None
        return value

    def items(self, value: Any, path: str, limit: int | None) -> list[tuple[str, Any]]:
        """``(item path, item)`` of a list field, reporting ``Too many`` above ``limit``."""
        seq = self.listing(value, path)
        if seq is None:
            return []
        if limit is not None and len(seq) > limit:
            self.too_many(path, len(seq), limit)
        return [(f"{path}[{i}]", item) for i, item in enumerate(seq)]

    # --- name syntax --------------------------------------------------------------------------
    def dns_label(self, value: str, path: str) -> bool:
        ok = True
        if len(value) > 63:
            self.invalid(path, value, "must be no more than 63 characters")
            ok = False
        if not _DNS_LABEL.fullmatch(value):
            self.invalid(path, value, _DNS_LABEL_MSG)
            ok = False
        return ok

    def dns_subdomain(self, value: str, path: str, limit: int = 253) -> bool:
        ok = True
        if len(value) > limit:
            self.invalid(path, value, f"must be no more than {limit} characters")
            ok = False
        if not _DNS_SUBDOMAIN.fullmatch(value):
            self.invalid(path, value, _DNS_SUBDOMAIN_MSG)
            ok = False
        return ok

    def c_identifier(self, value: str, path: str) -> None:
        if len(value) > ID_MAX:
            self.too_long(path, ID_MAX)
        if not _C_IDENTIFIER.fullmatch(value):
            self.invalid(path, value, _C_IDENTIFIER_MSG)

    def driver_name(self, value: Any, path: str) -> None:
        text = self.string(value, path)
        if text is None:
            return
        if not text:
            self.required(path)
            return
        self.dns_subdomain(text, path, DRIVER_NAME_MAX)

    def qualified_name(self, name: str, path: str) -> bool:
        """``validateQualifiedName``: a C identifier, optionally prefixed by ``<domain>/``."""
        before = len(self.findings)
        if not name:
            self.required(path, "name required")
            return False
        parts = name.split("/")
        if len(parts) == 1:
            self.c_identifier(parts[0], path)
        elif len(parts) == 2:
            if not parts[0]:
                self.required(path, "the domain must not be empty")
            else:
                self.driver_name(parts[0], path)
            if not parts[1]:
                self.required(path, "the name must not be empty")
            else:
                self.c_identifier(parts[1], path)
        else:
            self.invalid(path, name, "must include at most one '/' separator")
        return len(self.findings) == before

    def fully_qualified_name(self, value: Any, path: str) -> None:
        name = self.string(value, path)
        if name is None:
            self.required(path, "name required")
            return
        if self.qualified_name(name, path) and "/" not in name:
            self.invalid(path, name, "must include a domain")

    def label_value(self, value: str, path: str) -> None:
        if len(value) > 63:
            self.invalid(path, value, "must be no more than 63 characters")
        if not _LABEL_VALUE.fullmatch(value):
            self.invalid(path, value, _LABEL_VALUE_MSG)

    def label_key(self, key: str, path: str) -> None:
        """``IsQualifiedName`` for label and taint keys: ``[prefix/]name``."""
        prefix, sep, name = key.rpartition("/")
        if sep and not prefix:
            self.invalid(path, key, "prefix part must be non-empty")
        elif prefix and not _DNS_SUBDOMAIN.fullmatch(prefix):
            self.invalid(path, key, "prefix part " + _DNS_SUBDOMAIN_MSG)
        if not name:
            self.invalid(path, key, "name part must be non-empty")
            return
        if len(name) > 63:
            self.invalid(path, key, "name part must be no more than 63 characters")
        if not _LABEL_NAME.fullmatch(name):
            self.invalid(path, key, _NAME_PART_MSG)

    def quantity(self, value: Any, path: str) -> Quantity | None:
        if value is None:
            self.required(path)
            return None
        try:
            return Quantity.parse(value)
        except ValueError as exc:
            self.invalid(path, value, str(exc))
            return None


# --- objects ----------------------------------------------------------------------------------


def _metadata(c: _Check, raw: Mapping[str, Any], namespaced: bool) -> None:
    meta = c.mapping(raw.get("metadata"), "metadata", _METADATA)
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


def _selectors(c: _Check, value: Any, path: str) -> None:
    for p, item in c.items(value, path, SELECTORS_MAX):
        selector = c.mapping(item, p, _SELECTOR)
        if selector is None:
            continue
        cel = c.mapping(selector.get("cel"), f"{p}.cel", _CEL)
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


def _opaque(c: _Check, value: Any, path: str) -> None:
    opaque = c.mapping(value, path, _OPAQUE)
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


def _device_class(c: _Check, raw: Mapping[str, Any]) -> None:
    spec = c.mapping(raw.get("spec"), "spec", _CLASS_SPEC) or {}
    _selectors(c, spec.get("selectors"), "spec.selectors")
    for p, item in c.items(spec.get("config"), "spec.config", CONFIG_MAX):
        config = c.mapping(item, p, _CLASS_CONFIG)
        if config is not None:
            _opaque(c, config.get("opaque"), f"{p}.opaque")
    name = c.string(spec.get("extendedResourceName"), "spec.extendedResourceName")
    if name is not None:
        c.label_key(name, "spec.extendedResourceName")
        if "/" not in name:
            c.invalid("spec.extendedResourceName", name, "must be a fully-qualified name (e.g. 'example.com/gpu')")


# --- ResourceClaim ------------------------------------------------------------------------------


def _tolerations(c: _Check, value: Any, path: str) -> None:
    for p, item in c.items(value, path, TOLERATIONS_MAX):
        toleration = c.mapping(item, p, _TOLERATION)
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
        if effect and effect not in _TOLERATION_EFFECTS:
            c.not_supported(f"{p}.effect", effect, _TOLERATION_EFFECTS)
        seconds = c.integer(toleration.get("tolerationSeconds"), f"{p}.tolerationSeconds")
        if seconds is not None and effect != "NoExecute":
            c.invalid(f"{p}.effect", effect or "", "effect must be 'NoExecute' when `tolerationSeconds` is set")


def _allocation_mode(c: _Check, request: Mapping[str, Any], path: str) -> None:
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


def _capacity_requests(c: _Check, value: Any, path: str) -> None:
    capacity = c.mapping(value, path, _CAPACITY_REQUIREMENTS)
    if capacity is None:
        return
    requests = c.mapping(capacity.get("requests"), f"{path}.requests")
    for name, amount in (requests or {}).items():
        c.qualified_name(str(name), f"{path}.requests[{name}]")
        c.quantity(amount, f"{path}.requests[{name}]")


def _request_body(c: _Check, request: Mapping[str, Any], path: str) -> None:
    """The fields ExactDeviceRequest and DeviceSubRequest share."""
    class_name = c.string(request.get("deviceClassName"), f"{path}.deviceClassName")
    if not class_name:
        c.required(f"{path}.deviceClassName")
    else:
        c.dns_subdomain(class_name, f"{path}.deviceClassName")
    _selectors(c, request.get("selectors"), f"{path}.selectors")
    _allocation_mode(c, request, path)
    _tolerations(c, request.get("tolerations"), f"{path}.tolerations")
    _capacity_requests(c, request.get("capacity"), f"{path}.capacity")


def _claim_spec(c: _Check, spec: Mapping[str, Any], path: str) -> None:
    c.mapping(spec, path, _CLAIM_SPEC)
    devices = c.mapping(spec.get("devices"), f"{path}.devices", _DEVICE_CLAIM)
    if devices is None:
        return
    path = f"{path}.devices"
    request_names: dict[str, set[str]] = {}
    for p, item in c.items(devices.get("requests"), f"{path}.requests", DEVICE_REQUESTS_MAX):
        request = c.mapping(item, p, _REQUEST)
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
            body = c.mapping(exactly, f"{p}.exactly", _EXACT)
            if body is not None:
                _request_body(c, body, f"{p}.exactly")
                c.boolean(body.get("adminAccess"), f"{p}.exactly.adminAccess")
        if first is not None:
            subrequests = c.items(first, f"{p}.firstAvailable", FIRST_AVAILABLE_MAX)
            if not subrequests and isinstance(first, list):
                c.required(f"{p}.firstAvailable")
            seen: set[str] = set()
            for sp, sub_item in subrequests:
                sub = c.mapping(sub_item, sp, _SUBREQUEST | {"adminAccess"})
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
        constraint = c.mapping(item, p, _CONSTRAINT)
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
        config = c.mapping(item, p, _CLAIM_CONFIG)
        if config is None:
            continue
        request_refs(config.get("requests"), f"{p}.requests")
        _opaque(c, config.get("opaque"), f"{p}.opaque")


def _claim_status(c: _Check, status: Mapping[str, Any]) -> None:
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


def _resource_claim(c: _Check, raw: Mapping[str, Any]) -> None:
    spec = c.mapping(raw.get("spec"), "spec")
    if spec is None:
        c.required("spec")
    else:
        _claim_spec(c, spec, "spec")
    status = c.mapping(raw.get("status"), "status")
    if status is not None:
        _claim_status(c, status)


def _resource_claim_template(c: _Check, raw: Mapping[str, Any]) -> None:
    spec = c.mapping(raw.get("spec"), "spec", _TEMPLATE_SPEC)
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


# --- ResourceSlice ------------------------------------------------------------------------------

_ATTRIBUTE_SCALARS = ("int", "bool", "string", "version")
_ATTRIBUTE_LISTS = ("ints", "bools", "strings", "versions")


def _attribute(c: _Check, value: Any, path: str) -> int:
    """Validate one attribute value; returns how many values it holds (lists count each)."""
    if value is None:
        c.required(path, "exactly one value must be specified")
        return 1
    attr = c.mapping(value, path, _fields(*_ATTRIBUTE_SCALARS, *_ATTRIBUTE_LISTS))
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


def _scalar_attribute(c: _Check, kind: str, value: Any, path: str) -> None:
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


def _request_policy(c: _Check, value: Any, capacity: Quantity | None, path: str) -> None:
    policy = c.mapping(value, path, _REQUEST_POLICY)
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
    rng = c.mapping(valid_range, f"{path}.validRange", _VALID_RANGE)
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


def _counters(c: _Check, value: Any, path: str, limit: int) -> None:
    counters = c.mapping(value, path)
    if counters is None:
        c.required(path)
        return
    if len(counters) > limit:
        c.too_many(path, len(counters), limit)
    for name, counter in counters.items():
        c.dns_label(str(name), f"{path}[{name}]")
        entry = c.mapping(counter, f"{path}[{name}]", _COUNTER)
        if entry is not None:
            c.quantity(entry.get("value"), f"{path}[{name}].value")


def _node_selection(c: _Check, holder: Mapping[str, Any], path: str, allow_per_device: bool) -> int:
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
        _node_selector(c, selector, f"{prefix}nodeSelector", exactly_one_term=True)
    c.boolean(holder.get("allNodes"), f"{prefix}allNodes")
    return len(set_fields)


_SELECTOR_OPERATORS = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")


def _node_selector(c: _Check, selector: Mapping[str, Any], path: str, exactly_one_term: bool) -> None:
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


def _taint(c: _Check, value: Any, path: str) -> None:
    taint = c.mapping(value, path, _TAINT)
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
    elif effect not in _TAINT_EFFECTS:
        c.not_supported(f"{path}.effect", effect, _TAINT_EFFECTS)


def _device(c: _Check, device: Mapping[str, Any], path: str, per_device_nodes: bool) -> bool:
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
        cap = c.mapping(entry, p, _DEVICE_CAPACITY)
        if cap is None:
            c.required(f"{p}.value")
            continue
        amount = c.quantity(cap.get("value"), f"{p}.value")
        _request_policy(c, cap.get("requestPolicy"), amount, f"{p}.requestPolicy")
    consumes = c.items(device.get("consumesCounters"), f"{path}.consumesCounters", CONSUMES_COUNTERS_MAX)
    for p, item in consumes:
        consumption = c.mapping(item, p, _COUNTER_CONSUMPTION)
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
        _taint(c, item, p)
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


def _resource_slice(c: _Check, raw: Mapping[str, Any]) -> None:
    spec = c.mapping(raw.get("spec"), "spec", _SLICE_SPEC)
    if spec is None:
        c.required("spec")
        return
    driver = spec.get("driver")
    if driver is None or driver == "":
        c.required("spec.driver")
    else:
        c.driver_name(driver, "spec.driver")
    pool = c.mapping(spec.get("pool"), "spec.pool", _POOL)
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
                if not _DNS_SUBDOMAIN.fullmatch(part):
                    c.invalid("spec.pool.name", name, _DNS_SUBDOMAIN_MSG)
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
        device = c.mapping(item, p, _DEVICE)
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
        counter_set = c.mapping(item, p, _COUNTER_SET)
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


# --- DeviceTaintRule, Node, Pod -------------------------------------------------------------------


def _device_taint_rule(c: _Check, raw: Mapping[str, Any]) -> None:
    spec = c.mapping(raw.get("spec"), "spec", _TAINT_RULE_SPEC)
    if spec is None:
        c.required("spec")
        return
    selector = c.mapping(spec.get("deviceSelector"), "spec.deviceSelector", _TAINT_RULE_SELECTOR)
    if selector is not None:
        if selector.get("driver") is not None:
            c.driver_name(selector["driver"], "spec.deviceSelector.driver")
        pool = c.string(selector.get("pool"), "spec.deviceSelector.pool")
        if pool:
            for part in pool.split("/"):
                if not _DNS_SUBDOMAIN.fullmatch(part):
                    c.invalid("spec.deviceSelector.pool", pool, _DNS_SUBDOMAIN_MSG)
                    break
        device = c.string(selector.get("device"), "spec.deviceSelector.device")
        if device:
            c.dns_label(device, "spec.deviceSelector.device")
        class_name = c.string(selector.get("deviceClassName"), "spec.deviceSelector.deviceClassName")
        if class_name:
            c.dns_subdomain(class_name, "spec.deviceSelector.deviceClassName")
        _selectors(c, selector.get("selectors"), "spec.deviceSelector.selectors")
    _taint(c, spec.get("taint"), "spec.taint")


def _node(c: _Check, raw: Mapping[str, Any]) -> None:
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


def _pod(c: _Check, raw: Mapping[str, Any]) -> None:
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


_VALIDATORS: dict[str, tuple[Callable[[_Check, Mapping[str, Any]], None], bool]] = {
    "DeviceClass": (_device_class, False),
    "ResourceSlice": (_resource_slice, False),
    "ResourceClaim": (_resource_claim, True),
    "ResourceClaimTemplate": (_resource_claim_template, True),
    "DeviceTaintRule": (_device_taint_rule, False),
    "Node": (_node, False),
    "Pod": (_pod, True),
}

# The API server validates selectors with every CEL feature of the release enabled.
_VALIDATION_CEL = CelEnvironment(CelOptions(consumable_capacity=True, list_type_attributes=True))


VALIDATED_KINDS = tuple(sorted(_VALIDATORS))


def is_validated(obj: Mapping[str, Any]) -> bool:
    """Whether ``validate_object`` checks this object's kind (other kinds yield no findings)."""
    return isinstance(obj, Mapping) and obj.get("kind") in _VALIDATORS


def validate_object(obj: Mapping[str, Any]) -> list[Finding]:
    """Every violation in one raw object, in field order (empty when the API server would admit it).

    Objects of kinds outside DRA (see ``VALIDATED_KINDS``) are not checked beyond having a kind and
    an apiVersion; ``is_validated`` tells them apart."""
    if not isinstance(obj, Mapping):
        return [Finding("object", "", f"Invalid value: {_show(obj)}: must be an object, got {_kind(obj)}")]
    c = _Check(object_label(obj), _VALIDATION_CEL)
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        c.required("kind")
        return c.findings
    if not isinstance(obj.get("apiVersion"), str) or not obj.get("apiVersion"):
        c.required("apiVersion")
        return c.findings
    if kind not in _VALIDATORS:
        return c.findings  # outside DRA; callers learn this from is_validated()
    validator, namespaced = _VALIDATORS[kind]
    api_version = obj.get("apiVersion")
    if api_version not in _API_VERSIONS[kind]:
        c.not_supported("apiVersion", api_version, _API_VERSIONS[kind])
        return c.findings
    c.mapping(dict(obj), "", _TOP)
    _metadata(c, obj, namespaced)
    validator(c, obj)
    return c.findings


def validate_objects(objects: list[Mapping[str, Any]]) -> list[Finding]:
    """Findings of several objects, in input order."""
    return [finding for obj in objects for finding in validate_object(obj)]
