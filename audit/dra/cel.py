"""The CEL environment of DRA device selectors, on the Rust-backed ``cel`` package.

Selectors in DeviceClasses and requests see one variable, ``device``, with ``driver``,
``attributes[domain].id``, ``capacity[domain].id`` (a Kubernetes quantity) and, when consumable
capacity is enabled, ``allowMultipleAllocations``. This module reproduces the Kubernetes 1.36
environment (``k8s.io/dynamic-resource-allocation/cel/compile.go``): an unknown domain is an empty
map, an unknown id is the run-time error ``no such key: <id>``, a non-bool result is an error,
version attributes are semver values parsed with blang's rules, and an attribute that cannot be
converted makes every evaluation on that device fail.

How it maps onto ``cel``, which cannot hold Python objects and does not type-check:

* Quantities and semvers travel as one-key maps whose key is a private tag and whose value is
  their canonical value. Every custom function refuses untagged arguments, built-in operators
  refuse maps (``memory + "x"``, ``memory < x`` fail as in Kubernetes), ``size()`` on an
  expression that is statically a quantity or semver is refused at compile time, and ``==``
  compares the canonical value — which is what Kubernetes' ``Equal`` does
  (``quantity("1Gi") == quantity("1024Mi")`` is true; build metadata of versions is ignored).
  Where the type is only known at run time (attributes are dynamic) ``size()`` of a version
  attribute answers 1 instead of failing.
* Static checks Kubernetes makes when compiling — undeclared variables, unknown functions,
  undefined fields of ``device`` — are made here on the token stream, with cel-go's
  ``ERROR: <input>:line:col:`` layout. Other type errors between values surface at run time.
* A domain the device lacks reads as an empty map: every ``device.attributes[K]`` and
  ``device.capacity[K]`` is compiled as ``(K in device.attributes ? device.attributes[K] : {})``,
  so ``in``, ``size()`` and macros over ``device.attributes`` still see only real domains.
* ``cel`` tracks no evaluation cost, so the 1,000,000 cost limit is not enforced; the 10 KiB
  expression limit is. Two-variable comprehensions, ``cel.bind``, optional syntax and the URL,
  IP/CIDR, regex-find and format libraries are refused at compile time as unsupported.
"""

from __future__ import annotations

import datetime
import functools
import json
import logging
import re
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import cel
from cel import stdlib as cel_stdlib

from audit.dra.quantity import Quantity
from audit.dra.semver import Semver, normalize_semver

__all__ = [
    "CelCompileError",
    "CelRuntimeError",
    "CelOptions",
    "CelDevice",
    "CelEnvironment",
    "CompiledSelector",
    "device_context",
    "MAX_EXPRESSION_LENGTH",
]

# resourceapi.CELSelectorExpressionMaxLength
MAX_EXPRESSION_LENGTH = 10 * 1024
# includes() refuses lists longer than the per-device attribute value limit (KEP-5491).
MAX_INCLUDES_ITEMS = 48

# Failing selectors are reported through CelRuntimeError; the binding would also log each failed
# callback as a warning, which would duplicate every expected error on stderr.
logging.getLogger("cel").setLevel(logging.ERROR)


class CelCompileError(ValueError):
    """The expression is not a valid selector; the message starts with ``compilation failed:``."""


class CelRuntimeError(RuntimeError):
    """Evaluating a selector on one device failed (e.g. ``no such key: memory``)."""


@dataclass(frozen=True)
class CelOptions:
    """Feature gates that change the environment (``DRAConsumableCapacity``, ``DRAListTypeAttributes``)."""

    consumable_capacity: bool = True
    list_type_attributes: bool = False


# --- tagged values ----------------------------------------------------------------------------

_QUANTITY_TAG = "\x00kubernetes.Quantity"
_SEMVER_TAG = "\x00kubernetes.Semver"


def _wrap_quantity(q: Quantity) -> dict[str, str]:
    return {_QUANTITY_TAG: str(q.nanos)}


def _semver_key(v: Semver) -> str:
    """Canonical text without build metadata, so ``==`` follows semver precedence."""
    text = str(v)
    return text.split("+", 1)[0]


def _wrap_semver(v: Semver) -> dict[str, str]:
    return {_SEMVER_TAG: _semver_key(v)}


