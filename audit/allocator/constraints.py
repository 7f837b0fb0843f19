"""Claim constraints ``matchAttribute`` and ``distinctAttribute`` (upstream incubating constraint.go).

A constraint sees every device the search tentatively adds (``add``) and removes (``remove``)
for one claim. Applicability: an empty ``requests`` list means every request; otherwise a
device counts when its base request name or ``<request>/<subrequest>`` is listed. Attribute
lookup tries the fully qualified name, then the bare name when the domain is the device's
driver. Versions compare as exact strings, as upstream does.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from audit.dra.model import AttributeValue, Device


def lookup_attribute(device: Device, driver: str, name: str) -> AttributeValue | None:
    found = device.attributes.get(name)
    if found is not None:
        return found
    domain, sep, ident = name.partition("/")
    if not sep or domain != driver:
        return None
    return device.attributes.get(ident)


def _as_set(value: AttributeValue) -> frozenset[tuple[str, object]]:
    base = value.kind.rstrip("s") if value.kind != "bools" else "bool"
    items = value.value if value.is_list else (value.value,)
    return frozenset((base, v) for v in items)


class ClaimConstraint(ABC):
    def __init__(self, requests: tuple[str, ...], attribute: str, list_types: bool) -> None:
        self.requests = frozenset(requests)
        self.attribute = attribute
        self.list_types = list_types

    def applies(self, base: str, sub: str) -> bool:
        if not self.requests:
            return True
        return base in self.requests or (bool(sub) and f"{base}/{sub}" in self.requests)

    @abstractmethod
    def add(self, base: str, sub: str, device: Device, driver: str, device_id: str) -> bool: ...

    @abstractmethod
    def remove(self, base: str, sub: str, device: Device, driver: str, device_id: str) -> None: ...


class MatchAttribute(ClaimConstraint):
    """All covered devices share one value; only a count is kept, so the reference re-seeds at 0."""

    def __init__(self, requests: tuple[str, ...], attribute: str, list_types: bool) -> None:
        super().__init__(requests, attribute, list_types)
        self.reference: AttributeValue | None = None
        self.common: frozenset[tuple[str, object]] = frozenset()
        self.count = 0

    def add(self, base: str, sub: str, device: Device, driver: str, device_id: str) -> bool:
        if not self.applies(base, sub):
            return True
        value = lookup_attribute(device, driver, self.attribute)
        if value is None:
            return False
        if value.is_list and not self.list_types:
            return False  # list values are an unknown type without DRAListTypeAttributes
        if self.count == 0:
            self.reference = value
            self.common = _as_set(value)
            self.count = 1
            return True
        assert self.reference is not None
        if self.list_types and (value.is_list or self.reference.is_list):
            # Running intersection; upstream does not restore it on backtrack (#140326).
            common = self.common & _as_set(value)
            if not common:
                return False
            self.common = common
        elif value.kind != self.reference.kind or value.value != self.reference.value:
            return False
        self.count += 1
        return True

    def remove(self, base: str, sub: str, device: Device, driver: str, device_id: str) -> None:
        if not self.applies(base, sub):
            return
        self.count -= 1


class DistinctAttribute(ClaimConstraint):
    """No two covered devices share a value.

    With ``by_base_request`` (the 1.36 quirk) values are stored per base request name, so a
    second device of one request overwrites the first one's entry and ``remove`` forgets the
    whole request; otherwise values are stored per device.
    """

    def __init__(self, requests: tuple[str, ...], attribute: str, list_types: bool, by_base_request: bool) -> None:
        super().__init__(requests, attribute, list_types)
        self.by_base_request = by_base_request
        self.values: dict[str, AttributeValue] = {}
        self.count = 0

    def add(self, base: str, sub: str, device: Device, driver: str, device_id: str) -> bool:
        if not self.applies(base, sub):
            return True
        value = lookup_attribute(device, driver, self.attribute)
        if value is None:
            return False
        if value.is_list and not self.list_types:
            return False
        key = base if self.by_base_request else device_id
        if self.count > 0:
            for other in self.values.values():
                if self.list_types and (value.is_list or other.is_list):
                    if _as_set(value) & _as_set(other):
                        return False
                elif other.kind == value.kind and other.value == value.value:
                    return False
        self.values[key] = value
        self.count += 1
        return True

    def remove(self, base: str, sub: str, device: Device, driver: str, device_id: str) -> None:
        if not self.applies(base, sub):
            return
        self.values.pop(base if self.by_base_request else device_id, None)
        self.count -= 1
