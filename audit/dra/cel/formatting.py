"""cel-go's ``<string>.format(<list>)`` (ext/strings.go, version 2: ext/formatting.go) for selectors.

Kubernetes enables cel-go's string extension at version 2, whose ``format`` writes ``%f`` and
``%e`` through golang.org/x/text's printer for the ``en_US`` locale: ``%f`` groups thousands
(``1,234.500000``), infinities are ``∞``, and ``%e`` is written as ``%6e`` (the precision given is
read as a width, so it always has six decimals) in the printer's notation ``1.234500×10⁰³``.
``%s`` writes values as CEL's ``string()`` does and lists and maps as CEL literals (doubles in
them with six decimals, map entries sorted by their written key). Errors carry cel-go's texts;
``format_problems`` gives those cel-go's validator reports when compiling a literal format
string applied to a list literal.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from audit.dra.cel.gotext import go_format_f, go_format_g, go_quote
from audit.dra.cel.values import type_name


class FormatError(ValueError):
    """A format string or argument cel-go's format refuses, with its text."""


_STRING_KINDS = "strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps"
# What each verb takes, and its complaint about anything else (ext/formatting.go).
CLAUSE_TYPES = {
    "s": ({"list", "map", "int", "uint", "double", "bool", "string", "google.protobuf.Timestamp", "bytes",
           "google.protobuf.Duration", "type", "null_type"},
          f"string clause can only be used on {_STRING_KINDS}, was given {{}}"),
    "d": ({"int", "uint"}, "decimal clause can only be used on integers, was given {}"),
    "f": ({"double", "string"}, "fixed-point clause can only be used on doubles, was given {}"),
    "e": ({"double", "string"}, "scientific clause can only be used on doubles, was given {}"),
    "b": ({"int", "uint", "bool"}, "only integers and bools can be formatted as binary, was given {}"),
    "x": ({"int", "uint", "string", "bytes"},
          "only integers, byte buffers, and strings can be formatted as hex, was given {}"),
    "o": ({"int", "uint"}, "octal clause can only be used on integers, was given {}"),
}
CLAUSE_TYPES["X"] = CLAUSE_TYPES["x"]
_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
_DOUBLE_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _during(message: str) -> FormatError:
    return FormatError(f"error during formatting: {message}")


def _kind(value: Any) -> str:
    """The CEL type name of a format argument (``list`` and ``map`` without parameters)."""
    name = type_name(value)
    return {"tuple": "list"}.get(name, name)


def _timestamp(value: datetime.datetime) -> str:
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += f".{value.microsecond:06d}".rstrip("0")
    offset = value.utcoffset()
    if not offset:
        return text + "Z"
    minutes = int(offset.total_seconds()) // 60
    return text + f"{'-' if minutes < 0 else '+'}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def _duration(value: datetime.timedelta) -> str:
    micros = (value.days * 86400 + value.seconds) * 1_000_000 + value.microseconds
    return go_format_f(Decimal(micros) / Decimal(1_000_000)) + "s"


def _bytes_text(value: bytes) -> str:
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise _during('could not convert argument "invalid UTF-8 in bytes, cannot convert to string" '
                      "to string") from None


def _string(value: Any) -> str:
    """FormatString: the ``%s`` of one value."""
    kind = _kind(value)
    if kind == "list":
        return "[" + ", ".join(_member(item) for item in value) + "]"
    if kind == "map":
        return _map(value)
    if kind == "bool":
        return "true" if value else "false"
    if kind in ("int", "string"):
        return str(value)
    if kind == "double":
        return go_format_g(value)
    if kind == "bytes":
        return _bytes_text(value)
    if kind == "null_type":
        return "null"
    if kind == "google.protobuf.Timestamp":
        return _timestamp(value)
    if kind == "google.protobuf.Duration":
        return _duration(value)
    raise _during(CLAUSE_TYPES["s"][1].format(kind))


def _member(value: Any) -> str:
    """An element of a list or a map value as ``%s`` writes it: as a CEL literal."""
    kind = _kind(value)
    if kind == "string":
        return go_quote(value)
    if kind == "bytes":
        return "b" + go_quote(_bytes_text(value))
    if kind == "double":
        text = _go_fixed(value, 6)
        return go_quote(text) if math.isinf(value) or math.isnan(value) else text
    if kind == "google.protobuf.Timestamp":
        return f"timestamp({go_quote(_timestamp(value))})"
    if kind == "google.protobuf.Duration":
        return f"duration({go_quote(_duration(value))})"
    if kind in ("list", "map", "int", "bool", "null_type"):
        return _string(value)
    raise _during(f"no formatting function for {kind}")


