"""The finding type and the checker that collects findings, with helpers shaped after apimachinery's
``field`` errors and typed access to raw fields.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from audit.dra.cel import CelEnvironment
from audit.dra.quantity import Quantity
from audit.dra.validate.names import (
    C_IDENTIFIER,
    C_IDENTIFIER_MSG,
    DNS_LABEL,
    DNS_LABEL_MSG,
    DNS_SUBDOMAIN,
    DNS_SUBDOMAIN_MSG,
    LABEL_NAME,
    LABEL_VALUE,
    LABEL_VALUE_MSG,
    NAME_PART_MSG,
)
from audit.dra.validate.rules import DRIVER_NAME_MAX, ID_MAX

# What the items of each limited list are called in "too many <noun> (max N)" findings.
LIST_NOUNS = {
    "firstAvailable": "subrequests",
    "requests": "requests",
    "selectors": "selectors",
    "tolerations": "tolerations",
    "constraints": "constraints",
    "config": "config entries",
    "devices": "devices",
    "taints": "taints",
    "sharedCounters": "counter sets",
    "counters": "counters",
    "consumesCounters": "counter consumptions",
    "validValues": "valid values",
    "bindingConditions": "binding conditions",
    "bindingFailureConditions": "binding failure conditions",
    "results": "results",
    "reservedFor": "consumers",
}


@dataclass(frozen=True)
class Finding:
    """One violation: the object, the field path and an API-server style message."""

    obj: str  # e.g. "ResourceClaim default/train-0"
    path: str  # e.g. "spec.devices.requests[0].firstAvailable[9]"
    message: str  # e.g. "too many subrequests (max 8)"

    def __str__(self) -> str:
        return f"{self.obj}: {self.path}: {self.message}"


def show(value: Any) -> str:
    """A value inside a message, as apimachinery prints it (strings quoted, numbers bare)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return "<" + kind_of(value) + ">"


def kind_of(value: Any) -> str:
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


class Check:
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
        self.add(path, f"Invalid value: {show(value)}: {detail}")

    def forbidden(self, path: str, detail: str) -> None:
        self.add(path, f"Forbidden: {detail}")

    def duplicate(self, path: str, value: Any) -> None:
        self.add(path, f"Duplicate value: {show(value)}")

    def not_supported(self, path: str, value: Any, supported: tuple[str, ...]) -> None:
        self.add(path, f"Unsupported value: {show(value)}: supported values: "
                       + ", ".join(json.dumps(s) for s in supported))

    def too_many(self, path: str, actual: int, limit: int, *, is_list: bool = True) -> None:
        """Name the last item of an over-long list, so the user sees how far over the limit it is."""
        field = path.rsplit(".", 1)[-1]
        noun = LIST_NOUNS.get(field, "items")
        where = f"{path}[{actual - 1}]" if is_list else path
        self.add(where, f"too many {noun} (max {limit})")

    def too_long(self, path: str, limit: int) -> None:
        self.add(path, f"Too long: may not be more than {limit} bytes")

    # --- typed access: a wrong type is reported once and the subtree skipped ------------------
    def mapping(self, value: Any, path: str, fields: frozenset[str] | None = None) -> dict[str, Any] | None:
        """The object at ``path``; with ``fields``, keys outside them are reported as strict
        decoding does (``kubectl apply`` refuses unknown fields by default)."""
        if value is None:
            return None
        if not isinstance(value, dict):
            self.invalid(path, value, f"must be an object, got {kind_of(value)}")
            return None
        if fields is not None:
            for key in value:
                if key not in fields:
                    self.add(f"{path}.{key}" if path else str(key), f"unknown field {show(str(key))}")
        return value

    def listing(self, value: Any, path: str) -> list[Any] | None:
        if value is None:
            return None
        if not isinstance(value, list):
            self.invalid(path, value, f"must be a list, got {kind_of(value)}")
            return None
        return value

    def string(self, value: Any, path: str) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            self.invalid(path, value, f"must be a string, got {kind_of(value)}")
            return None
        return value

    def boolean(self, value: Any, path: str) -> bool | None:
        if value is None:
            return None
        if not isinstance(value, bool):
            self.invalid(path, value, f"must be a boolean, got {kind_of(value)}")
            return None
        return value

    def integer(self, value: Any, path: str) -> int | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            self.invalid(path, value, f"must be an integer, got {kind_of(value)}")
            return None
        return value

    def items(self, value: Any, path: str, limit: int | None) -> list[tuple[str, Any]]:
        """``(item path, item)`` of a list field, reporting ``too many`` above ``limit``."""
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
        if not DNS_LABEL.fullmatch(value):
            self.invalid(path, value, DNS_LABEL_MSG)
            ok = False
        return ok

    def dns_subdomain(self, value: str, path: str, limit: int = 253) -> bool:
        ok = True
        if len(value) > limit:
            self.invalid(path, value, f"must be no more than {limit} characters")
            ok = False
        if not DNS_SUBDOMAIN.fullmatch(value):
            self.invalid(path, value, DNS_SUBDOMAIN_MSG)
            ok = False
        return ok

    def c_identifier(self, value: str, path: str) -> None:
        if len(value) > ID_MAX:
            self.too_long(path, ID_MAX)
        if not C_IDENTIFIER.fullmatch(value):
            self.invalid(path, value, C_IDENTIFIER_MSG)

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
        if not LABEL_VALUE.fullmatch(value):
            self.invalid(path, value, LABEL_VALUE_MSG)

    def label_key(self, key: str, path: str) -> None:
        """``IsQualifiedName`` for label and taint keys: ``[prefix/]name``."""
        prefix, sep, name = key.rpartition("/")
        if sep and not prefix:
            self.invalid(path, key, "prefix part must be non-empty")
        elif prefix and not DNS_SUBDOMAIN.fullmatch(prefix):
            self.invalid(path, key, "prefix part " + DNS_SUBDOMAIN_MSG)
        if not name:
            self.invalid(path, key, "name part must be non-empty")
            return
        if len(name) > 63:
            self.invalid(path, key, "name part must be no more than 63 characters")
        if not LABEL_NAME.fullmatch(name):
            self.invalid(path, key, NAME_PART_MSG)

    def quantity(self, value: Any, path: str) -> Quantity | None:
        if value is None:
            self.required(path)
            return None
        try:
            return Quantity.parse(value)
        except ValueError as exc:
            self.invalid(path, value, str(exc))
            return None
