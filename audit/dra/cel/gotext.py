"""Go's quoting of strings (``strconv.Quote``, the ``%q`` verb), which upstream error texts use."""

from __future__ import annotations

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

