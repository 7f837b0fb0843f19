"""The ``device`` variable: one device's driver, attributes and capacity as selectors see them."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import cel

from audit.dra.cel.contract import CelOptions
from audit.dra.cel.footprint import Path
from audit.dra.cel.library import functions_for
from audit.dra.cel.values import parse_semver, wrap_quantity, wrap_semver
from audit.dra.quantity import Quantity
from audit.dra.semver import Semver


def _attribute_value(attr: Mapping[str, Any], options: CelOptions) -> Any:
    """``getAttributeValue``: the CEL value of one API-shaped attribute (checked in API order)."""
    if type(attr) is dict and len(attr) == 1:
        # The shape every admitted attribute has: exactly one typed value.
        for kind, value in attr.items():
            if kind == "string" and type(value) is str or kind == "int" and type(value) is int \
                    or kind == "bool" and type(value) is bool:
                return value
            if kind == "version" and type(value) is str:
                return _version_value(value)
    if not isinstance(attr, Mapping):
        raise ValueError("unsupported attribute value")
    if isinstance(attr.get("int"), int) and not isinstance(attr.get("int"), bool):
        return attr["int"]
    if isinstance(attr.get("bool"), bool):
        return attr["bool"]
    if isinstance(attr.get("string"), str):
        return attr["string"]
    if isinstance(attr.get("version"), str):
        return _version_value(attr["version"])
    if options.list_type_attributes:
        ints, bools, strings, versions = (attr.get(k) for k in ("ints", "bools", "strings", "versions"))
        if isinstance(ints, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in ints):
            return list(ints)
        if isinstance(bools, list) and all(isinstance(v, bool) for v in bools):
            return list(bools)
        if isinstance(strings, list) and all(isinstance(v, str) for v in strings):
            return list(strings)
        if isinstance(versions, list) and all(isinstance(v, str) for v in versions):
            return [_version_value(v) for v in versions]
    raise ValueError("unsupported attribute value")


@functools.lru_cache(maxsize=4096)
def _version_value(text: str) -> dict[str, str]:
    # Drivers publish the same few versions on every device; the tagged value is never mutated.
    return wrap_semver(_parse_version_attribute(text))


def _parse_version_attribute(text: str) -> Semver:
    try:
        return parse_semver(text)
    except ValueError as exc:
        raise ValueError(f"parse semantic version: {exc}") from None


@functools.lru_cache(maxsize=4096)
def _quantity_text_value(text: str) -> dict[str, str]:
    return wrap_quantity(Quantity.parse(text))


def _capacity_value(raw: Any) -> dict[str, str]:
    if type(raw) is str:
        return _quantity_text_value(raw)
    return wrap_quantity(Quantity.parse(raw))


# What a footprint key holds for a path the device has no value at.
_ABSENT = ("\x00absent",)


def _hashable(value: Any) -> Any:
    """A key equal for two CEL values exactly when they are the same value of the same type."""
    kind = type(value)
    if kind is str:
        return value
    if kind is dict:  # a tagged quantity or semver
        return tuple(value.items())
    if kind is list:
        return ("list", tuple(_hashable(v) for v in value))
    return (kind.__name__, value)  # keeps True apart from 1


class CelDevice:
    """One device as selectors see it; build once per device and reuse for every expression.

    Conversion is lazy: the whole ``device`` value (and its ``cel`` context) is only built for
    selectors without a footprint; for the others only the values they read are converted. The
    attribute and capacity maps are kept by reference and must not change afterwards.
    """

    __slots__ = ("driver", "_attributes", "_capacity", "_allow_multiple", "_options", "_checked", "_error",
                 "_base", "_context", "__weakref__")

    def __init__(self, driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, Any],
                 allow_multiple_allocations: bool, options: CelOptions) -> None:
        self.driver = driver
        self._attributes = attributes
        self._capacity = capacity
        self._allow_multiple = bool(allow_multiple_allocations)
        self._options = options
        self._checked = False
        self._error: str | None = None
        self._base: dict[str, Any] | None = None
        self._context: cel.Context | None = None

    @property
    def error(self) -> str | None:
        """Why every evaluation on this device fails (an unconvertible attribute), if it does."""
        if not self._checked:
            self._error = self._first_error() if self._has_error() else None
            self._checked = True
        return self._error

    @property
    def context(self) -> cel.Context:
        """The evaluation context of the whole device, built on first use (the ``cel`` binding
        converts every value, ~70 µs for a typical GPU)."""
        if self._context is None:
            self._context = cel.Context(variables={"device": self._whole()}, functions=functions_for())
        return self._context

    def values_at(self, paths: tuple[Path, ...]) -> tuple[Any, ...]:
        """What the device holds at each path, as a hashable key (see ``footprint``). Only for a
        device without ``error``."""
        out: list[Any] = []
        for path in paths:
            value = self._value_at(path)
            out.append(_ABSENT if value is _ABSENT else _hashable(value))
        return tuple(out)

    def narrowed_context(self, paths: tuple[Path, ...]) -> cel.Context:
        """A context whose ``device`` holds only the values at ``paths``. A selector with that
        footprint evaluates on it exactly as on the whole device: it reads nothing else, and it
        cannot tell a missing domain from a domain without the id, both being maps without it."""
        narrow: dict[str, Any] = {"driver": self.driver, "attributes": {}, "capacity": {}}
        if self._options.consumable_capacity:
            narrow["allowMultipleAllocations"] = self._allow_multiple
        for path in paths:
            if len(path) == 3:
                value = self._value_at(path)
                if value is not _ABSENT:
                    narrow[path[0]].setdefault(path[1], {})[path[2]] = value
        return cel.Context(variables={"device": narrow}, functions=functions_for())

    def _value_at(self, path: Path) -> Any:
        if len(path) == 1:
            if path[0] == "driver":
                return self.driver
            return self._allow_multiple if self._options.consumable_capacity else _ABSENT
        field, domain, ident = path
        raw_map = self._attributes if field == "attributes" else self._capacity
        # parseQualifiedName: an unqualified name is in the driver's domain; of two names for one
        # id the one sorted last wins, as in the whole conversion.
        name = f"{domain}/{ident}"
        if domain == self.driver and "/" not in ident and ident in raw_map and (name not in raw_map or ident > name):
            name = ident
        if name not in raw_map:
            return _ABSENT
        if field == "attributes":
            return _attribute_value(raw_map[name], self._options)
        return _capacity_value(_capacity_raw(raw_map[name]))

    def _has_error(self) -> bool:
        try:
            for attr in self._attributes.values():
                if type(attr) is dict and len(attr) == 1 and type(attr.get("string")) is str:
                    continue  # most attributes: nothing to convert
                _attribute_value(attr, self._options)
            for entry in self._capacity.values():
                _capacity_value(_capacity_raw(entry))
        except ValueError:
            return True
        return False

    def _first_error(self) -> str | None:
        try:
            self._whole()
        except _Unconvertible as exc:
            return exc.message
        return None

    def _whole(self) -> dict[str, Any]:
        """The whole ``device`` value; raises _Unconvertible naming the first value that fails."""
        if self._base is None:
            self._base = _convert(self.driver, self._attributes, self._capacity, self._allow_multiple, self._options)
        return self._base


class _Unconvertible(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _capacity_raw(entry: Any) -> Any:
    return entry.get("value") if isinstance(entry, Mapping) else entry


def _convert(driver: str, attributes: Mapping[str, Any], capacity: Mapping[str, Any],
             allow_multiple_allocations: bool, options: CelOptions) -> dict[str, Any]:
    """The ``device`` value: sorted, so that of two names for one id (``x`` and ``<driver>/x``)
    the same one wins every time and the first unconvertible value is the one named."""
    attrs: dict[str, dict[str, Any]] = {}
    caps: dict[str, dict[str, Any]] = {}
    error: str | None = None
    for name in sorted(attributes):
        # parseQualifiedName: unqualified names belong to the driver's domain.
        domain, sep, ident = name.partition("/")
        if not sep:
            domain, ident = driver, name
        try:
            attrs.setdefault(domain, {})[ident] = _attribute_value(attributes[name], options)
        except ValueError as exc:
            error = error or f"attribute {name}: {exc}"
    for name in sorted(capacity):
        domain, sep, ident = name.partition("/")
        if not sep:
            domain, ident = driver, name
        try:
            caps.setdefault(domain, {})[ident] = _capacity_value(_capacity_raw(capacity[name]))
        except ValueError as exc:
            error = error or f"capacity {name}: {exc}"
    if error is not None:
        raise _Unconvertible(error)
    base: dict[str, Any] = {"driver": driver, "attributes": attrs, "capacity": caps}
    if options.consumable_capacity:
        base["allowMultipleAllocations"] = bool(allow_multiple_allocations)
    return base


def device_context(
    driver: str,
    attributes: Mapping[str, Mapping[str, Any]],
    capacity: Mapping[str, Mapping[str, Any]],
    allow_multiple_allocations: bool,
    options: CelOptions = CelOptions(),
) -> CelDevice:
    """The ``device`` variable of one device with API-shaped attributes and capacity."""
    return CelDevice(driver, attributes, capacity, allow_multiple_allocations, options)