def _unwrap(value: Any) -> Quantity | Semver | None:
    """The Quantity or Semver behind a tagged value, or None for any other value."""
    if isinstance(value, dict) and len(value) == 1:
        if _QUANTITY_TAG in value:
            return Quantity(int(value[_QUANTITY_TAG]))
        if _SEMVER_TAG in value:
            return _parse_semver(value[_SEMVER_TAG])
    return None


@functools.lru_cache(maxsize=4096)
def _parse_semver(text: str) -> Semver:
    return Semver.parse(text)


def _type_name(value: Any) -> str:
    """The CEL type name of a value, as cel-go prints it in errors."""
    inner = _unwrap(value)
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
    if isinstance(value, cel.OptionalValue):
        return "optional_type"
    if isinstance(value, datetime.timedelta):
        return "google.protobuf.Duration"
    if isinstance(value, datetime.datetime):
        return "google.protobuf.Timestamp"
    return type(value).__name__


# --- errors raised inside functions -------------------------------------------------------------

# The binding wraps exceptions from Python callbacks in its own text; the upstream message is kept
# here (per thread, evaluation is synchronous) and restored when the evaluation fails.
_failure = threading.local()


class _FunctionFailed(Exception):
    pass


def _fail(message: str) -> NoReturn:
    _failure.message = message
    raise _FunctionFailed(message)


def _no_overload(name: str, *args: Any) -> NoReturn:
    _fail(f"no matching overload for '{name}' applied to '({', '.join(_type_name(a) for a in args)})'")


# --- quantity and semver functions (k8s.io/apiserver/pkg/cel/library) --------------------------


@functools.lru_cache(maxsize=4096)
def _parse_quantity_literal(text: str) -> dict[str, str]:
    return _wrap_quantity(Quantity.parse(text))


def _quantity(text: Any) -> dict[str, str]:
    if not isinstance(text, str):
        _no_overload("quantity", text)
    try:
        return _parse_quantity_literal(text)
    except ValueError as exc:
        _fail(str(exc))


def _is_quantity(text: Any) -> bool:
    if not isinstance(text, str):
        _no_overload("isQuantity", text)
    try:
        _parse_quantity_literal(text)
    except ValueError:
        return False
    return True


def _semver(text: Any, normalize: Any = False) -> dict[str, str]:
    if not isinstance(text, str) or not isinstance(normalize, bool):
        _no_overload("semver", text, normalize)
    try:
        return _wrap_semver(_parse_semver(normalize_semver(text) if normalize else text))
    except ValueError as exc:
        _fail(str(exc))


def _is_semver(text: Any, normalize: Any = False) -> bool:
    if not isinstance(text, str) or not isinstance(normalize, bool):
        _no_overload("isSemver", text, normalize)
    try:
        _parse_semver(normalize_semver(text) if normalize else text)
    except ValueError:
        return False
    return True


def _quantity_arg(name: str, value: Any, *others: Any) -> Quantity:
    inner = _unwrap(value)
    if not isinstance(inner, Quantity):
        _no_overload(name, value, *others)
    return inner


def _compare(name: str, left: Any, right: Any) -> int:
    a, b = _unwrap(left), _unwrap(right)
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return a.cmp(b)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    _no_overload(name, left, right)


def _compare_to(left: Any, right: Any) -> int:
    return _compare("compareTo", left, right)


def _is_greater_than(left: Any, right: Any) -> bool:
    return _compare("isGreaterThan", left, right) == 1


def _is_less_than(left: Any, right: Any) -> bool:
    return _compare("isLessThan", left, right) == -1


def _arith(name: str, left: Any, right: Any) -> dict[str, str]:
    q = _quantity_arg(name, left, right)
    if isinstance(right, int) and not isinstance(right, bool):
        other = Quantity.from_int(right)
    else:
        inner = _unwrap(right)
        if not isinstance(inner, Quantity):
            _no_overload(name, left, right)
        other = inner
    return _wrap_quantity(q.add(other) if name == "add" else q.sub(other))


def _add(left: Any, right: Any) -> dict[str, str]:
    return _arith("add", left, right)


def _sub(left: Any, right: Any) -> dict[str, str]:
    return _arith("sub", left, right)


