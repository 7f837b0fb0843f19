"""The static checks the Kubernetes CEL compiler makes and the ``cel`` binding does not.

Undeclared variables and functions, undefined fields of ``device`` (``allowMultipleAllocations``
only with consumable capacity), functions called in the wrong form (``charAt("abc", 1)``: the
extension functions exist only as methods, ``quantity`` and ``sign`` only as globals: quantity.go
declares ``sign(q)``, not ``q.sign()``), ``size()`` of a quantity or semver,
selectors whose static type is not bool, and features this evaluator does not have — each refused
with cel-go's text and position (a call's is its opening parenthesis), every error of an
expression in one report, ordered by position, as cel-go gives them.
"""

from __future__ import annotations

from collections.abc import Collection

from audit.dra.cel.contract import CelCompileError
from audit.dra.cel.formatting import CLAUSE_TYPES, FormatError, is_formattable, parse_clause
from audit.dra.cel.regex import RegexError, UnsupportedRegex, compile_go
from audit.dra.cel.syntax import Token, closing, errors_at, opening, split_arguments, tokenize

# Implemented natively by the cel package (functions and macros), or by ``desugar``.
_NATIVE = frozenset({
    "size", "contains", "startsWith", "endsWith", "matches", "int", "uint", "double", "string",
    "bytes", "dyn", "type", "duration", "timestamp", "has", "all", "exists", "exists_one", "map",
    "filter", "getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek",
    "getHours", "getMinutes", "getSeconds", "getMilliseconds",
    "optional.of", "optional.none", "optional.ofNonZeroValue", "hasValue", "value", "orValue", "or",
    "optMap", "optFlatMap", "cel.bind", "sortBy", "existsOne", "transformList", "transformMap", "transformMapEntry",
})
# Present in the Kubernetes environment but not available on this evaluator.
_UNSUPPORTED = frozenset({"authorizer", "image"})
# Macros binding a variable in their first argument; those with two variables bind the first two.
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter", "optMap", "optFlatMap", "sortBy"})
_TWO_VARIABLE_MACROS = frozenset({"all", "exists", "exists_one", "existsOne", "transformList", "transformMap",
                                  "transformMapEntry"})
_KEYWORDS = frozenset({"true", "false", "null", "in"})
_TYPE_NAMES = frozenset({"int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type",
                         "optional_type"})
# Declared only as methods (receiver.f(...)) in cel-go and the Kubernetes libraries ...
_METHODS_ONLY = frozenset({
    "compareTo", "isGreaterThan", "isLessThan", "add", "sub", "asInteger", "asApproximateFloat", "isInteger",
    "major", "minor", "patch", "charAt", "indexOf", "lastIndexOf", "lowerAscii", "upperAscii", "replace", "split",
    "substring", "trim", "join", "reverse", "isSorted", "sum", "min", "max", "distinct", "first", "last", "slice",
    "flatten", "sort", "unwrapOpt", "hasValue", "value", "orValue", "or", "startsWith", "endsWith", "contains",
    "includes", "getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek", "getHours",
    "getMinutes", "getSeconds", "getMilliseconds", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
    "isLinkLocalUnicast", "isGlobalUnicast", "containsIP", "containsCIDR", "masked", "prefixLength", "getScheme",
    "getHost", "getHostname", "getPort", "getEscapedPath", "getQuery", "find", "findAll", "format",
})
# ... and only as global functions (``ip`` is both: ``ip(string)`` and ``<CIDR>.ip()``).
_GLOBALS_ONLY = frozenset({"quantity", "isQuantity", "semver", "isSemver", "isIP", "cidr", "isCIDR", "url", "isURL"})
# Declared as global functions only (quantity.go's ``sign(q)``), so never callable as methods.
_NOT_METHODS = frozenset({"sign"})


