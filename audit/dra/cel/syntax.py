"""A small lexer for CEL source and the source rewrite for unknown domains.

The ``cel`` binding parses but does not type-check; ``checks`` walks these tokens to make the
Kubernetes compiler's static checks. ``with_empty_domains`` turns every ``device.attributes[K]``
into ``(K in device.attributes ? device.attributes[K] : {})`` so that a missing domain reads as an
empty map, as Kubernetes' custom map lookup does.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

from audit.dra.cel.contract import CelCompileError


@dataclass(frozen=True)
class Token:
    kind: str  # "ident", "string", "number", "punct"
    text: str  # identifiers and punctuation as written; strings as their decoded value
    offset: int
    end: int


_TOKEN = re.compile(
    r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<string>(?:[rR][bB]?|[bB][rR]?)?(?:\"\"\"[\s\S]*?\"\"\"|'''[\s\S]*?'''|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'))
  | (?P<number>0[xX][0-9a-fA-F]+[uU]?|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[uU]?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>==|!=|<=|>=|&&|\|\||[-+*/%!<>?:.,()\[\]{}])
    """,
    re.VERBOSE,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'", "a": "\a", "b": "\b",
            "f": "\f", "v": "\v", "`": "`", "?": "?"}


def _decode(literal: str) -> str:
    """The value of a string literal, with CEL's escapes (simple, ``\\x``, ``\\u``, ``\\U``, octal)."""
    start = 0
    while literal[start] not in "\"'":
        start += 1
    raw = "r" in literal[:start].lower()
    body = literal[start:]
    quote = 3 if body[:3] in ('"""', "'''") else 1
    body = body[quote:-quote]
    if raw or "\\" not in body:
        return body
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i + 1] if body[i] == "\\" and i + 1 < len(body) else ""
        width = {"x": 2, "u": 4, "U": 8}.get(c, 0)
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
            i += 2
        elif width and re.fullmatch(r"[0-9a-fA-F]+", body[i + 2:i + 2 + width] or "-") and len(body[i + 2:i + 2 + width]) == width:
            out.append(chr(min(int(body[i + 2:i + 2 + width], 16), 0x10FFFF)))
            i += 2 + width
        elif c and c in "0123" and re.fullmatch(r"[0-7]{3}", body[i + 1:i + 4]):
            out.append(chr(int(body[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def tokenize(source: str) -> list[Token]:
    tokens: list[Token] = []
    pos = 0
    while pos < len(source):
        match = _TOKEN.match(source, pos)
        if match is None:
            tokens.append(Token("punct", source[pos], pos, pos + 1))
            pos += 1
            continue
        kind = match.lastgroup or "punct"
        if kind == "string":
            tokens.append(Token(kind, _decode(match.group()), pos, match.end()))
        elif kind != "space":
            tokens.append(Token(kind, match.group(), pos, match.end()))
        pos = match.end()
    return tokens


def error_at(source: str, offset: int, message: str) -> CelCompileError:
    """A compile error in cel-go's layout: position, the source line and a caret under it."""
    return errors_at(source, [(offset, message)])


def errors_at(source: str, problems: list[tuple[int, str]]) -> CelCompileError:
    """Several compile errors in one report, ordered by position as cel-go orders them."""
    return CelCompileError("compilation failed: " + "\n".join(
        _located(source, offset, message) for offset, message in sorted(problems, key=lambda p: p[0])))


def _located(source: str, offset: int, message: str) -> str:
    line = source.count("\n", 0, offset) + 1
    line_start = source.rfind("\n", 0, offset) + 1
    column = offset - line_start + 1
    lines = source.splitlines() or [""]
    text = lines[min(line, len(lines)) - 1]
    return f"ERROR: <input>:{line}:{column}: {message}\n | {text}\n | {'.' * (column - 1)}^"


_OPEN_TO_CLOSE = {"(": ")", "[": "]", "{": "}"}


def _matching(tokens: list[Token], index: int, step: int, opens: Mapping[str, str]) -> int:
    """Index of the bracket matching the one at ``index``, walking by ``step`` (1: forward, -1:
    back), ``opens`` mapping each bracket that deepens the walk to the one that ends it; past the
    end of ``tokens`` when unbalanced."""
    depth = 0
    j = index
    while 0 <= j < len(tokens):
        t = tokens[j]
        if t.kind == "punct":
            if t.text in opens:
                depth += 1
            elif t.text in opens.values():
                depth -= 1
                if depth == 0:
                    return j
        j += step
    return j


def closing(tokens: list[Token], open_index: int) -> int:
    """Index of the bracket closing the one at ``open_index`` (len(tokens) when unbalanced)."""
    return _matching(tokens, open_index, 1, _OPEN_TO_CLOSE)


def split_arguments(tokens: list[Token], open_index: int, close_index: int | None = None) -> list[tuple[int, int]]:
    """Token ranges [start, end) of the comma-separated arguments between the bracket at
    ``open_index`` and the one closing it (``close_index``, found when not given)."""
    close = min(closing(tokens, open_index) if close_index is None else close_index, len(tokens))
    ranges: list[tuple[int, int]] = []
    start, depth = open_index + 1, 0
    for j in range(open_index + 1, close):
        t = tokens[j]
        if t.kind == "punct" and t.text in "([{":
            depth += 1
        elif t.kind == "punct" and t.text in ")]}":
            depth -= 1
        elif depth == 0 and t.kind == "punct" and t.text == ",":
            ranges.append((start, j))
            start = j + 1
    if start < close:
        ranges.append((start, close))
    return ranges

def opening(tokens: list[Token], close_index: int) -> int:
    """Index of the bracket opened for the one at ``close_index`` (-1 when unbalanced)."""
    return _matching(tokens, close_index, -1, {c: o for o, c in _OPEN_TO_CLOSE.items()})


def with_empty_domains(source: str) -> str:
    """Rewrite ``device.attributes[K]`` / ``device.capacity[K]`` (and ``.K``) so that a domain the
    device lacks reads as an empty map, as Kubernetes' custom map lookup does:
    ``(K in device.attributes ? device.attributes[K] : {})``. ``has(device.attributes.K)`` keeps
    asking whether the domain exists and is left alone."""
    tokens = tokenize(source)
    out: list[str] = []
    copied = 0
    i = 0
    while i < len(tokens):
        t = tokens[i]
        field = tokens[i + 2].text if i + 2 < len(tokens) else ""
        is_root = t.kind == "ident" and t.text == "device" and (i == 0 or tokens[i - 1].text != ".")
        if not (is_root and tokens[i + 1].text == "." and field in ("attributes", "capacity") and i + 3 < len(tokens)):
            i += 1
            continue
        opener = tokens[i + 3]
        if opener.kind == "punct" and opener.text == "[":
            close = closing(tokens, i + 3)
            if close >= len(tokens):
                break
            key = with_empty_domains(source[opener.end:tokens[close].offset])
            last = close
        elif opener.text == "." and i + 4 < len(tokens) and tokens[i + 4].kind == "ident":
            following = tokens[i + 5].text if i + 5 < len(tokens) else ""
            in_has = i >= 2 and tokens[i - 2].text == "has" and tokens[i - 1].text == "(" and following == ")"
            if in_has or following == "(":  # a domain-presence test or a method call on the map
                i += 5
                continue
            key = json.dumps(tokens[i + 4].text)
            last = i + 4
        else:
            i += 3
            continue
        out.append(source[copied:t.offset])
        out.append(f"(({key}) in device.{field} ? device.{field}[{key}] : {{}})")
        copied = tokens[last].end
        i = last + 1
    out.append(source[copied:])
    return "".join(out)


def with_own_methods(source: str, renamed: dict[str, str]) -> str:
    """Rename method calls ``x.name(`` to ``x.<renamed[name]>(``: for functions the binding
    implements natively with other semantics than cel-go's, and whose method form cannot be
    replaced by registering a function of the same name."""
    tokens = tokenize(source)
    out: list[str] = []
    copied = 0
    for i, t in enumerate(tokens):
        if (t.kind == "ident" and t.text in renamed and 0 < i < len(tokens) - 1
                and tokens[i - 1].text == "." and tokens[i + 1].text == "("):
            out.append(source[copied:t.offset])
            out.append(renamed[t.text])
            copied = t.end
    out.append(source[copied:])
    return "".join(out)
