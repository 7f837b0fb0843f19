"""Kubernetes' own CEL types as CEL values: one-key maps tagged with a private key.

The ``cel`` binding cannot carry Python objects, so a Quantity travels as
``{"\\x00kubernetes.Quantity": "<nano-units>"}``, a Semver as
``{"\\x00kubernetes.Semver": "<version without build metadata>"}``, an IP address, a CIDR and a
URL as ``net.IP``, ``net.CIDR`` and ``kubernetes.URL`` maps holding their canonical text. The
value is canonical, so CEL's ``==`` on two tagged maps is Kubernetes' ``Equal`` (compare by value;
build metadata ignored; an address by its bytes, a prefix by address and length).
"""

from __future__ import annotations

import datetime
import functools
from typing import Any

from cel import OptionalValue

from audit.dra.cel.network import Address, Prefix, parse_cidr, parse_ip
from audit.dra.cel.urls import URL, parse_url
from audit.dra.quantity import Quantity
from audit.dra.semver import Semver

QUANTITY_TAG = "\x00kubernetes.Quantity"
SEMVER_TAG = "\x00kubernetes.Semver"
IP_TAG = "\x00net.IP"
CIDR_TAG = "\x00net.CIDR"
URL_TAG = "\x00kubernetes.URL"
# The CEL type name of each tag, as cel-go prints it.
TYPE_NAMES = {QUANTITY_TAG: "kubernetes.Quantity", SEMVER_TAG: "kubernetes.Semver", IP_TAG: "net.IP",
              CIDR_TAG: "net.CIDR", URL_TAG: "kubernetes.URL"}


def wrap_quantity(q: Quantity) -> dict[str, str]:
    return {QUANTITY_TAG: str(q.nanos)}


def _semver_key(v: Semver) -> str:
    """Canonical text without build metadata, so ``==`` follows semver precedence."""
    text = str(v)
    return text.split("+", 1)[0]


def wrap_semver(v: Semver) -> dict[str, str]:
    return {SEMVER_TAG: _semver_key(v)}


def wrap_ip(address: Address) -> dict[str, str]:
    return {IP_TAG: str(address)}


def wrap_cidr(prefix: Prefix) -> dict[str, str]:
    return {CIDR_TAG: str(prefix)}


def wrap_url(raw: str) -> dict[str, str]:
    """A URL parsed from ``raw`` (which must parse); kept as written, which is what it equals by."""
    return {URL_TAG: raw}


Tagged = Quantity | Semver | Address | Prefix | URL


def unwrap(value: Any) -> Tagged | None:
    """The object behind a tagged value, or None for any other value."""
    if isinstance(value, dict) and len(value) == 1:
        if QUANTITY_TAG in value:
            return Quantity(int(value[QUANTITY_TAG]))
        if SEMVER_TAG in value:
            return parse_semver(value[SEMVER_TAG])
        if IP_TAG in value:
            return parse_ip(value[IP_TAG])
        if CIDR_TAG in value:
            return parse_cidr(value[CIDR_TAG])
        if URL_TAG in value:
            return parse_url(value[URL_TAG])
    return None


def tag_of(value: Any) -> str | None:
    """The tag of a tagged value, or None."""
    if isinstance(value, dict) and len(value) == 1:
        key = next(iter(value))
        if key in TYPE_NAMES:
            return str(key)
    return None


@functools.lru_cache(maxsize=4096)
def parse_semver(text: str) -> Semver:
    return Semver.parse(text)


def type_name(value: Any) -> str:
    """The CEL type name of a value, as cel-go prints it in errors."""
    tag = tag_of(value)
    if tag is not None:
        return TYPE_NAMES[tag]
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