def analyse(source: str, consumable_capacity: bool, functions: Collection[str]) -> None:
    """Static checks of a parsed expression; raises CelCompileError like the Kubernetes compiler."""
    tokens = tokenize(source)
    device_fields = {"driver", "attributes", "capacity"}
    if consumable_capacity:
        device_fields.add("allowMultipleAllocations")
    problems: list[tuple[int, str]] = []

    def ident(i: int) -> Token | None:
        t = tokens[i] if 0 <= i < len(tokens) else None
        return t if t is not None and t.kind == "ident" else None

    def punct(i: int, text: str) -> bool:
        return 0 <= i < len(tokens) and tokens[i].kind == "punct" and tokens[i].text == text

    def selected(i: int) -> bool:
        """Whether the identifier at ``i`` names a field or method: after ``.`` or ``.?``."""
        return punct(i - 1, ".") or (punct(i - 1, "?") and punct(i - 2, "."))

    # Comprehension variables are bound for the whole expression (an over-approximation that
    # only matters for a name used both inside and outside a macro).
    bound: set[str] = set()
    for i, t in enumerate(tokens):
        if t.kind != "ident" or not punct(i + 1, "("):
            continue
        first, second = ident(i + 2), ident(i + 4)
        if first is None or not punct(i + 3, ","):
            continue
        two = second is not None and punct(i + 5, ",")
        if punct(i - 1, ".") and (t.text in _MACROS or (two and t.text in _TWO_VARIABLE_MACROS)):
            bound.add(first.text)
            if two and t.text in _TWO_VARIABLE_MACROS and second is not None:
                bound.add(second.text)
        elif t.text == "bind" and punct(i - 1, ".") and tokens[i - 2].text == "cel":
            bound.add(first.text)

    namespace_heads: set[int] = set()
    for i, t in enumerate(tokens):
        if t.kind != "ident" or not punct(i + 1, "("):
            continue
        head = ident(i - 2)
        member = selected(i)
        if punct(i - 1, ".") and head is not None and not selected(i - 2):
            qualified = f"{head.text}.{t.text}"
            if qualified in functions or qualified in _NATIVE or qualified in _UNSUPPORTED:
                namespace_heads.add(i - 2)
                problem = _function_problem(qualified, functions)
                if problem:
                    problems.append((tokens[i + 1].offset, problem))
                continue
        problem = _function_problem(t.text, functions)
        if problem is None and t.text == "existsOne" and len(split_arguments(tokens, i + 1)) != 3:
            problem = "undeclared reference to 'existsOne' (in container '')"  # only the two-variable form exists
        if problem is None and ((t.text in _METHODS_ONLY and not member)
                                or ((t.text in _GLOBALS_ONLY or t.text in _NOT_METHODS) and member)):
            problem = f"found no matching overload for '{t.text}' applied to '{_signature(tokens, i, member)}'"
        if problem is None and t.text == "reverse" and member and _receiver_type(tokens, i) == "string":
            problem = "found no matching overload for 'reverse' applied to 'string.()'"
        if problem:
            problems.append((tokens[i + 1].offset, problem))

    for i, t in enumerate(tokens):
        if t.kind != "ident" or selected(i) or punct(i + 1, "(") or i in namespace_heads:
            continue
        if t.text == "device":
            field = ident(i + 2)
            if punct(i + 1, ".") and field is not None and field.text not in device_fields:
                problems.append((tokens[i + 1].offset, f"undefined field '{field.text}'"))
            continue
        if t.text in bound or t.text in _KEYWORDS or t.text in _TYPE_NAMES:
            continue
        problems.append((t.offset, f"undeclared reference to '{t.text}' (in container '')"))

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
                problems.append((tokens[i + 1].offset, f"found no matching overload for 'size' applied to '{applied}'"))

    problems.extend(_mixed_literals(tokens))
    if problems:
        raise errors_at(source, problems)
    result = _static_type(tokens)
    if result is not None and result != "bool":
        # Kubernetes refuses selectors whose static type is neither bool nor the unknown type when
        # compiling, in a message of its own (compile.go), without cel-go's "compilation failed".
        raise CelCompileError(f"must evaluate to bool or the unknown type, not {result}")


def validate_literals(source: str) -> None:
    """The checks of literal arguments Kubernetes' environment makes once the expression is typed.

    Constant patterns of ``matches``, ``find`` and ``findAll`` are compiled: cel-go's
    ValidateRegexLiterals refuses a bad pattern of the method ``matches`` as a compile error at
    the literal; the regex optimizations of cel-go (``matches``) and of regex.go (``find``,
    ``findAll``) refuse the others when the program is planned, in Go's words. A literal format
    string applied to a list literal is checked by cel-go's string format validator."""
    tokens = tokenize(source)
    invalid: list[tuple[int, str]] = []
    planned: str | None = None
    for i, t in enumerate(tokens):
        if t.kind != "ident" or i + 1 >= len(tokens) or tokens[i + 1].text != "(":
            continue
        if t.text == "format":
            problem = _format_problem(source, tokens, i)
            if problem is not None:
                invalid.append(problem)
            continue
        member = i > 0 and tokens[i - 1].kind == "punct" and tokens[i - 1].text == "."
        if t.text == "matches":
            index = 0 if member else 1
        elif t.text in ("find", "findAll") and member:
            index = 0
        else:
            continue
        arguments = split_arguments(tokens, i + 1)
        if len(arguments) <= index:
            continue
        start, end = arguments[index]
        literal = tokens[start]
        if end - start != 1 or literal.kind != "string" or not _is_string_literal(source, literal):
            continue
        try:
            compile_go(literal.text)
        except UnsupportedRegex as exc:
            invalid.append((literal.offset, str(exc)))
        except RegexError as exc:
            if t.text == "matches" and member:
                invalid.append((literal.offset, "invalid matches argument"))
            elif planned is None:
                planned = f"program instantiation failed: {exc}"
    if invalid:
        raise errors_at(source, invalid)
    if planned is not None:
        raise CelCompileError(planned)