def _as_integer(value: Any) -> int:
    q = _quantity_arg("asInteger", value)
    if not q.is_integer():
        _fail("cannot convert value to integer")
    return q.value()


def _as_approximate_float(value: Any) -> float:
    return _quantity_arg("asApproximateFloat", value).as_approximate_float()


def _sign(value: Any) -> int:
    return _quantity_arg("sign", value).sign()


def _is_integer(value: Any) -> bool:
    return _quantity_arg("isInteger", value).is_integer()


def _semver_part(name: str) -> Callable[[Any], int]:
    def part(value: Any) -> int:
        inner = _unwrap(value)
        if not isinstance(inner, Semver):
            _no_overload(name, value)
        number: int = getattr(inner, name)
        return number

    return part


def _same(a: Any, b: Any) -> bool:
    """CEL equality for includes(): tagged values by value, bool never equal to int."""
    ua, ub = _unwrap(a), _unwrap(b)
    if ua is not None or ub is not None:
        return type(ua) is type(ub) and ua == ub
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return bool(a == b)


def _includes(receiver: Any, value: Any) -> bool:
    if isinstance(receiver, list | tuple):
        if len(receiver) > MAX_INCLUDES_ITEMS:
            _fail(f"includes: list has {len(receiver)} items, more than the maximum of {MAX_INCLUDES_ITEMS}")
        return any(_same(item, value) for item in receiver)
    return _same(receiver, value)


def _guarded(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """A library function whose Python errors become CEL run-time errors with their own text."""

    def call(*args: Any) -> Any:
        if any(_unwrap(a) is not None for a in args):
            _no_overload(name, *args)
        try:
            return function(*args)
        except (TypeError, ValueError, IndexError, KeyError) as exc:
            _fail(f"{name}: {exc}")

    return call


_QUANTITY_AND_SEMVER: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _compare_to,
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "add": _add,
    "sub": _sub,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_approximate_float,
    "sign": _sign,
    "isInteger": _is_integer,
    "major": _semver_part("major"),
    "minor": _semver_part("minor"),
    "patch": _semver_part("patch"),
}

# Kubernetes' ext strings (v2), sets and list aggregates, as far as the cel package provides them.
_STDLIB: dict[str, Callable[..., Any]] = {
    "charAt": cel_stdlib.char_at,
    "indexOf": cel_stdlib.index_of,
    "lastIndexOf": cel_stdlib.last_index_of,
    "lowerAscii": cel_stdlib.lower_ascii,
    "upperAscii": cel_stdlib.upper_ascii,
    "replace": cel_stdlib.replace,
    "split": cel_stdlib.split,
    "substring": cel_stdlib.substring,
    "trim": cel_stdlib.trim,
    "join": cel_stdlib.join,
    "strings.quote": cel_stdlib.quote,
    "sets.contains": cel_stdlib.sets_contains,
    "sets.equivalent": cel_stdlib.sets_equivalent,
    "sets.intersects": cel_stdlib.sets_intersects,
    "min": cel_stdlib.min_,
    "max": cel_stdlib.max_,
    "sum": cel_stdlib.sum_,
    "bool": cel_stdlib.bool_,
}
_LIBRARY = {name: _guarded(name, fn) for name, fn in _STDLIB.items()}

# Implemented natively by the cel package (functions and macros).
_NATIVE = frozenset({
    "size", "contains", "startsWith", "endsWith", "matches", "int", "uint", "double", "string",
    "bytes", "dyn", "type", "duration", "timestamp", "has", "all", "exists", "exists_one", "map",
    "filter", "getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek",
    "getHours", "getMinutes", "getSeconds", "getMilliseconds",
})
# Present in the Kubernetes environment but not available on this evaluator.
_UNSUPPORTED = frozenset({
    "cel.bind", "url", "isURL", "getScheme", "getHost", "getHostname", "getPort", "getEscapedPath",
    "getQuery", "ip", "isIP", "cidr", "isCIDR", "containsIP", "containsCIDR", "prefixLength",
    "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast",
    "isGlobalUnicast", "masked", "find", "findAll", "isSorted", "format", "reverse", "transformList",
    "transformMap", "transformMapEntry", "existsOne", "optional.of", "optional.none",
    "optional.ofNonZeroValue", "hasValue", "value", "orValue", "or", "authorizer", "image",
})
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
_KEYWORDS = frozenset({"true", "false", "null", "in"})
_TYPE_NAMES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type"})


