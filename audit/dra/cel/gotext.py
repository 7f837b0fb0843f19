"""Go's ways of writing strings and numbers that upstream texts and values carry: ``strconv.Quote``
(the ``%q`` verb) and ``strconv.FormatFloat``."""

from __future__ import annotations

import math
from decimal import Decimal

_SHORT = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v",
          "\\": "\\\\", '"': '\\"'}


def go_quote(text: str) -> str:
    """``strconv.Quote``: a double-quoted Go literal, printable characters kept as they are."""
    out = ['"']
    for c in text:
        if c in _SHORT:
            out.append(_SHORT[c])
        elif c.isprintable():
            out.append(c)
        elif ord(c) < 0x80:
            out.append(f"\\x{ord(c):02x}")
        elif ord(c) < 0x10000:
            out.append(f"\\u{ord(c):04x}")
        else:
            out.append(f"\\U{ord(c):08x}")
    out.append('"')
    return "".join(out)


def _shortest(value: float) -> tuple[str, int]:
    """The shortest digits that read back as ``value`` (> 0) and the decimal point's position:
    ``value == 0.<digits> * 10**point``."""
    _, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(str(d) for d in digits)
    assert isinstance(exponent, int)
    return text, len(text) + exponent


def go_format_g(value: float) -> str:
    """``strconv.FormatFloat(value, 'g', -1, 64)``, how cel-go writes a double as a string."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0"
    digits, point = _shortest(abs(value))
    exponent = point - 1
    # strconv/ftoa.go: with the shortest precision %e is used from exponent 6 on (eprec = 6).
    eprec = 6
    if exponent < -4 or exponent >= eprec:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def go_format_f(value: Decimal) -> str:
    """``strconv.FormatFloat(value, 'f', -1, 64)`` for a value already exact in decimal."""
    text = format(value.normalize(), "f")
    return "0" if text in ("0", "-0") else text