def _format_problem(source: str, tokens: list[Token], name: int) -> tuple[int, str] | None:
    """cel-go's stringFormatValidator on ``"literal".format([...])``: the first problem of the
    call, at the call or, for an argument of a type its clause does not take, at the argument.
    Arguments whose static type is not evident count as dyn, which every clause takes."""
    target, call = name - 2, tokens[name + 1].offset
    if target < 0 or tokens[target].kind != "string" or not _is_string_literal(source, tokens[target]):
        return None
    if tokens[name - 1].text != ".":
        return None
    arguments = split_arguments(tokens, name + 1)
    if len(arguments) != 1:
        return None
    start, end = arguments[0]
    if tokens[start].text != "[" or closing(tokens, start) != end - 1:
        return None
    elements = split_arguments(tokens, start)
    text = tokens[target].text
    requested, i = 0, 0
    while i < len(text):
        if text[i] != "%":
            i += 1
            continue
        if text[i + 1:i + 2] == "%":
            i += 2
            continue
        requested += 1
        if i + 1 >= len(text):
            return call, "unexpected end of string"
        if requested > len(elements):
            return call, f"index {requested - 1} out of range"
        try:
            i, verb, _ = parse_clause(text, i)
        except FormatError as exc:
            return call, str(exc)
        a, b = elements[requested - 1]
        bad = _unformattable(source, tokens, verb, a, b)
        if bad is not None:
            return bad
    if len(elements) > requested:
        return call, f"too many arguments supplied to string.format (expected {requested}, got {len(elements)})"
    return None


def _is_string_literal(source: str, token: Token) -> bool:
    """Whether a string token is a string literal rather than a bytes literal (``b"..."``)."""
    written = source[token.offset:token.end]
    quote = min(i for i in (written.find('"'), written.find("'")) if i >= 0)
    return "b" not in written[:quote].lower()


def _unformattable(source: str, tokens: list[Token], verb: str, start: int, end: int) -> tuple[int, str] | None:
    """(position, error) when the expression tokens[start:end] has a static type ``verb`` does
    not take; ``%s`` looks into list and map literals as well."""
    span = tokens[start:end]
    kind = _element_type(tokens, start, end)
    if len(span) == 1 and span[0].kind == "string" and not _is_string_literal(source, span[0]):
        kind = "bytes"
    if kind is not None and kind != "dyn":
        name = {"null": "null_type", "any": "google.protobuf.Any"}.get(kind, kind.split("(", 1)[0])
        if not is_formattable(verb, name):
            return _position(tokens, start, end), f"error during formatting: {CLAUSE_TYPES[verb][1].format(name)}"
    if verb == "s" and span[0].text in ("[", "{") and closing(tokens, start) == end - 1:
        for a, b in split_arguments(tokens, start):
            parts = [a, b]
            colon = next((j for j in range(a, b) if tokens[j].text == ":"), None) if span[0].text == "{" else None
            if colon is not None:
                parts = [a, colon, colon + 1, b]
            for x, y in zip(parts[::2], parts[1::2], strict=True):
                bad = _unformattable(source, tokens, "s", x, y)
                if bad is not None:
                    return bad
    return None


