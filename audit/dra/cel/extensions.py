"""The IP, CIDR, URL, regex and format functions of the selector environment.

Kubernetes' base CEL environment (k8s.io/apiserver/pkg/cel/environment/base.go) has the URL and
regex libraries from the start and the IP and CIDR libraries since 1.30, so DRA selectors may call
them, and cel-go's string extension has ``format``. These are the CEL-facing functions over
``network``, ``urls``, ``regex`` and ``formatting``: each refuses
arguments of the wrong type with cel-go's ``no such overload`` and fails with the upstream text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from audit.dra.cel import regex
from audit.dra.cel.failures import fail, no_overload
from audit.dra.cel.formatting import FormatError, format_string
from audit.dra.cel.network import Address, AddressError, Prefix, parse_cidr, parse_ip
from audit.dra.cel.urls import URL, is_url, parse_url
from audit.dra.cel.values import CIDR_TAG, IP_TAG, URL_TAG, tag_of, unwrap, wrap_cidr, wrap_ip, wrap_url


def _string(name: str, value: Any) -> str:
    if not isinstance(value, str):
        no_overload(name, value)
    return value


_T = TypeVar("_T")


def _unwrapped(name: str, value: Any, tag: str, kind: type[_T], *others: Any) -> _T:
    """The ``kind`` inside a value of type ``tag``; any other value finds no overload of ``name``."""
    if tag_of(value) != tag:
        no_overload(name, value, *others)
    inner = unwrap(value)
    assert isinstance(inner, kind)
    return inner


def _address(name: str, value: Any) -> Address:
    return _unwrapped(name, value, IP_TAG, Address)


def _prefix(name: str, value: Any, *others: Any) -> Prefix:
    return _unwrapped(name, value, CIDR_TAG, Prefix, *others)


def _url(name: str, value: Any) -> URL:
    return _unwrapped(name, value, URL_TAG, URL)


def _parsed_ip(text: str) -> Address:
    try:
        return parse_ip(text)
    except AddressError as exc:
        fail(str(exc))


def _parsed_cidr(text: str) -> Prefix:
    try:
        return parse_cidr(text)
    except AddressError as exc:
        fail(str(exc))


# ip.go


def _ip(value: Any) -> dict[str, str]:
    """``ip(string)``, and cidr.go's ``<CIDR>.ip()``: the prefix's address as written."""
    if tag_of(value) == CIDR_TAG:
        return wrap_ip(_prefix("ip", value).address)
    return wrap_ip(_parsed_ip(_string("ip", value)))


def _is_ip(value: Any) -> bool:
    try:
        parse_ip(_string("isIP", value))
    except AddressError:
        return False
    return True


def _is_canonical(value: Any) -> bool:
    text = _string("ip.isCanonical", value)
    return str(_parsed_ip(text)) == text


def _family(value: Any) -> int:
    return 4 if _address("family", value).is4 else 6


def _predicate(name: str, test: Callable[[Address], bool]) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        return test(_address(name, value))

    return check


# cidr.go


def _cidr(value: Any) -> dict[str, str]:
    return wrap_cidr(_parsed_cidr(_string("cidr", value)))


def _is_cidr(value: Any) -> bool:
    try:
        parse_cidr(_string("isCIDR", value))
    except AddressError:
        return False
    return True


def _contains_ip(receiver: Any, other: Any) -> bool:
    prefix = _prefix("containsIP", receiver, other)
    if isinstance(other, str):
        try:
            address = parse_ip(other)
        except AddressError:
            # cidrContainsIPString hands the parse error to cidrContainsIP as its argument, and
            # the type check there answers with a bare no-such-overload error.
            fail("no such overload")
        return prefix.contains_ip(address)
    return prefix.contains_ip(_address("containsIP", other))


def _contains_cidr(receiver: Any, other: Any) -> bool:
    prefix = _prefix("containsCIDR", receiver, other)
    if isinstance(other, str):
        return prefix.contains_cidr(_parsed_cidr(other))
    if tag_of(other) != CIDR_TAG:
        no_overload("containsCIDR", receiver, other)
    return prefix.contains_cidr(_prefix("containsCIDR", other))


def _masked(value: Any) -> dict[str, str]:
    return wrap_cidr(_prefix("masked", value).masked())


def _prefix_length(value: Any) -> int:
    return _prefix("prefixLength", value).bits


def _to_string(value: Any) -> str:
    """``string(<IP>)`` and ``string(<CIDR>)``; the binding converts every other type itself and
    calls this only for values it has no conversion for."""
    if tag_of(value) == IP_TAG:
        return str(_address("string", value))
    if tag_of(value) == CIDR_TAG:
        return str(_prefix("string", value))
    no_overload("string", value)


# urls.go


def _url_of(value: Any) -> dict[str, str]:
    text = _string("url", value)
    try:
        parse_url(text)
    except ValueError as exc:
        fail(str(exc))
    return wrap_url(text)


def _is_url(value: Any) -> bool:
    return is_url(_string("isURL", value))


def _getter(name: str, read: Callable[[URL], Any]) -> Callable[[Any], Any]:
    def get(value: Any) -> Any:
        return read(_url(name, value))

    return get


# regex.go (find, findAll) and cel-go's matches


def _compiled(pattern: str, invalid: str) -> None:
    """Compile ``pattern`` before use, failing with ``invalid`` + Go's error text."""
    try:
        regex.compile_go(pattern)
    except regex.RegexError as exc:
        fail(f"{invalid}{exc}")
    except regex.UnsupportedRegex as exc:
        fail(str(exc))