def _functions(options: CelOptions) -> dict[str, Callable[..., Any]]:
    functions = dict(_LIBRARY)
    functions.update(_QUANTITY_AND_SEMVER)
    if options.list_type_attributes:
        functions["includes"] = _includes
    return functions


# --- the lexer used by the static checks ---------------------------------------------------------


@dataclass(frozen=True)
class _Token:
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
    """The value of a string literal (common escapes only: enough to read domain names)."""
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
        if body[i] == "\\" and i + 1 < len(body) and body[i + 1] in _ESCAPES:
            out.append(_ESCAPES[body[i + 1]])
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def _tokenize(source: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(source):
        match = _TOKEN.match(source, pos)
        if match is None:
            tokens.append(_Token("punct", source[pos], pos, pos + 1))
            pos += 1
            continue
        kind = match.lastgroup or "punct"
        if kind == "string":
            tokens.append(_Token(kind, _decode(match.group()), pos, match.end()))
        elif kind != "space":
            tokens.append(_Token(kind, match.group(), pos, match.end()))
        pos = match.end()
    return tokens


def _error_at(source: str, offset: int, message: str) -> CelCompileError:
    """A compile error in cel-go's layout: position, the source line and a caret under it."""
    line = source.count("\n", 0, offset) + 1
    line_start = source.rfind("\n", 0, offset) + 1
    column = offset - line_start + 1
    lines = source.splitlines() or [""]
    text = lines[min(line, len(lines)) - 1]
    return CelCompileError(
        f"compilation failed: ERROR: <input>:{line}:{column}: {message}\n | {text}\n | {'.' * (column - 1)}^"
    )


def _analyse(source: str, options: CelOptions, functions: Mapping[str, Any]) -> None:
    """Static checks of a parsed expression; raises CelCompileError like the Kubernetes compiler."""
    tokens = _tokenize(source)
    device_fields = {"driver", "attributes", "capacity"}
    if options.consumable_capacity:
        device_fields.add("allowMultipleAllocations")

    def ident(i: int) -> _Token | None:
        t = tokens[i] if 0 <= i < len(tokens) else None
        return t if t is not None and t.kind == "ident" else None

    def punct(i: int, text: str) -> bool:
        return 0 <= i < len(tokens) and tokens[i].kind == "punct" and tokens[i].text == text

    # Comprehension variables are bound for the whole expression (an over-approximation that
    # only matters for a name used both inside and outside a macro).
    bound: set[str] = set()
    for i, t in enumerate(tokens):
        if t.kind == "ident" and t.text in _MACROS and punct(i - 1, ".") and punct(i + 1, "("):
            first = ident(i + 2)
            if first is not None and punct(i + 3, ","):
                if ident(i + 4) is not None and punct(i + 5, ","):
                    raise _error_at(source, t.offset, "two-variable comprehensions are not supported by this evaluator")
                bound.add(first.text)

    namespace_heads: set[int] = set()
    for i, t in enumerate(tokens):
        if t.kind != "ident" or not punct(i + 1, "("):
            continue
        head = ident(i - 2)
        if punct(i - 1, ".") and head is not None and not punct(i - 3, "."):
            qualified = f"{head.text}.{t.text}"
            if qualified in functions or qualified in _UNSUPPORTED:
                namespace_heads.add(i - 2)
                _check_function(source, qualified, t.offset, functions)
                continue
        _check_function(source, t.text, t.offset, functions)

    for i, t in enumerate(tokens):
        if t.kind != "ident" or punct(i - 1, ".") or punct(i + 1, "(") or i in namespace_heads:
            continue
        if t.text == "device":
            field = ident(i + 2)
            if punct(i + 1, ".") and field is not None and field.text not in device_fields:
                raise _error_at(source, tokens[i + 1].offset, f"undefined field '{field.text}'")
            continue
        if t.text in bound or t.text in _KEYWORDS or t.text in _TYPE_NAMES:
            continue
        raise _error_at(source, t.offset, f"undeclared reference to '{t.text}' (in container '')")

    for i, t in enumerate(tokens):
        if t.kind == "ident" and t.text == "size" and punct(i + 1, "("):
            if punct(i - 1, "."):
                opaque = _opaque_before(tokens, i - 2)
                applied = f"{opaque[0]}.()" if opaque else ""
            else:
                close = _closing(tokens, i + 1)
                opaque = _opaque_before(tokens, close - 1) if close > i + 2 else None
                opaque = opaque if opaque is not None and opaque[1] == i + 2 else None
                applied = f"({opaque[0]})" if opaque else ""
            if opaque is not None:
                raise _error_at(source, t.offset, f"found no matching overload for 'size' applied to '{applied}'")

    result = _static_type(tokens)
    if result is not None and result != "bool":
        # Kubernetes refuses selectors whose static type is neither bool nor dyn when compiling.
        raise CelCompileError(f"compilation failed: must evaluate to bool or the unknown type, not {result}")


# Result types of functions whose return type does not depend on their receiver.
_RESULT_TYPES = {
    "compareTo": "int", "asInteger": "int", "sign": "int", "major": "int", "minor": "int", "patch": "int",
    "size": "int", "int": "int", "indexOf": "int", "lastIndexOf": "int", "asApproximateFloat": "double",
    "double": "double", "quantity": "kubernetes.Quantity", "add": "kubernetes.Quantity",
    "sub": "kubernetes.Quantity", "semver": "kubernetes.Semver", "string": "string", "lowerAscii": "string",
    "upperAscii": "string", "trim": "string", "replace": "string", "substring": "string", "charAt": "string",
    "join": "string", "strings.quote": "string",
    "isGreaterThan": "bool", "isLessThan": "bool", "isInteger": "bool", "isQuantity": "bool", "isSemver": "bool",
    "startsWith": "bool", "endsWith": "bool", "contains": "bool", "matches": "bool", "has": "bool", "all": "bool",
    "exists": "bool", "exists_one": "bool", "includes": "bool", "bool": "bool",
}
_BOOLEAN_OPERATORS = frozenset({"==", "!=", "<", "<=", ">", ">=", "&&", "||", "!", "?", "+", "-", "*", "/", "%"})


def _static_type(tokens: list[_Token]) -> str | None:
    """The static type of a whole expression when it is evident without a type checker: a single
    literal, ``device.driver``, a capacity value or a call with a fixed result type. None when an
    operator, a dynamic value (attributes) or anything else decides it."""
    if not tokens:
        return None
    depth = 0
    for t in tokens:
        if t.kind == "punct" and t.text in "([{":
            depth += 1
        elif t.kind == "punct" and t.text in ")]}":
            depth -= 1
        elif depth == 0 and ((t.kind == "punct" and t.text in _BOOLEAN_OPERATORS) or t.text == "in"):
            return None
    if len(tokens) == 1:
        t = tokens[0]
        if t.kind == "string":
            return "string"
        if t.kind == "number":
            lowered = t.text.lower()
            if lowered.endswith("u"):
                return "uint"
            return "double" if ("." in lowered or "e" in lowered) and not lowered.startswith("0x") else "int"
        return {"true": "bool", "false": "bool", "null": "null_type"}.get(t.text)
    texts = [t.text for t in tokens]
    if texts == ["device", ".", "driver"]:
        return "string"
    if texts == ["device", ".", "allowMultipleAllocations"]:
        return "bool"
    last = tokens[-1]
    if last.kind == "punct" and last.text == ")":
        opening = _opening(tokens, len(tokens) - 1)
        if opening == 0:
            return _static_type(tokens[1:-1])
        name = tokens[opening - 1] if opening > 0 else None
        if name is None or name.kind != "ident":
            return None
        qualified = name.text
        if opening >= 3 and tokens[opening - 2].text == "." and tokens[opening - 3].text in ("sets", "strings"):
            qualified = f"{tokens[opening - 3].text}.{name.text}"
        return _RESULT_TYPES.get(qualified)
    opaque = _opaque_before(tokens, len(tokens) - 1)
    if opaque is not None and opaque[1] == 0:
        return opaque[0]
    return None


def _closing(tokens: list[_Token], open_index: int) -> int:
    """Index of the bracket closing the one at ``open_index`` (len(tokens) when unbalanced)."""
    pairs = {"(": ")", "[": "]", "{": "}"}
    depth = 0
    for j in range(open_index, len(tokens)):
        t = tokens[j]
        if t.kind != "punct":
            continue
        if t.text in pairs:
            depth += 1
        elif t.text in pairs.values():
            depth -= 1
            if depth == 0:
                return j
    return len(tokens)


def _opening(tokens: list[_Token], close_index: int) -> int:
    """Index of the bracket opened for the one at ``close_index`` (-1 when unbalanced)."""
    pairs = {")": "(", "]": "[", "}": "{"}
    depth = 0
    for j in range(close_index, -1, -1):
        t = tokens[j]
        if t.kind != "punct":
            continue
        if t.text in pairs:
            depth += 1
        elif t.text in pairs.values():
            depth -= 1
            if depth == 0:
                return j
    return -1


_QUANTITY_RESULTS = frozenset({"quantity", "add", "sub"})


def _opaque_before(tokens: list[_Token], end: int) -> tuple[str, int] | None:
    """(type name, start index) when the expression ending at ``end`` is statically a quantity or
    semver: ``quantity(..)``/``semver(..)``/``x.add(..)`` calls and ``device.capacity[..].id``."""
    if end < 0:
        return None
    t = tokens[end]
    if t.kind == "punct" and t.text == ")":
        start = _opening(tokens, end)
        name = tokens[start - 1] if start > 0 else None
        if name is not None and name.kind == "ident":
            if name.text in _QUANTITY_RESULTS:
                return "kubernetes.Quantity", start - 1
            if name.text == "semver":
                return "kubernetes.Semver", start - 1
        return None
    # device.capacity["domain"].id  or  device.capacity["domain"]["id"]
    if t.kind == "ident" and end >= 1 and tokens[end - 1].text == ".":
        domain_end = end - 2
    elif t.kind == "punct" and t.text == "]":
        domain_end = _opening(tokens, end) - 1
    else:
        return None
    if domain_end < 0 or tokens[domain_end].text != "]":
        return None
    domain_start = _opening(tokens, domain_end)
    head = [x.text for x in tokens[max(domain_start - 3, 0):domain_start]]
    if head == ["device", ".", "capacity"]:
        return "kubernetes.Quantity", domain_start - 3
    return None


def _with_empty_domains(source: str) -> str:
    """Rewrite ``device.attributes[K]`` / ``device.capacity[K]`` (and ``.K``) so that a domain the
    device lacks reads as an empty map, as Kubernetes' custom map lookup does:
    ``(K in device.attributes ? device.attributes[K] : {})``. ``has(device.attributes.K)`` keeps
    asking whether the domain exists and is left alone."""
    tokens = _tokenize(source)
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
            close = _closing(tokens, i + 3)
            if close >= len(tokens):
                break
            key = _with_empty_domains(source[opener.end:tokens[close].offset])
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


def _check_function(source: str, name: str, offset: int, functions: Mapping[str, Any]) -> None:
    if name in functions or name in _NATIVE:
        return
    if name in _UNSUPPORTED:
        raise _error_at(source, offset, f"function '{name}' is not supported by this evaluator")
    raise _error_at(source, offset, f"undeclared reference to '{name}' (in container '')")


# --- devices ------------------------------------------------------------------------------------


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
        return _wrap_semver(_parse_version_attribute(attr["version"]))
    if options.list_type_attributes:
        ints, bools, strings, versions = (attr.get(k) for k in ("ints", "bools", "strings", "versions"))
        if isinstance(ints, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in ints):
            return list(ints)
        if isinstance(bools, list) and all(isinstance(v, bool) for v in bools):
            return list(bools)
        if isinstance(strings, list) and all(isinstance(v, str) for v in strings):
            return list(strings)
        if isinstance(versions, list) and all(isinstance(v, str) for v in versions):
            return [_wrap_semver(_parse_version_attribute(v)) for v in versions]
    raise ValueError("unsupported attribute value")


def _parse_version_attribute(text: str) -> Semver:
    try:
        return _parse_semver(text)
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
            caps.setdefault(domain, {})[ident] = _wrap_quantity(Quantity.parse(raw))
        except ValueError as exc:
            error = error or f"capacity {name}: {exc}"
    base: dict[str, Any] = {"driver": driver, "attributes": attrs, "capacity": caps}
    if options.consumable_capacity:
        base["allowMultipleAllocations"] = bool(allow_multiple_allocations)
    return CelDevice(driver, base, error, _functions(options))


# --- compiling and evaluating ---------------------------------------------------------------------


_PYTHON_FAILURE = "Python function call failed"


def _runtime_error(exc: Exception) -> CelRuntimeError:
    """Translate an error of the binding into the text cel-go would give."""
    if isinstance(exc, KeyError):
        key = exc.args[0] if exc.args else ""
        return CelRuntimeError(f"no such key: {key}")
    message = str(exc)
    recorded = getattr(_failure, "message", None)
    if recorded is not None and _PYTHON_FAILURE in message:
        return CelRuntimeError(recorded)
    if isinstance(exc, ZeroDivisionError):
        return CelRuntimeError("division by zero")
    undefined = re.match(r"Undefined variable or function: '([^']*)'", message)
    if undefined:
        return CelRuntimeError(f"no such overload: {undefined.group(1)}")
    if isinstance(exc, TypeError):
        return CelRuntimeError(f"no such overload: {message.split('. ')[0]}")
    return CelRuntimeError(message)


class CompiledSelector:
    """A compiled selector; ``evaluate`` caches its result per device object."""

    __slots__ = ("expression", "_program", "_results")

    def __init__(self, expression: str, program: cel.Program) -> None:
        self.expression = expression
        self._program = program
        # Weak keys: a long simulation builds many short-lived devices; results must not keep them.
        self._results: weakref.WeakKeyDictionary[CelDevice, bool | CelRuntimeError] = weakref.WeakKeyDictionary()

    def evaluate(self, device: CelDevice) -> bool:
        """True/False, or CelRuntimeError when evaluation fails on this device."""
        outcome = self._results.get(device)
        if outcome is None:
            outcome = self._run(device)
            self._results[device] = outcome
        if isinstance(outcome, CelRuntimeError):
            raise outcome
        return outcome

    def _run(self, device: CelDevice) -> bool | CelRuntimeError:
        if device.error is not None:
            return CelRuntimeError(device.error)
        _failure.message = None
        try:
            result = self._program.execute(device.context)
        except Exception as exc:  # the binding raises several exception types for run-time errors
            return _runtime_error(exc)
        if isinstance(result, bool):
            return result
        return CelRuntimeError(f"CEL result of type {_type_name(result)} could not be converted to bool")


class CelEnvironment:
    """Compiles selectors for one set of feature gates; compiled selectors are cached by text."""

    def __init__(self, options: CelOptions = CelOptions()) -> None:
        self.options = options
        self._functions = _functions(options)
        self._compiled: dict[str, CompiledSelector | CelCompileError] = {}

    def compile(self, expression: str) -> CompiledSelector:
        """Compile ``expression`` or raise CelCompileError (cached, errors included)."""
        cached = self._compiled.get(expression)
        if cached is None:
            cached = self._compile(expression)
            self._compiled[expression] = cached
        if isinstance(cached, CelCompileError):
            raise cached
        return cached

    def _compile(self, expression: str) -> CompiledSelector | CelCompileError:
        size = len(expression.encode())
        if size > MAX_EXPRESSION_LENGTH:
            return CelCompileError(
                f"compilation failed: expression too long ({size} bytes, must be at most {MAX_EXPRESSION_LENGTH})")
        try:
            program = cel.compile(expression)
        except Exception as exc:  # the binding reports syntax errors as ValueError with a position
            message = str(exc)
            start = message.find("ERROR: <input>")
            detail = (message[start:] if start >= 0 else message).replace("\n| ", "\n | ")
            return CelCompileError(f"compilation failed: {detail}")
        try:
            _analyse(expression, self.options, self._functions)
        except CelCompileError as exc:
            return exc
        rewritten = _with_empty_domains(expression)
        if rewritten != expression:
            try:
                program = cel.compile(rewritten)
            except Exception as exc:  # only an unforeseen shape of domain access can get here
                return CelCompileError(f"compilation failed: cannot make unknown domains empty maps: {exc}")
        return CompiledSelector(expression, program)