def _mixed_literals(tokens: list[Token]) -> list[tuple[int, str]]:
    """List and map literals whose entries differ in type: the Kubernetes environment validates
    homogeneous aggregate literals (cel-go's ValidateHomogeneousAggregateLiterals), a list
    reporting its first differing element, a map every differing key and value. Only entries
    whose type is evident are compared."""
    problems: list[tuple[int, str]] = []
    # Literals inside the arguments of ``format`` are exempt (strings.go declares format's
    # arguments list(dyn) and exempts it with HomogeneousAggregateLiteralExemptFunctions).
    exempt = [(k + 1, closing(tokens, k + 1)) for k, t in enumerate(tokens[:-1])
              if t.kind == "ident" and t.text == "format" and tokens[k + 1].text == "("]
    for i, t in enumerate(tokens):
        if t.kind != "punct" or t.text not in "[{" or (t.text == "[" and _indexes(tokens, i)):
            continue
        if any(open_at < i < close_at for open_at, close_at in exempt):
            continue
        if closing(tokens, i) >= len(tokens):
            continue
        if t.text == "[":
            first: str | None = None
            for start, end in split_arguments(tokens, i):
                start += 1 if tokens[start].text == "?" else 0
                found = _element_type(tokens, start, end)
                if first is None:
                    first = found
                    if first is None:
                        break
                elif found is not None and found != first:
                    problems.append((_position(tokens, start, end), f"expected type '{first}' but found '{found}'"))
                    break
            continue
        firsts: list[str | None] | None = None
        for start, end in split_arguments(tokens, i):
            start += 1 if tokens[start].text == "?" else 0
            colon = next((j for j in range(start, end) if tokens[j].text == ":"), None)
            if colon is None:
                break
            spans = [(start, colon), (colon + 1, end)]
            types = [_element_type(tokens, a, b) for a, b in spans]
            if firsts is None:
                firsts = types
                continue
            for expected, found, (a, b) in zip(firsts, types, spans, strict=True):
                if expected is not None and found is not None and found != expected:
                    problems.append((_position(tokens, a, b), f"expected type '{expected}' but found '{found}'"))
    return problems


def _indexes(tokens: list[Token], i: int) -> bool:
    """Whether the ``[`` at ``i`` indexes the value before it (else it opens a list literal)."""
    before = tokens[i - 1] if i > 0 else None
    if before is None or (before.kind == "ident" and before.text == "in"):
        return False
    return before.kind in ("ident", "string", "number") or before.text in (")", "]", "}")


def _element_type(tokens: list[Token], start: int, end: int) -> str | None:
    """The type of a literal's entry as the homogeneity check names it, when evident."""
    span = tokens[start:end]
    if len(span) == 2 and span[0].text == "-" and span[1].kind == "number":
        span = span[1:]  # a negative number is one literal
    if not span:
        return None
    if len(span) == 1 and span[0].text == "null":
        return "null"
    if span[0].text == "[" and closing(tokens, start) == end - 1:
        inner = [_element_type(tokens, a, b) for a, b in split_arguments(tokens, start)]
        if not inner:
            return None
        return f"list({inner[0]})" if inner[0] is not None and all(x == inner[0] for x in inner) else "list(dyn)"
    known = _static_type(span)
    if known is not None:
        return known
    texts = [x.text for x in span[:3]]
    return "any" if texts == ["device", ".", "attributes"] and _opaque_path_end(tokens, start, end) else None


def _opaque_path_end(tokens: list[Token], start: int, end: int) -> bool:
    """Whether tokens [start, end) are exactly ``device.attributes[d].id`` (or ``[d][id]``)."""
    j = start + 3
    if j >= end or tokens[j].text != "[":
        return False
    j = closing(tokens, j) + 1
    if j + 2 == end and tokens[j].text == "." and tokens[j + 1].kind == "ident":
        return True
    return j < end and tokens[j].text == "[" and closing(tokens, j) == end - 1


def _position(tokens: list[Token], start: int, end: int) -> int:
    """Where cel-go places an expression: a call at its ``(``, a field selection at its ``.``, an
    index at its ``[``, anything else at its first token."""
    last = tokens[end - 1]
    if end - start > 1 and last.kind == "punct" and last.text in (")", "]"):
        open_index = opening(tokens, end - 1)
        if open_index > start:
            return tokens[open_index].offset
    if end - start > 2 and last.kind == "ident" and tokens[end - 2].text == ".":
        return tokens[end - 2].offset
    return tokens[start].offset


def _type_of(tokens: list[Token]) -> str:
    """The static type of an argument as cel-go prints it; ``any`` for attribute values and
    ``dyn`` where only a type checker would know."""
    known = _element_type(tokens, 0, len(tokens)) if tokens else None
    if known is None:
        return "dyn"
    return "null_type" if known == "null" else known


