"""Kubernetes' IP and CIDR libraries (k8s.io/apiserver/pkg/cel/library/ip.go and cidr.go) for selectors.

Addresses and prefixes are parsed by a port of Go's ``net/netip`` ``ParseAddr`` and
``ParsePrefix``, so that exactly the strings Kubernetes accepts are accepted and a refusal carries
Go's text (``ParseAddr("1.2.3.256"): IPv4 field has value >255``); Python's ``ipaddress`` accepts
and words things differently (it takes ``::ffff:1.2.3.4`` and prefix lengths such as ``/08``), so
it only renders IPv6 addresses, whose compressed form is the RFC 5952 text ``Addr.String()``
gives. On top of netip the libraries refuse zones and IPv4-mapped IPv6 addresses (``parseIPAddr``,
``parseCIDR``). An address travels as its canonical text and a prefix as the canonical text of its
address and its length, so ``==`` compares them as netip's ``==`` does: ``cidr("10.0.0.1/8")`` is
not ``cidr("10.0.0.0/8")``, but its ``masked()`` is.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from audit.dra.cel.gotext import go_quote


class AddressError(ValueError):
    """A string netip or the Kubernetes library refuses, with Kubernetes' text."""


@dataclass(frozen=True)
class Address:
    """An IPv4 (4 bytes) or IPv6 (16 bytes) address without zone."""

    raw: bytes

    @property
    def is4(self) -> bool:
        return len(self.raw) == 4

    @property
    def bits(self) -> int:
        return len(self.raw) * 8

    def __str__(self) -> str:
        if self.is4:
            return ".".join(str(b) for b in self.raw)
        return ipaddress.IPv6Address(self.raw).compressed

    def _u16(self) -> int:
        return int.from_bytes(self.raw[:2], "big")

    # The predicates of netip.Addr (Go's net/netip/netip.go), which ip.go calls.
    def is_unspecified(self) -> bool:
        return not any(self.raw)

    def is_loopback(self) -> bool:
        return self.raw[0] == 127 if self.is4 else self.raw == bytes(15) + b"\x01"

    def is_multicast(self) -> bool:
        return self.raw[0] & 0xF0 == 0xE0 if self.is4 else self.raw[0] == 0xFF

    def is_link_local_multicast(self) -> bool:
        return self.raw[:3] == b"\xe0\x00\x00" if self.is4 else self._u16() & 0xFF0F == 0xFF02

    def is_link_local_unicast(self) -> bool:
        return self.raw[:2] == b"\xa9\xfe" if self.is4 else self._u16() & 0xFFC0 == 0xFE80

    def is_global_unicast(self) -> bool:
        # Private IPv4 and ULA IPv6 addresses count as global unicast, as in package net.
        if self.is4 and self.raw in (bytes(4), b"\xff\xff\xff\xff"):
            return False
        return not (self.is_unspecified() or self.is_loopback() or self.is_multicast()
                    or self.is_link_local_unicast())

    def masked(self, bits: int) -> Address:
        value = int.from_bytes(self.raw, "big")
        keep = ((1 << bits) - 1) << (self.bits - bits) if bits else 0
        return Address((value & keep).to_bytes(len(self.raw), "big"))


def _addr_error(text: str, message: str, at: str = "") -> ValueError:
    where = f" (at {go_quote(at)})" if at else ""
    return ValueError(f"ParseAddr({go_quote(text)}): {message}{where}")


def _ipv4_fields(text: str, start: int, end: int) -> bytes:
    """netip's parseIPv4Fields over text[start:end]; errors name the whole ``text``."""
    s = text[start:end]
    fields: list[int] = []
    value, digits = 0, 0
    for i, c in enumerate(s):
        if "0" <= c <= "9":
            if digits == 1 and value == 0:
                raise _addr_error(text, "IPv4 field has octet with leading zero")
            value = value * 10 + ord(c) - ord("0")
            digits += 1
            if value > 255:
                raise _addr_error(text, "IPv4 field has value >255")
        elif c == ".":
            if i == 0 or i == len(s) - 1 or s[i - 1] == ".":
                raise _addr_error(text, "IPv4 field must have at least one digit", s[i:])
            if len(fields) == 3:
                raise _addr_error(text, "IPv4 address too long")
            fields.append(value)
            value, digits = 0, 0
        else:
            raise _addr_error(text, "unexpected character", s[i:])
    if len(fields) < 3:
        raise _addr_error(text, "IPv4 address too short")
    return bytes([*fields, value])


_HEX = "0123456789abcdef"


