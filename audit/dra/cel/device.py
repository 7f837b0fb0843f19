"""The ``device`` variable: one device's driver, attributes and capacity as selectors see them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import cel

from audit.dra.cel.contract import CelOptions
from audit.dra.cel.library import functions_for
from audit.dra.cel.values import parse_semver, wrap_quantity, wrap_semver
from audit.dra.quantity import Quantity
from audit.dra.semver import Semver


def _split_qualified(name: str, driver: str) -> tuple[str, str]:
    """``parseQualifiedName``: unqualified names belong to the driver's domain."""
    domain, sep, ident = name.partition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(attr: Mapping[str, Any], options: CelOptions) -> Any:
    """``getAttributeValue``: the CEL value of one API-shaped attribute (checked in API order)."""
    if not isinstance(attr, Mapping):
        raise ValueError("unsupported attribute value")
    if isinstance(attr.get("int"), int) and not isinstance(attr.get("int"), bool):
        return attr["int"]
    if isinstance(attr.get("bool"), bool):
        return attr["bool"]
    if isinstance(attr.get("string"), str):
        return attr["string"]
    if isinstance(attr.get("version"), str):
        return wrap_semver(_parse_version_attribute(attr["version"]))
    if options.list_type_attributes:
        ints, bools, strings, versions = (attr.get(k) for k in ("ints", "bools", "strings", "versions"))
        if isinstance(ints, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in ints):
            return list(ints)
        if isinstance(bools, list) and all(isinstance(v, bool) for v in bools):
            return list(bools)
        if isinstance(strings, list) and all(isinstance(v, str) for v in strings):
            return list(strings)
        if isinstance(versions, list) and all(isinstance(v, str) for v in versions):
            return [wrap_semver(_parse_version_attribute(v)) for v in versions]
    raise ValueError("unsupported attribute value")


def _parse_version_attribute(text: str) -> Semver:
    try:
        return parse_semver(text)
    except ValueError as exc:
        raise ValueError(f"parse semantic version: {exc}") from None


class CelDevice:
    """One device as selectors see it; build once per device and reuse for every expression."""

    __slots__ = ("driver", "_base", "_error", "_functions", "_context", "__weakref__")

    def __init__(self, driver: str, base: dict[str, Any], error: str | None,
                 functions: dict[str, Callable[..., Any]]) -> None:
        self.driver = driver
        self._base = base
        self._error = error
        self._functions = functions
        self._context: cel.Context | None = None

    @property
    def error(self) -> str | None:
        """Why every evaluation on this device fails (an unconvertible attribute), if it does."""
        return self._error

    @property
    def context(self) -> cel.Context:
        """The evaluation context, built on first use (converting the device costs ~20 µs)."""
        if self._context is None:
            self._context = cel.Context(variables={"device": self._base}, functions=self._functions)
        return self._context


def device_context(
    driver: str,
    attributes: Mapping[str, Mapping[str, Any]],
    capacity: Mapping[str, Mapping[str, Any]],
    allow_multiple_allocations: bool,
    options: CelOptions = CelOptions(),
) -> CelDevice:
    """Build the ``device`` variable from API-shaped attributes and capacity of one device."""
    attrs: dict[str, dict[str, Any]] = {}
    caps: dict[str, dict[str, Any]] = {}
    error: str | None = None
    for name in sorted(attributes):
        domain, ident = _split_qualified(name, driver)
        try:
            value = _attribute_value(attributes[name], options)
        except ValueError as exc:
            error = error or f"attribute {name}: {exc}"
            continue
        attrs.setdefault(domain, {})[ident] = value
    for name in sorted(capacity):
        domain, ident = _split_qualified(name, driver)
        entry = capacity[name]
        raw = entry.get("value") if isinstance(entry, Mapping) else entry
        try:
            caps.setdefault(domain, {})[ident] = wrap_quantity(Quantity.parse(raw))
        except ValueError as exc:
            error = error or f"capacity {name}: {exc}"
    base: dict[str, Any] = {"driver": driver, "attributes": attrs, "capacity": caps}
    if options.consumable_capacity:
        base["allowMultipleAllocations"] = bool(allow_multiple_allocations)
    return CelDevice(driver, base, error, functions_for(options.list_type_attributes))