def _find(text: Any, pattern: Any) -> str:
    _compiled(_string("find", pattern), "Illegal regex: ")
    return regex.find(_string("find", text), pattern)


def _find_all(text: Any, pattern: Any, limit: Any = -1) -> list[str]:
    if not isinstance(limit, int) or isinstance(limit, bool):
        no_overload("findAll", text, pattern, limit)
    _compiled(_string("findAll", pattern), "Illegal regex: ")
    return regex.find_all(_string("findAll", text), pattern, limit)


def _matches(text: Any, pattern: Any) -> bool:
    if not isinstance(text, str) or not isinstance(pattern, str):
        no_overload("matches", text, pattern)
    _compiled(pattern, "")
    return regex.matches(text, pattern)


def _format(text: Any, args: Any) -> str:
    if not isinstance(text, str) or not isinstance(args, list):
        no_overload("format", text, args)
    try:
        return format_string(text, args)
    except FormatError as exc:
        fail(str(exc))


FUNCTIONS: dict[str, Callable[..., Any]] = {
    "format": _format,
    "ip": _ip,
    "isIP": _is_ip,
    "ip.isCanonical": _is_canonical,
    "family": _family,
    "isUnspecified": _predicate("isUnspecified", Address.is_unspecified),
    "isLoopback": _predicate("isLoopback", Address.is_loopback),
    "isLinkLocalMulticast": _predicate("isLinkLocalMulticast", Address.is_link_local_multicast),
    "isLinkLocalUnicast": _predicate("isLinkLocalUnicast", Address.is_link_local_unicast),
    "isGlobalUnicast": _predicate("isGlobalUnicast", Address.is_global_unicast),
    "cidr": _cidr,
    "isCIDR": _is_cidr,
    "containsIP": _contains_ip,
    "containsCIDR": _contains_cidr,
    "masked": _masked,
    "string": _to_string,
    "prefixLength": _prefix_length,
    "url": _url_of,
    "isURL": _is_url,
    "getScheme": _getter("getScheme", lambda u: u.scheme),
    "getHost": _getter("getHost", lambda u: u.host),
    "getHostname": _getter("getHostname", URL.hostname),
    "getPort": _getter("getPort", URL.port),
    "getEscapedPath": _getter("getEscapedPath", URL.escaped_path),
    "getQuery": _getter("getQuery", URL.query),
    "find": _find,
    "findAll": _find_all,
    # The global form; the method form is rewritten to ``_ct_matches`` (the binding's own
    # ``matches`` reads patterns with Rust's regex crate, whose classes are Unicode-aware).
    "matches": _matches,
}
HELPERS: dict[str, Callable[..., Any]] = {"_ct_matches": _matches}