def _ipv6(text: str) -> tuple[bytes, str]:
    """netip's parseIPv6: the 16 bytes and the zone."""
    s, zone = text, ""
    if "%" in s:
        s, zone = s.split("%", 1)
        if not zone:
            raise _addr_error(text, "zone must be a non-empty string")
    ip = bytearray(16)
    ellipsis = -1
    if s.startswith("::"):
        ellipsis, s = 0, s[2:]
        if not s:
            return bytes(ip), zone
    i = 0
    while i < 16:
        off, acc = 0, 0
        while off < len(s) and s[off].lower() in _HEX and s[off].isascii():
            acc = (acc << 4) + _HEX.index(s[off].lower())
            if off > 3:
                raise _addr_error(text, "each group must have 4 or less digits", s)
            off += 1
        if off == 0:
            raise _addr_error(text, "each colon-separated field must have at least one digit", s)
        if off < len(s) and s[off] == ".":
            if ellipsis < 0 and i != 12:
                raise _addr_error(text, "embedded IPv4 address must replace the final 2 fields of the address", s)
            if i + 4 > 16:
                raise _addr_error(text, "too many hex fields to fit an embedded IPv4 at the end of the address", s)
            end = len(text) - (len(zone) + 1 if zone else 0)
            ip[i:i + 4] = _ipv4_fields(text, end - len(s), end)
            s = ""
            i += 4
            break
        ip[i], ip[i + 1] = acc >> 8, acc & 0xFF
        i += 2
        s = s[off:]
        if not s:
            break
        if s[0] != ":":
            raise _addr_error(text, "unexpected character, want colon", s)
        if len(s) == 1:
            raise _addr_error(text, "colon must be followed by more characters", s)
        s = s[1:]
        if s[0] == ":":
            if ellipsis >= 0:
                raise _addr_error(text, "multiple :: in address", s)
            ellipsis, s = i, s[1:]
            if not s:
                break
    if s:
        raise _addr_error(text, "trailing garbage after address", s)
    if i < 16:
        if ellipsis < 0:
            raise _addr_error(text, "address string too short")
        n = 16 - i
        ip[ellipsis + n:16] = ip[ellipsis:i]
        ip[ellipsis:ellipsis + n] = bytes(n)
    elif ellipsis >= 0:
        raise _addr_error(text, "the :: must expand to at least one field of zeros", s)
    return bytes(ip), zone


def parse_addr(text: str) -> tuple[Address, str]:
    """netip.ParseAddr: the address and its zone."""
    for c in text:
        if c == ".":
            return Address(_ipv4_fields(text, 0, len(text))), ""
        if c == ":":
            raw, zone = _ipv6(text)
            return Address(raw), zone
        if c == "%":
            raise _addr_error(text, "missing IPv6 address")
    raise _addr_error(text, "unable to parse IP")


def _is_4in6(address: Address) -> bool:
    return not address.is4 and address.raw[:12] == bytes(10) + b"\xff\xff"


def parse_ip(text: str) -> Address:
    """ip.go's parseIPAddr: netip's address without zone, not IPv4-mapped."""
    try:
        address, zone = parse_addr(text)
    except ValueError as exc:
        raise AddressError(f"IP Address {go_quote(text)} parse error during conversion from string: {exc}") from None
    if zone:
        raise AddressError(f"IP address {go_quote(text)} with zone value is not allowed")
    if _is_4in6(address):
        raise AddressError(f"IPv4-mapped IPv6 address {go_quote(text)} is not allowed")
    return address


_NOT_CIDR = "network address parse error during conversion from string: "


@dataclass(frozen=True)
class Prefix:
    """A netip.Prefix as written: its address need not be masked."""

    address: Address
    bits: int

    def __str__(self) -> str:
        return f"{self.address}/{self.bits}"

    def masked(self) -> Prefix:
        return Prefix(self.address.masked(self.bits), self.bits)

    def contains_ip(self, address: Address) -> bool:
        """netip.Prefix.Contains: same family and equal in the prefix's bits."""
        return self.address.is4 == address.is4 and self.address.masked(self.bits) == address.masked(self.bits)

    def contains_cidr(self, other: Prefix) -> bool:
        """cidr.go's cidrContainsCIDR: ``other``'s address within the prefix, its length at least as long."""
        return self.contains_ip(other.address) and self.bits <= other.bits


def parse_cidr(text: str) -> Prefix:
    """cidr.go's parseCIDR, with the message stringToCIDR gives (which prefixes netip's errors twice)."""
    def refused(message: str) -> AddressError:
        return AddressError(f"{_NOT_CIDR}{_NOT_CIDR}netip.ParsePrefix({go_quote(text)}): {message}")

    slash = text.rfind("/")
    if slash < 0:
        raise refused("no '/'")
    try:
        address, zone = parse_addr(text[:slash])
    except ValueError as exc:
        raise refused(str(exc)) from None
    if zone:
        raise refused("IPv6 zones cannot be present in a prefix")
    digits = text[slash + 1:]
    # netip refuses a sign and leading zeros that strconv.Atoi would take.
    if (len(digits) > 1 and not "1" <= digits[0] <= "9") or not digits or not digits.isdigit() or not digits.isascii():
        raise refused(f"bad bits after slash: {go_quote(digits)}")
    bits = int(digits)
    if bits > 2**63 - 1:  # past strconv.Atoi's range
        raise refused(f"bad bits after slash: {go_quote(digits)}")
    if bits > address.bits:
        raise refused("prefix length out of range")
    if _is_4in6(address):
        raise AddressError(f"{_NOT_CIDR}IPv4-mapped IPv6 address {go_quote(text)} is not allowed")
    return Prefix(address, bits)
