"""Quantities and semvers as CEL values: one-key maps tagged with a private key.

The ``cel`` binding cannot carry Python objects, so a Quantity travels as
``{"\\x00kubernetes.Quantity": "<nano-units>"}`` and a Semver as
``{"\\x00kubernetes.Semver": "<version without build metadata>"}``. The value is canonical, so CEL's
``==`` on two tagged maps is Kubernetes' ``Equal`` (compare by value; build metadata ignored).
"""

from __future__ import annotations

import datetime
import functools
from typing import Any

from cel import OptionalValue

from audit.dra.quantity import Quantity
from audit.dra.semver import Semver

QUANTITY_TAG = "\x00kubernetes.Quantity"
SEMVER_TAG = "\x00kubernetes.Semver"


def wrap_quantity(q: Quantity) -> dict[str, str]:
    return {QUANTITY_TAG: str(q.nanos)}


def _semver_key(v: Semver) -> str:
    """Canonical text without build metadata, so ``==`` follows semver precedence."""
    text = str(v)
    return text.split("+", 1)[0]


def wrap_semver(v: Semver) -> dict[str, str]:
    return {SEMVER_TAG: _semver_key(v)}


def unwrap(value: Any) -> Quantity | Semver | None:
    """The Quantity or Semver behind a tagged value, or None for any other value."""
    if isinstance(value, dict) and len(value) == 1:
        if QUANTITY_TAG in value:
            return Quantity(int(value[QUANTITY_TAG]))
        if SEMVER_TAG in value:
            return parse_semver(value[SEMVER_TAG])
    return None


@functools.lru_cache(maxsize=4096)
def parse_semver(text: str) -> Semver:
    return Semver.parse(text)


def type_name(value: Any) -> str:
    """The CEL type name of a value, as cel-go prints it in errors."""
    inner = unwrap(value)
    if isinstance(inner, Quantity):
        return "kubernetes.Quantity"
    if isinstance(inner, Semver):
        return "kubernetes.Semver"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes):
        return "bytes"
    if value is None:
        return "null_type"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, OptionalValue):
        return "optional_type"
    if isinstance(value, datetime.timedelta):
        return "google.protobuf.Duration"
    if isinstance(value, datetime.datetime):
        return "google.protobuf.Timestamp"
    return type(value).__name__
