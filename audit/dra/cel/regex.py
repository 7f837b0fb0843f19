"""Go's regular expressions (``regexp``, RE2 syntax) for ``matches``, ``find`` and ``findAll``.

cel-go's ``matches`` and Kubernetes' ``find``/``findAll`` (k8s.io/apiserver/pkg/cel/library/regex.go)
compile with Go's ``regexp``. Python's ``re`` reads the same text differently: it accepts
lookarounds, backreferences, possessive quantifiers and ``\\Z``, which Go refuses; its ``$``
also matches before a final newline, its ``\\d``, ``\\w``, ``\\s`` and ``\\b`` are Unicode-aware
where Go's are ASCII, ``{,n}`` is a repetition where Go reads literal text, and it knows neither
``\\z``, ``\\Q...\\E``, POSIX classes nor the ``U`` flag. ``translate`` therefore parses the
pattern with Go's grammar (regexp/syntax/parse.go), refuses what Go refuses with Go's text
(``error parsing regexp: invalid or unsupported Perl syntax: `(?=```), and writes an equivalent
``re`` pattern: ASCII classes spelled out, ``^``/``$``/``.`` according to the ``m`` and ``s``
flags, ``i`` as a scoped flag per atom, ``U`` by swapping greediness. Unicode classes (``\\pL``)
have no ``re`` equivalent and are refused as unsupported by this evaluator. Matching is
leftmost-first in both; ``find_all`` skips an empty match right after a match, as Go's
``FindAllString`` does.
"""

from __future__ import annotations

import functools
import re
import sys
import unicodedata
from dataclasses import dataclass, replace

