"""Kubernetes' URL library (k8s.io/apiserver/pkg/cel/library/urls.go) for selectors.

``url()`` accepts what Go's ``url.ParseRequestURI`` and ``url.Parse`` both accept, and the getters
answer from what ``url.Parse`` makes of it. ``urllib.parse`` splits URLs by a different grammar
(it validates neither escapes nor ports, keeps a fragment ``ParseRequestURI`` would read into the
path, and does not lower-case the scheme), so this is a port of the parts of Go's ``net/url``
those functions use, with Go's error texts (``parse "x": invalid URI for request``); only
percent-decoding of queries uses ``urllib.parse.unquote_to_bytes`` once Go's checks passed.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

from audit.dra.cel.gotext import go_quote
from audit.dra.cel.network import parse_addr

_HEX = "0123456789abcdefABCDEF"
_ALNUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
# net/url's encoding modes.
_PATH, _USER, _QUERY, _FRAGMENT, _HOST, _ZONE = "path", "user", "query", "fragment", "host", "zone"


def _should_escape(c: int, mode: str) -> bool:
    """net/url's shouldEscape for one byte."""
    ch = chr(c)
    if ch in _ALNUM:
        return False
    if mode in (_HOST, _ZONE) and ch in "!$&'()*+,;=:[]<>\"":
        return False
    if ch in "-_.~":
        return False
    if ch in "$&+,/:;=?@":
        return {_PATH: ch == "?", _USER: ch in "@/?:", _QUERY: True, _FRAGMENT: False}.get(mode, True)
    return not (mode == _FRAGMENT and ch in "!()*")


class _GoError(ValueError):
    pass


def _unescape(s: str, mode: str) -> str:
    """net/url's unescape: the checks of every escape and host character, then the decoded text."""
    data = s.encode()
    i = 0
    while i < len(data):
        c = data[i]
        if c == 0x25:  # %
            if i + 2 >= len(data) or chr(data[i + 1]) not in _HEX or chr(data[i + 2]) not in _HEX:
                bad = data[i:i + 3].decode(errors="replace")
                raise _GoError(f"invalid URL escape {go_quote(bad)}")
            escaped = data[i:i + 3].decode()
            value = int(escaped[1:], 16)
            # In a host, escapes are only for non-ASCII bytes (RFC 3986) and %25 (RFC 6874).
            if mode == _HOST and value < 0x80 and escaped != "%25":
                raise _GoError(f"invalid URL escape {go_quote(escaped)}")
            if mode == _ZONE and escaped != "%25" and value != 0x20 and _should_escape(value, _HOST):
                raise _GoError(f"invalid URL escape {go_quote(escaped)}")
            i += 3
        else:
            if mode in (_HOST, _ZONE) and c < 0x80 and _should_escape(c, mode):
                raise _GoError(f"invalid character {go_quote(chr(c))} in host name")
            i += 1
    if mode == _QUERY:
        data = data.replace(b"+", b" ")
    return unquote_to_bytes(data).decode(errors="replace")


def _escape(s: str, mode: str) -> str:
    return "".join(f"%{b:02X}" if _should_escape(b, mode) else chr(b) for b in s.encode())


def _valid_encoded(s: str) -> bool:
    """net/url's validEncoded for a path."""
    return all(chr(b) in "!$&'()*+,;=:@[]%" or not _should_escape(b, _PATH) for b in s.encode())


def _valid_optional_port(port: str) -> bool:
    return port == "" or (port[0] == ":" and all("0" <= c <= "9" for c in port[1:]))


def _parse_host(host: str) -> str:
    if host.startswith("["):
        close = host.rfind("]")
        if close < 0:
            raise _GoError("missing ']' in host")
        colon_port = host[close + 1:]
        if not _valid_optional_port(colon_port):
            raise _GoError(f"invalid port {go_quote(colon_port)} after host")
        zone = host.find("%25", 0, close)
        if zone >= 0:
            return _unescape(host[:zone], _HOST) + _unescape(host[zone:close], _ZONE) + _unescape(host[close:], _HOST)
        # Only an IPv6 address may be enclosed in brackets (RFC 3986; Go's parseHost checks it).
        literal = _unescape(host[1:close], _HOST)
        try:
            address, _ = parse_addr(literal)
        except ValueError as exc:
            raise _GoError(f"invalid host: {exc}") from None
        if address.is4:
            raise _GoError("invalid IP-literal")
    elif ":" in host:
        colon_port = host[host.index(":"):]
        if not _valid_optional_port(colon_port):
            raise _GoError(f"invalid port {go_quote(colon_port)} after host")
    return _unescape(host, _HOST)


