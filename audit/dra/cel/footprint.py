"""Which parts of the ``device`` variable a selector reads, when that can be told from its source.

Most selectors read a few named values — ``device.driver``,
``device.attributes["gpu.nvidia.com"].productName``, ``device.capacity[d].memory`` — and nothing
else of the device. Their result is then a function of those values alone, so devices that agree
on them (every GPU of one model, across thousands of nodes) share one evaluation, and an
evaluation only has to hand those values to ``cel`` instead of the whole device, whose conversion
dominates the cost of a first evaluation.

A footprint is only given when every use of ``device`` is one of these exact shapes; anything
else (``device`` passed whole, a domain map used as a value or in ``in``/``size()``/macros, a
computed or non-plain key, ``device`` rebound by a macro) has no footprint and is evaluated on the
whole device.
"""

from __future__ import annotations

from audit.dra.cel.syntax import Token, tokenize

# A path is ("driver",), ("allowMultipleAllocations",) or (field, domain, id) with field
# "attributes" or "capacity".
Path = tuple[str, ...]

_SCALAR_FIELDS = frozenset({"driver", "allowMultipleAllocations"})
_MAP_FIELDS = frozenset({"attributes", "capacity"})


def footprint(source: str) -> tuple[Path, ...] | None:
    """The sorted device paths ``source`` reads, or None when it may read more than named values."""
    tokens = tokenize(source)
    paths: set[Path] = set()
    i = 0
    while i < len(tokens):
        t = tokens[i]
        if t.kind != "ident" or t.text != "device" or (i > 0 and _is(tokens, i - 1, ".")):
            i += 1
            continue
        found = _path_at(source, tokens, i)
        if found is None:
            return None
        path, i = found
        paths.add(path)
    return tuple(sorted(paths))


def _is(tokens: list[Token], i: int, text: str) -> bool:
    return 0 <= i < len(tokens) and tokens[i].kind == "punct" and tokens[i].text == text


def _plain_key(source: str, tokens: list[Token], i: int) -> str | None:
    """``["key"]`` at ``i``: a quoted literal without prefix or escapes (its text is its value)."""
    if not (_is(tokens, i, "[") and _is(tokens, i + 2, "]")):
        return None
    literal = tokens[i + 1]
    raw = source[literal.offset:literal.end]
    if literal.kind != "string" or raw[0] not in "\"'" or "\\" in raw:
        return None
    return literal.text


def _name(source: str, tokens: list[Token], i: int) -> tuple[str, int] | None:
    """A map key written ``.name`` (not a method call) or ``["name"]`` at ``i``: (key, next index)."""
    if _is(tokens, i, ".") and i + 1 < len(tokens) and tokens[i + 1].kind == "ident":
        if _is(tokens, i + 2, "("):
            return None
        return tokens[i + 1].text, i + 2
    key = _plain_key(source, tokens, i)
    return (key, i + 3) if key is not None else None


def _path_at(source: str, tokens: list[Token], i: int) -> tuple[Path, int] | None:
    """The path read by the ``device`` at ``i`` and the index after it, or None for other uses."""
    if not (_is(tokens, i + 1, ".") and i + 2 < len(tokens) and tokens[i + 2].kind == "ident"):
        return None
    field = tokens[i + 2].text
    if _is(tokens, i + 3, "("):
        return None
    if field in _SCALAR_FIELDS:
        return (field,), i + 3
    if field not in _MAP_FIELDS:
        return None
    domain = _name(source, tokens, i + 3)
    if domain is None:
        return None
    ident = _name(source, tokens, domain[1])
    if ident is None:
        return None
    return (field, domain[0], ident[0]), ident[1]