def _receiver_type(tokens: list[Token], name_index: int) -> str:
    """The static type of the receiver of the method whose name is at ``name_index``."""
    j = name_index - 2  # the last token before the dot
    while j >= 0:
        t = tokens[j]
        if t.kind == "punct" and t.text in ")]}":
            start = opening(tokens, j)
            before = tokens[start - 1] if start > 0 else None
            if t.text != "}" and before is not None and (before.kind == "ident" or before.text in (")", "]")):
                j = start - 1  # a call or an index: what it applies to belongs to the receiver
                continue
            j = start
            break
        if t.kind not in ("ident", "string", "number"):
            j += 1
            break
        if j >= 1 and tokens[j - 1].text == ".":
            j -= 2
        elif j >= 2 and tokens[j - 1].text == "?" and tokens[j - 2].text == ".":
            j -= 3
        else:
            break
    return _type_of(tokens[max(j, 0):name_index - 1])


def _signature(tokens: list[Token], name_index: int, member: bool) -> str:
    """The argument types of a call as cel-go's overload errors print them: ``recv.(args)`` or ``(args)``."""
    args = ", ".join(_type_of(tokens[a:b]) for a, b in split_arguments(tokens, name_index + 1))
    return f"{_receiver_type(tokens, name_index)}.({args})" if member else f"({args})"


def _function_problem(name: str, functions: Collection[str]) -> str | None:
    if name in functions or name in _NATIVE:
        return None
    if name in _UNSUPPORTED:
        return f"function '{name}' is not supported by this evaluator"
    return f"undeclared reference to '{name}' (in container '')"


# Result types of functions whose return type does not depend on their receiver.
_RESULT_TYPES = {
    "compareTo": "int", "asInteger": "int", "sign": "int", "major": "int", "minor": "int", "patch": "int",
    "size": "int", "int": "int", "indexOf": "int", "lastIndexOf": "int", "asApproximateFloat": "double",
    "double": "double", "dyn": "dyn", "quantity": "kubernetes.Quantity", "add": "kubernetes.Quantity",
    "sub": "kubernetes.Quantity", "semver": "kubernetes.Semver", "string": "string", "lowerAscii": "string",
    "upperAscii": "string", "trim": "string", "replace": "string", "substring": "string", "charAt": "string",
    "join": "string", "strings.quote": "string", "format": "string", "ip": "net.IP", "cidr": "net.CIDR", "masked": "net.CIDR",
    "url": "kubernetes.URL", "family": "int", "prefixLength": "int", "getScheme": "string", "getHost": "string",
    "getHostname": "string", "getPort": "string", "getEscapedPath": "string", "find": "string",
    "findAll": "list(string)", "getQuery": "map(string, list(string))", "isIP": "bool", "isCIDR": "bool",
    "isURL": "bool", "ip.isCanonical": "bool", "isUnspecified": "bool", "isLoopback": "bool",
    "isLinkLocalMulticast": "bool", "isLinkLocalUnicast": "bool", "isGlobalUnicast": "bool", "containsIP": "bool",
    "containsCIDR": "bool",
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
        if start >= 3 and tokens[start - 2].text == "." and tokens[start - 3].text in ("sets", "strings", "ip"):
            qualified = f"{tokens[start - 3].text}.{name.text}"
        return _RESULT_TYPES.get(qualified)
    opaque = _opaque_before(tokens, len(tokens) - 1)
    if opaque is not None and opaque[1] == 0:
        return opaque[0]
    return None


# Calls whose result is one of Kubernetes' opaque types, which size() does not take.
_OPAQUE_RESULTS = {"quantity": "kubernetes.Quantity", "add": "kubernetes.Quantity", "sub": "kubernetes.Quantity",
                   "semver": "kubernetes.Semver", "ip": "net.IP", "cidr": "net.CIDR", "masked": "net.CIDR",
                   "url": "kubernetes.URL"}


def _opaque_before(tokens: list[Token], end: int) -> tuple[str, int] | None:
    """(type name, start index) when the expression ending at ``end`` is statically of an opaque
    type: ``quantity(..)``/``semver(..)``/``ip(..)``/``x.add(..)`` calls and ``device.capacity[..].id``."""
    if end < 0:
        return None
    t = tokens[end]
    if t.kind == "punct" and t.text == ")":
        start = opening(tokens, end)
        name = tokens[start - 1] if start > 0 else None
        if name is not None and name.kind == "ident" and name.text in _OPAQUE_RESULTS:
            return _OPAQUE_RESULTS[name.text], start - 1
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