def _map(value: dict[Any, Any]) -> str:
    entries = []
    for key, item in value.items():
        kind = _kind(key)
        if kind not in ("string", "bool", "int"):
            raise _during(f"no formatting function for map key of type {kind}")
        entries.append((_member(key), _member(item)))
    entries.sort(key=lambda entry: entry[0])
    return "{" + ", ".join(f"{k}:{v}" for k, v in entries) + "}"


def _go_fixed(value: float, precision: int) -> str:
    """Go's ``fmt.Sprintf("%.<p>f")`` (``+Inf``, ``-Inf``, ``NaN`` for the special values)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return f"{value:.{precision}f}"


def _double(verb: str, value: Any) -> float:
    if isinstance(value, str) and value in _DOUBLE_WORDS:
        return _DOUBLE_WORDS[value]
    if _kind(value) != "double":
        raise _during(CLAUSE_TYPES[verb][1].format(_kind(value)))
    return float(value)


def _special(value: float) -> str | None:
    """How x/text's printer writes the values that are no numbers."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "∞" if value > 0 else "-∞"
    return None


def _fixed(value: Any, precision: int) -> str:
    number = _double("f", value)
    return _special(number) or f"{number:,.{precision}f}"


def _scientific(value: Any) -> str:
    number = _double("e", value)
    special = _special(number)
    if special is not None:
        return special.rjust(6)
    mantissa, exponent = f"{number:.6e}".split("e")
    power = int(exponent)
    digits = f"{'-' if power < 0 else ''}{abs(power):02d}"
    return f"{mantissa}×10{digits.translate(_SUPERSCRIPT)}".rjust(6)


def _integer(verb: str, value: Any, base: str) -> str:
    kind = _kind(value)
    if kind == "bool" and verb == "b":
        return "1" if value else "0"
    if kind == "int":
        text = ("-" if value < 0 else "") + format(abs(value), base)
        return text.upper() if verb == "X" else text
    if kind in ("string", "bytes") and verb in "xX":
        data = value.encode() if isinstance(value, str) else value
        text = data.hex()
        return text.upper() if verb == "X" else text
    raise _during(CLAUSE_TYPES[verb][1].format(kind))


def _clause(verb: str, precision: int | None) -> Callable[[Any], str]:
    if verb == "s":
        return _string
    if verb == "d":
        return lambda v: _integer("d", v, "d")
    if verb == "f":
        return lambda v: _fixed(v, 6 if precision is None else precision)
    if verb == "e":
        return _scientific
    if verb == "b":
        return lambda v: _integer("b", v, "b")
    if verb in "xX":
        return lambda v: _integer(verb, v, "x")
    return lambda v: _integer("o", v, "o")


def parse_clause(text: str, at: int) -> tuple[int, str, int | None]:
    """The clause after the ``%`` at ``at``: (its end, its verb, its precision); cel-go's
    parseFormattingClause."""
    i = at + 1
    precision = None
    if text[i] == ".":
        i += 1
        start = i
        while True:
            if i >= len(text):
                raise FormatError("could not parse formatting clause: error while parsing precision: "
                                  "could not find end of precision specifier")
            if not ("0" <= text[i] <= "9"):
                break
            i += 1
        digits = text[start:i]
        reason = "invalid syntax" if not digits else ("value out of range" if int(digits) > 2**63 - 1 else "")
        if reason:
            raise FormatError("could not parse formatting clause: error while parsing precision: error while "
                              f"converting precision to integer: strconv.Atoi: parsing {go_quote(digits)}: {reason}")
        precision = int(digits)
    verb = text[i]
    if verb not in CLAUSE_TYPES:
        raise FormatError(f'could not parse formatting clause: unrecognized formatting clause "{verb}"')
    return i + 1, verb, precision


def format_string(text: str, args: list[Any]) -> str:
    """``text.format(args)`` as cel-go computes it."""
    out: list[str] = []
    i, index = 0, 0
    while i < len(text):
        if text[i] != "%":
            out.append(text[i])
            i += 1
            continue
        if text[i + 1:i + 2] == "%":
            out.append("%")
            i += 2
            continue
        if index >= len(args):
            raise FormatError(f"index {index} out of range")
        if i + 1 >= len(text):
            raise FormatError("unexpected end of string")
        i, verb, precision = parse_clause(text, i)
        out.append(_clause(verb, precision)(args[index]))
        index += 1
    return "".join(out)


def is_formattable(verb: str, kind: str) -> bool:
    """Whether cel-go's validator lets an argument of static type ``kind`` (a CEL type name; a
    parameterised ``list(int)`` counts as ``list``) through a clause."""
    return kind.split("(", 1)[0] in CLAUSE_TYPES[verb][0]