_MAX_REPEAT = 1000
_PERL = {"d": "0-9", "s": "\\t\\n\\f\\r ", "w": "0-9A-Za-z_"}
_POSIX = {
    "alnum": "0-9A-Za-z", "alpha": "A-Za-z", "ascii": "\\x00-\\x7f", "blank": "\\t ", "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9", "graph": "!-~", "lower": "a-z", "print": " -~", "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ", "upper": "A-Z", "word": "0-9A-Za-z_", "xdigit": "0-9A-Fa-f",
}
_CONTROL = {"a": "\a", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_WORD = "[0-9A-Za-z_]"


class RegexError(ValueError):
    """A pattern Go's regexp refuses: ``error parsing regexp: <code>: `<text>```."""


class UnsupportedRegex(ValueError):
    """A pattern Go accepts that this evaluator cannot run."""


def _error(code: str, text: str) -> RegexError:
    return RegexError(f"error parsing regexp: {code}: `{text}`")


@dataclass(frozen=True)
class _Flags:
    fold: bool = False  # i
    multiline: bool = False  # m
    dot_nl: bool = False  # s
    ungreedy: bool = False  # U


def _char(c: str) -> str:
    return re.escape(c) if c.isascii() else c


def _class_char(c: str) -> str:
    return f"\\U{ord(c):08x}"


class _Translator:
    def __init__(self, pattern: str) -> None:
        self.s = pattern
        self.i = 0

    def peek(self, n: int = 1) -> str:
        return self.s[self.i:self.i + n]

    def translate(self) -> str:
        out, _ = self.sequence(_Flags(), depth=0)
        if self.i < len(self.s):  # a ``)`` with no group open
            raise _error("unexpected )", self.s)
        return out

    def sequence(self, flags: _Flags, depth: int) -> tuple[str, _Flags]:
        """Alternatives up to the ``)`` closing the current group (not consumed) or the end."""
        parts: list[str] = []
        last_atom: str | None = None  # what a repetition operator would apply to
        last_repeat = ""
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == ")":
                if depth == 0:
                    raise _error("unexpected )", self.s)
                break
            if c == "|":
                self.i += 1
                parts.append("|")
                last_atom, last_repeat = None, ""
                continue
            if c in "*+?" or (c == "{" and self.repeat_at(self.i) is not None):
                start = self.i
                quantifier = self.repetition()
                op_text = self.s[start:self.i]
                if last_repeat:
                    raise _error("invalid nested repetition operator", last_repeat + op_text)
                if last_atom is None:
                    raise _error("missing argument to repetition operator", op_text)
                lazy = self.peek() == "?"
                if lazy:
                    self.i += 1
                    op_text += "?"
                if lazy != flags.ungreedy:
                    quantifier += "?"
                parts.append(quantifier)
                last_repeat = op_text
                last_atom = None
                continue
            last_repeat = ""
            if c == "(":
                atom, flags, is_atom = self.group(flags)
                parts.append(atom)
                last_atom = atom if is_atom else None
                continue
            atom = self.atom(flags)
            parts.append(atom)
            last_atom = atom
        return "".join(parts), flags

    def repeat_at(self, start: int) -> tuple[int, int | None, int] | None:
        """``{n}``, ``{n,}`` or ``{n,m}`` at ``start``: (min, max or None, end); None if it is literal text."""
        found = re.compile(r"\{(\d+)(,(\d*))?\}").match(self.s, start)
        if found is None:
            return None
        low = int(found.group(1))
        high = low if found.group(2) is None else (int(found.group(3)) if found.group(3) else None)
        return low, high, found.end()

    def repetition(self) -> str:
        c = self.s[self.i]
        if c != "{":
            self.i += 1
            return c
        start = self.i
        parsed = self.repeat_at(start)
        assert parsed is not None
        low, high, end = parsed
        self.i = end
        if low > _MAX_REPEAT or (high is not None and (high > _MAX_REPEAT or high < low)):
            raise _error("invalid repeat count", self.s[start:end])
        return f"{{{low},{'' if high is None else high}}}"

    def group(self, flags: _Flags) -> tuple[str, _Flags, bool]:
        """A group at ``(``: (its translation, the flags after it, whether it can be repeated)."""
        start = self.i
        self.i += 1
        if self.peek(2) == "?P" and self.s[self.i + 2:self.i + 3] == "<" or self.peek(2) == "?<":
            self.i += 3 if self.peek(2) == "?P" else 2
            end = self.s.find(">", self.i)
            if end < 0:
                raise _error("invalid named capture", self.s[start:])
            if not re.fullmatch(r"[0-9A-Za-z_]+", self.s[self.i:end]):
                raise _error("invalid named capture", self.s[start:end + 1])
            self.i = end + 1  # names are not needed (and Go allows one name twice)
        elif self.peek() == "?":
            self.i += 1
            inner = replace(flags)
            negated, seen = False, False
            while True:
                if self.i >= len(self.s):
                    raise _error("invalid or unsupported Perl syntax", self.s[start:])
                c = self.s[self.i]
                self.i += 1
                if c in "imsU":
                    seen = True
                    field = {"i": "fold", "m": "multiline", "s": "dot_nl", "U": "ungreedy"}[c]
                    inner = replace(inner, **{field: not negated})
                elif c == "-" and not negated:
                    negated, seen = True, False
                elif c == ")" and not (negated and not seen):
                    return "", inner, False  # flags for the rest of the enclosing group
                elif c == ":" and not (negated and not seen):
                    body, _ = self.sequence(inner, depth=1)
                    self.close(start)
                    return f"(?:{body})", flags, True
                else:
                    raise _error("invalid or unsupported Perl syntax", self.s[start:self.i])
        body, _ = self.sequence(flags, depth=1)
        self.close(start)
        return f"({body})", flags, True

    def close(self, start: int) -> None:
        if self.i >= len(self.s):
            raise _error("missing closing )", self.s)
        self.i += 1

    def atom(self, flags: _Flags) -> str:
        c = self.s[self.i]
        if c == "[":
            return self.fold(self.char_class(), flags)
        self.i += 1
        if c == ".":
            return "(?s:.)" if flags.dot_nl else "[^\\n]"
        if c == "^":
            return "(?m:^)" if flags.multiline else "\\A"
        if c == "$":
            return "(?m:$)" if flags.multiline else "\\Z"
        if c != "\\":
            return self.fold(_char(c), flags)
        return self.escape(flags)

    @staticmethod
    def fold(text: str, flags: _Flags) -> str:
        return f"(?i:{text})" if flags.fold else text

    def escape(self, flags: _Flags) -> str:
        """The escape after a ``\\`` outside a class."""
        if self.i >= len(self.s):
            raise _error("trailing backslash at end of expression", "")
        c = self.s[self.i]
        if c == "A":
            self.i += 1
            return "\\A"
        if c == "z":
            self.i += 1
            return "\\Z"
        if c in "bB":
            self.i += 1
            edge = f"(?:(?<={_WORD})(?!{_WORD})|(?<!{_WORD})(?={_WORD}))"
            return edge if c == "b" else f"(?!{edge})"
        if c == "Q":
            end = self.s.find("\\E", self.i + 1)
            literal = self.s[self.i + 1:] if end < 0 else self.s[self.i + 1:end]
            self.i = len(self.s) if end < 0 else end + 2
            return "".join(self.fold(_char(x), flags) for x in literal)
        perl = self.perl_class()
        if perl is not None:
            return f"[{perl}]"
        return self.fold(_char(self.escaped_char()), flags)

    def perl_class(self) -> str | None:
        """``\\d`` and the like at the current escape, as the inside of a class; refuses ``\\pL``."""
        c = self.s[self.i]
        if c.lower() in _PERL:
            self.i += 1
            inside = _PERL[c.lower()]
            return inside if c.islower() else f"^{inside}"
        if c in "pP":
            start = self.i - 1
            self.i += 1
            if self.peek() == "{":
                end = self.s.find("}", self.i)
                if end < 0:
                    raise _error("invalid character class range", self.s[start:])
                name, self.i = self.s[self.i + 1:end], end + 1
            else:
                name, self.i = self.s[self.i:self.i + 1], self.i + 1
            negated = (c == "P") != name.startswith("^")
            name = name.lstrip("^")
            if name == "Any":
                inside = "\\x00-\\U0010ffff"
            elif re.fullmatch(r"[A-Z][a-z]?", name) and _category(name):
                inside = _category(name)
            elif re.fullmatch(r"[A-Z][A-Za-z_]*", name):
                # Go knows scripts (\p{Greek}) as well; unicodedata does not.
                raise UnsupportedRegex(f"the Unicode class {self.s[start:self.i]} is not supported by this evaluator")
            else:
                raise _error("invalid character class range", self.s[start:self.i])
            return f"^{inside}" if negated else inside
        return None

    def escaped_char(self) -> str:
        """The character of a single-character escape (regexp/syntax's parseEscape)."""
        start = self.i - 1
        c = self.s[self.i]
        self.i += 1
        if c.isascii() and not c.isalnum():
            return c
        if c in "1234567" and not (self.peek() and self.peek() in "01234567"):
            raise _error("invalid escape sequence", self.s[start:self.i])
        if c in "01234567":
            digits = c
            while len(digits) < 3 and self.peek() and self.peek() in "01234567":
                digits += self.s[self.i]
                self.i += 1
            return chr(int(digits, 8))
        if c == "x":
            if self.peek() == "{":
                hex_digits = re.compile(r"[0-9A-Fa-f]*").match(self.s, self.i + 1)
                assert hex_digits is not None
                end = hex_digits.end()
                if not hex_digits.group() or int(hex_digits.group(), 16) > 0x10FFFF:
                    raise _error("invalid escape sequence", self.s[start:end])
                if self.s[end:end + 1] != "}":
                    raise _error("invalid escape sequence", self.s[start:end + 1])
                self.i = end + 1
                return chr(int(hex_digits.group(), 16))
            digits = self.s[self.i:self.i + 2]
            if not re.fullmatch(r"[0-9A-Fa-f]{2}", digits):
                raise _error("invalid escape sequence", self.s[start:self.i + len(digits)])
            self.i += 2
            return chr(int(digits, 16))
        if c in _CONTROL:
            return _CONTROL[c]
        raise _error("invalid escape sequence", self.s[start:self.i])

    def char_class(self) -> str:
        """A ``[...]`` class as an ``re`` class whose members are all escaped."""
        start = self.i
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        items: list[str] = []
        first = True
        while True:
            if self.i >= len(self.s):
                raise _error("missing closing ]", self.s[start:])
            c = self.s[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "[" and self.peek(2) == "[:":
                end = self.s.find(":]", self.i + 2)
                if end >= 0:
                    name = self.s[self.i + 2:end]
                    negated_posix = name.startswith("^")
                    key = name[1:] if negated_posix else name
                    if key not in _POSIX:
                        raise _error("invalid character class range", self.s[self.i:end + 2])
                    self.i = end + 2
                    inside = _POSIX[key]
                    items.append(f"[^{inside}]" if negated_posix else inside)
                    continue
            if c == "\\" and self.i + 1 < len(self.s) and (self.s[self.i + 1].lower() in _PERL
                                                            or self.s[self.i + 1] in "pP"):
                self.i += 1
                perl = self.perl_class()
                assert perl is not None
                items.append(f"[{perl}]" if perl.startswith("^") else perl)
                continue
            range_start = self.i
            low = self.class_char()
            if self.peek() == "-" and self.s[self.i + 1:self.i + 2] not in ("]", ""):
                self.i += 1
                high = self.class_char()
                if high < low:
                    raise _error("invalid character class range", self.s[range_start:self.i])
                items.append(f"{_class_char(low)}-{_class_char(high)}")
            else:
                items.append(_class_char(low))
        # A negated Perl or POSIX class inside a class is a set difference ``re`` cannot write in
        # one class; it is a separate alternative instead.
        plain = "".join(x for x in items if not x.startswith("["))
        nested = [x for x in items if x.startswith("[")]
        if not nested:
            return f"[{'^' if negate else ''}{plain}]"
        alternatives = ([f"[{plain}]"] if plain else []) + nested
        union = "(?:" + "|".join(alternatives) + ")"
        return f"(?!{union})(?s:.)" if negate else union

    def class_char(self) -> str:
        if self.i >= len(self.s):
            raise _error("missing closing ]", self.s)
        c = self.s[self.i]
        self.i += 1
        if c != "\\":
            return c
        if self.i >= len(self.s):
            raise _error("trailing backslash at end of expression", "")
        return self.escaped_char()


@functools.lru_cache(maxsize=64)
def _category(name: str) -> str:
    """The inside of a class matching Unicode general category ``name`` (``L`` or ``Lu``), as
    ranges of escaped code points; '' for an unknown category. Python's Unicode tables are
    those of its version, Go's of its own."""
    ranges: list[str] = []
    first = last = -2
    for code in range(sys.maxunicode + 1):
        if unicodedata.category(chr(code)).startswith(name):
            if code != last + 1:
                if first >= 0:
                    ranges.append(_class_range(first, last))
                first = code
            last = code
    if first >= 0:
        ranges.append(_class_range(first, last))
    return "".join(ranges)


def _class_range(first: int, last: int) -> str:
    return f"\\U{first:08x}" if first == last else f"\\U{first:08x}-\\U{last:08x}"


@functools.lru_cache(maxsize=1024)
def compile_go(pattern: str) -> re.Pattern[str]:
    """The ``re`` pattern that matches as Go's regexp compiled from ``pattern`` would; raises
    RegexError with Go's text, or UnsupportedRegex."""
    return re.compile(_Translator(pattern).translate())


def find(text: str, pattern: str) -> str:
    """Go's ``FindString``: the leftmost match, or ''."""
    found = compile_go(pattern).search(text)
    return found.group(0) if found else ""


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """Go's ``FindAllString(text, limit)``: successive matches, an empty match right after the
    previous match skipped; at most ``limit`` when it is not negative."""
    compiled = compile_go(pattern)
    out: list[str] = []
    pos, previous_end = 0, -1
    while (limit < 0 or len(out) < limit) and pos <= len(text):
        found = compiled.search(text, pos)
        if found is None:
            break
        accept = True
        if found.end() == pos:
            accept = found.start() != previous_end
            pos += 1
        else:
            pos = found.end()
        previous_end = found.end()
        if accept:
            out.append(found.group(0))
    return out


def matches(text: str, pattern: str) -> bool:
    """Go's ``MatchString``: whether the pattern matches anywhere in ``text``."""
    return compile_go(pattern).search(text) is not None