def _valid_userinfo(s: str) -> bool:
    return all(c in _ALNUM or c in "-._:~!$&'()*+,;=%@" for c in s)


@dataclass(frozen=True)
class URL:
    """The parts of a Go url.URL the getters read."""

    scheme: str = ""
    host: str = ""
    path: str = ""
    raw_path: str = ""
    raw_query: str = ""

    def hostname(self) -> str:
        return self._split_host_port()[0]

    def port(self) -> str:
        return self._split_host_port()[1]

    def _split_host_port(self) -> tuple[str, str]:
        host, port = self.host, ""
        colon = host.rfind(":")
        if colon >= 0 and _valid_optional_port(host[colon:]):
            host, port = host[:colon], host[colon + 1:]
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        return host, port

    def escaped_path(self) -> str:
        if self.raw_path and _valid_encoded(self.raw_path):
            try:
                if _unescape(self.raw_path, _PATH) == self.path:
                    return self.raw_path
            except _GoError:
                pass
        if self.path == "*":
            return "*"
        return _escape(self.path, _PATH)

    def query(self) -> dict[str, list[str]]:
        """url.Values as ParseQuery makes them, pairs it cannot read dropped as u.Query() drops them."""
        values: dict[str, list[str]] = {}
        for pair in self.raw_query.split("&") if self.raw_query else []:
            if ";" in pair or not pair:
                continue
            key, _, value = pair.partition("=")
            try:
                key, value = _unescape(key, _QUERY), _unescape(value, _QUERY)
            except _GoError:
                continue
            values.setdefault(key, []).append(value)
        return values


def _scheme(raw: str) -> tuple[str, str]:
    for i, c in enumerate(raw):
        if c.isascii() and c.isalpha():
            continue
        if c in "0123456789+-.":
            if i == 0:
                return "", raw
            continue
        if c == ":":
            if i == 0:
                raise _GoError("missing protocol scheme")
            return raw[:i], raw[i + 1:]
        return "", raw
    return "", raw


def _parse(raw: str, via_request: bool) -> URL:
    """net/url's parse (without the fragment, which Parse cuts off first)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise _GoError("net/url: invalid control character in URL")
    if raw == "" and via_request:
        raise _GoError("empty url")
    if raw == "*":
        return URL(path="*")
    scheme, rest = _scheme(raw)
    scheme = scheme.lower()
    if rest.endswith("?") and rest.count("?") == 1:
        rest, query = rest[:-1], ""
    else:
        rest, _, query = rest.partition("?")
    if not rest.startswith("/"):
        if scheme:
            return URL(scheme=scheme, raw_query=query)  # opaque: no host, no path
        if via_request:
            raise _GoError("invalid URI for request")
        if ":" in rest.split("/", 1)[0]:
            raise _GoError("first path segment in URL cannot contain colon")
    host = ""
    if (scheme or (not via_request and not rest.startswith("///"))) and rest.startswith("//"):
        authority, slash, tail = rest[2:].partition("/")
        rest = slash + tail
        at = authority.rfind("@")
        host = _parse_host(authority[at + 1:])
        if at >= 0:
            userinfo = authority[:at]
            if not _valid_userinfo(userinfo):
                raise _GoError("net/url: invalid userinfo")
            for part in userinfo.split(":", 1):
                _unescape(part, _USER)
    path = _unescape(rest, _PATH)
    raw_path = "" if _escape(path, _PATH) == rest else rest
    return URL(scheme=scheme, host=host, path=path, raw_path=raw_path, raw_query=query)


@functools.lru_cache(maxsize=1024)
def parse_url(raw: str) -> URL:
    """urls.go's stringToUrl: ParseRequestURI must accept ``raw``; the result is Parse's.
    Raises ValueError with the text Kubernetes gives."""
    try:
        _parse(raw, via_request=True)
        without_fragment, hash_sign, fragment = raw.partition("#")
        try:
            url = _parse(without_fragment, via_request=False)
        except _GoError as exc:
            raise _GoError(f"parse {go_quote(without_fragment)}: {exc}") from None
        if hash_sign:
            _unescape(fragment, _FRAGMENT)
        return url
    except _GoError as exc:
        text = str(exc) if str(exc).startswith("parse ") else f"parse {go_quote(raw)}: {exc}"
        raise ValueError(f"URL parse error during conversion from string: {text}") from None


def is_url(raw: str) -> bool:
    """urls.go's isURL: whether ParseRequestURI accepts ``raw``."""
    try:
        _parse(raw, via_request=True)
    except _GoError:
        return False
    return True
