"""The static checks the Kubernetes CEL compiler makes and the ``cel`` binding does not.

Undeclared variables and functions, undefined fields of ``device`` (``allowMultipleAllocations``
only with consumable capacity), ``size()`` of a quantity or semver, selectors whose static type is
not bool, and features this evaluator does not have — each refused with cel-go's text and, where
cel-go gives one, a position.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audit.dra.cel.contract import CelCompileError
from audit.dra.cel.syntax import Token, closing, error_at, opening, tokenize

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


def analyse(source: str, consumable_capacity: bool, functions: Mapping[str, Any]) -> None:
    """Static checks of a parsed expression; raises CelCompileError like the Kubernetes compiler."""
    tokens = tokenize(source)
    device_fields = {"driver", "attributes", "capacity"}
    if consumable_capacity:
        device_fields.add("allowMultipleAllocations")

    def ident(i: int) -> Token | None:
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
                    raise error_at(source, t.offset, "two-variable comprehensions are not supported by this evaluator")
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
                raise error_at(source, tokens[i + 1].offset, f"undefined field '{field.text}'")
            continue
        if t.text in bound or t.text in _KEYWORDS or t.text in _TYPE_NAMES:
            continue
        raise error_at(source, t.offset, f"undeclared reference to '{t.text}' (in container '')")

    for i, t in enumerate(tokens):
        if t.kind == "ident" and t.text == "size" and punct(i + 1, "("):
            if punct(i - 1, "."):
                opaque = _opaque_before(tokens, i - 2)
                applied = f"{opaque[0]}.()" if opaque else ""
            else:
                close = closing(tokens, i + 1)
                opaque = _opaque_before(tokens, close - 1) if close > i + 2 else None
                opaque = opaque if opaque is not None and opaque[1] == i + 2 else None
                applied = f"({opaque[0]})" if opaque else ""
            if opaque is not None:
                raise error_at(source, t.offset, f"found no matching overload for 'size' applied to '{applied}'")

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


def _static_type(tokens: list[Token]) -> str | None:
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
        start = opening(tokens, len(tokens) - 1)
        if start == 0:
            return _static_type(tokens[1:-1])
        name = tokens[start - 1] if start > 0 else None
        if name is None or name.kind != "ident":
            return None
        qualified = name.text
        if start >= 3 and tokens[start - 2].text == "." and tokens[start - 3].text in ("sets", "strings"):
            qualified = f"{tokens[start - 3].text}.{name.text}"
        return _RESULT_TYPES.get(qualified)
    opaque = _opaque_before(tokens, len(tokens) - 1)
    if opaque is not None and opaque[1] == 0:
        return opaque[0]
    return None


_QUANTITY_RESULTS = frozenset({"quantity", "add", "sub"})


def _opaque_before(tokens: list[Token], end: int) -> tuple[str, int] | None:
    """(type name, start index) when the expression ending at ``end`` is statically a quantity or
    semver: ``quantity(..)``/``semver(..)``/``x.add(..)`` calls and ``device.capacity[..].id``."""
    if end < 0:
        return None
    t = tokens[end]
    if t.kind == "punct" and t.text == ")":
        start = opening(tokens, end)
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
        domain_end = opening(tokens, end) - 1
    else:
        return None
    if domain_end < 0 or tokens[domain_end].text != "]":
        return None
    domain_start = opening(tokens, domain_end)
    head = [x.text for x in tokens[max(domain_start - 3, 0):domain_start]]
    if head == ["device", ".", "capacity"]:
        return "kubernetes.Quantity", domain_start - 3
    return None


def _check_function(source: str, name: str, offset: int, functions: Mapping[str, Any]) -> None:
    if name in functions or name in _NATIVE:
        return
    if name in _UNSUPPORTED:
        raise error_at(source, offset, f"function '{name}' is not supported by this evaluator")
    raise error_at(source, offset, f"undeclared reference to '{name}' (in container '')")
