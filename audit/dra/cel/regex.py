"""Go's regular expressions (``regexp``, RE2 syntax) for ``matches``, ``find`` and ``findAll``.

cel-go's ``matches`` and Kubernetes' ``find``/``findAll`` (k8s.io/apiserver/pkg/cel/library/regex.go)
compile with Go's ``regexp``, whose syntax is RE2's and which runs in time linear in the text.
Patterns run unchanged on RE2 itself (``google-re2``), compiled as Go compiles them: UTF-8,
leftmost-first (Go's non-POSIX ``regexp``), ASCII ``\\d``, ``\\w``, ``\\s`` and ``\\b``, ``$``
the end of the text without ``m``, ``{,n}`` literal text, Unicode classes and scripts
(``\\pL``, ``\\p{Greek}``) by RE2's Unicode tables, which lack the scripts Unicode 16 added
(refused as unsupported, as is a pattern over RE2's memory budget). RE2 also accepts a few
things Go refuses (``\\C``, repetitions nested past 1000 in Go's way of counting):
``_Validator`` parses each pattern with Go's grammar first (regexp/syntax/parse.go) and refuses
what Go refuses with Go's text (``error parsing regexp: invalid or unsupported Perl syntax:
`(?=```). ``find_all`` skips an empty match right after a match, as Go's ``FindAllString`` does.
"""

from __future__ import annotations

import functools
import re

import re2

_MAX_REPEAT = 1000
_PERL_CLASSES = "dsw"
_POSIX_CLASSES = frozenset({
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph", "lower", "print", "punct", "space", "upper",
    "word", "xdigit",
})
_CONTROL = {"a": "\a", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_REPEAT = re.compile(r"\{(\d+)(,(\d*))?\}")
# RE2's default budget (8 MiB) refuses a Unicode class repeated 1000 times (``\pL{1000}``), which
# Go compiles; RE2 allocates its DFA cache lazily, so a larger bound costs only the patterns that use it.
_MAX_MEM = 64 << 20
# Scripts of Unicode 16, which Go's unicode tables have and RE2's do not yet.
_SCRIPTS_RE2_LACKS = frozenset({
    "Garay", "Gurung_Khema", "Kirat_Rai", "Ol_Onal", "Sunuwar", "Todhri", "Tulu_Tigalari",
})


class RegexError(ValueError):
    """A pattern Go's regexp refuses: ``error parsing regexp: <code>: `<text>```."""


class UnsupportedRegex(ValueError):
    """A pattern Go accepts that this evaluator cannot run."""


def _error(code: str, text: str) -> RegexError:
    return RegexError(f"error parsing regexp: {code}: `{text}`")


# Each parsed atom carries the chains of ``{n,m}`` counts nested in it, outermost first, for
# Go's check of nested repetition sizes (parse.go's repeatIsValid).
_Chains = list[tuple[int, ...]]


class _Validator:
    """Go's parser (regexp/syntax/parse.go) reduced to what it refuses."""

    def __init__(self, pattern: str) -> None:
        self.s = pattern
        self.i = 0

    def peek(self, n: int = 1) -> str:
        return self.s[self.i:self.i + n]

    def validate(self) -> None:
        self.sequence(depth=0)
        if self.i < len(self.s):  # a ``)`` with no group open
            raise _error("unexpected )", self.s)

    def sequence(self, depth: int) -> _Chains:
        """Alternatives up to the ``)`` closing the current group (not consumed) or the end; the
        repetition chains inside them."""
        chains: _Chains = []
        last_atom: _Chains | None = None  # what a repetition operator would apply to
        last_repeat = ""
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == ")":
                if depth == 0:
                    raise _error("unexpected )", self.s)
                break
            if c == "|":
                self.i += 1
                last_atom, last_repeat = None, ""
                continue
            if c in "*+?" or (c == "{" and _REPEAT.match(self.s, self.i) is not None):
                start = self.i
                counted = self.repetition()
                op_text = self.s[start:self.i]
                if last_repeat:
                    raise _error("invalid nested repetition operator", last_repeat + op_text)
                if last_atom is None:
                    raise _error("missing argument to repetition operator", op_text)
                if counted is not None:
                    _check_nested_repeats(counted, last_atom, op_text)
                    chains.extend((counted[1],) + chain for chain in last_atom)
                    chains.append((counted[1],))
                if self.peek() == "?":
                    self.i += 1
                    op_text += "?"
                last_repeat = op_text
                last_atom = None
                continue
            last_repeat = ""
            if c == "(":
                inner, is_atom = self.group()
                chains.extend(inner)
                last_atom = inner if is_atom else None
                continue
            self.atom()
            last_atom = []
        return chains

    def repetition(self) -> tuple[int, int] | None:
        """Consumes a repetition operator; for ``{n}``, ``{n,}`` or ``{n,m}``, (the larger of its
        counts, the count Go's repeatIsValid weighs it by)."""
        if self.s[self.i] != "{":
            self.i += 1
            return None
        start = self.i
        found = _REPEAT.match(self.s, start)
        assert found is not None
        low = int(found.group(1))
        high = low if found.group(2) is None else (int(found.group(3)) if found.group(3) else -1)
        self.i = found.end()
        if low > _MAX_REPEAT or high > _MAX_REPEAT or (high >= 0 and high < low):
            raise _error("invalid repeat count", self.s[start:self.i])
        return max(low, high), (low if high < 0 else high)

    def group(self) -> tuple[_Chains, bool]:
        """A group at ``(``: (the repetition chains inside it, whether it can be repeated)."""
        start = self.i
        self.i += 1
        if self.peek(2) == "?P" and self.s[self.i + 2:self.i + 3] == "<" or self.peek(2) == "?<":
            self.i += 3 if self.peek(2) == "?P" else 2
            end = self.s.find(">", self.i)
            if end < 0:
                raise _error("invalid named capture", self.s[start:])
            if not re.fullmatch(r"[0-9A-Za-z_]+", self.s[self.i:end]):
                raise _error("invalid named capture", self.s[start:end + 1])
            self.i = end + 1  # Go allows one name twice
        elif self.peek() == "?":
            self.i += 1
            negated, seen = False, False
            while True:
                if self.i >= len(self.s):
                    raise _error("invalid or unsupported Perl syntax", self.s[start:])
                c = self.s[self.i]
                self.i += 1
                if c in "imsU":
                    seen = True
                elif c == "-" and not negated:
                    negated, seen = True, False
                elif c == ")" and not (negated and not seen):
                    return [], False  # flags for the rest of the enclosing group
                elif c == ":" and not (negated and not seen):
                    break
                else:
                    raise _error("invalid or unsupported Perl syntax", self.s[start:self.i])
        chains = self.sequence(depth=1)
        if self.i >= len(self.s):
            raise _error("missing closing )", self.s)
        self.i += 1
        return chains, True

    def atom(self) -> None:
        c = self.s[self.i]
        if c == "[":
            self.char_class()
            return
        self.i += 1
        if c == "\\":
            self.escape()

    def escape(self) -> None:
        """The escape after a ``\\`` outside a class."""
        if self.i >= len(self.s):
            raise _error("trailing backslash at end of expression", "")
        c = self.s[self.i]
        if c in "AzbB":
            self.i += 1
        elif c == "Q":
            end = self.s.find("\\E", self.i + 1)
            self.i = len(self.s) if end < 0 else end + 2
        elif not self.perl_class():
            self.escaped_char()

    def perl_class(self) -> bool:
        """Consumes ``\\d``, ``\\pL`` and the like at the current escape; False if it is none."""
        c = self.s[self.i]
        if c.lower() in _PERL_CLASSES:
            self.i += 1
            return True
        if c not in "pP":
            return False
        start = self.i - 1
        self.i += 1
        if self.peek() == "{":
            end = self.s.find("}", self.i)
            if end < 0:
                raise _error("invalid character class range", self.s[start:])
            self.i = end + 1
        else:
            self.i += 1
        escape = self.s[start:self.i]
        if escape.lstrip("\\pP{^").rstrip("}") in _SCRIPTS_RE2_LACKS:
            raise UnsupportedRegex(f"the Unicode class {escape} is not supported by this evaluator")
        # Otherwise Go's tables (unicode.Categories, unicode.Scripts) and RE2's name the same
        # classes: RE2 says whether it knows the name.
        if not _knows_unicode_class(escape):
            raise _error("invalid character class range", escape)
        return True

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

    def char_class(self) -> None:
        """A ``[...]`` class: its POSIX names, escapes and the order of its ranges."""
        start = self.i
        self.i += 1
        if self.peek() == "^":
            self.i += 1
        first = True
        while True:
            if self.i >= len(self.s):
                raise _error("missing closing ]", self.s[start:])
            c = self.s[self.i]
            if c == "]" and not first:
                self.i += 1
                return
            first = False
            if c == "[" and self.peek(2) == "[:":
                end = self.s.find(":]", self.i + 2)
                if end >= 0:
                    if self.s[self.i + 2:end].removeprefix("^") not in _POSIX_CLASSES:
                        raise _error("invalid character class range", self.s[self.i:end + 2])
                    self.i = end + 2
                    continue
            if c == "\\" and self.i + 1 < len(self.s) and (self.s[self.i + 1].lower() in _PERL_CLASSES
                                                            or self.s[self.i + 1] in "pP"):
                self.i += 1
                self.perl_class()
                continue
            range_start = self.i
            low = self.class_char()
            if self.peek() == "-" and self.s[self.i + 1:self.i + 2] not in ("]", ""):
                self.i += 1
                if self.class_char() < low:
                    raise _error("invalid character class range", self.s[range_start:self.i])

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


def _check_nested_repeats(counted: tuple[int, int], inner: _Chains, op_text: str) -> None:
    """Go's repeatIsValid(re, 1000) for a ``{n,m}`` over an atom: along every chain of counted
    repetitions inside it, each count must fit in 1000 divided by the counts around it."""
    largest, weight = counted
    if largest < 2:
        return
    for chain in inner:
        budget = _MAX_REPEAT
        for count in (weight,) + chain:
            if count == 0:
                break
            if count > budget:
                raise _error("invalid repeat count", op_text)
            budget //= count


@functools.lru_cache(maxsize=256)
def _knows_unicode_class(escape: str) -> bool:
    try:
        re2.compile(escape, _options())
    except re2.error:
        return False
    return True


@functools.lru_cache(maxsize=1)
def _options() -> re2.Options:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.UTF8
    options.longest_match = False  # leftmost-first, as Go's regexp (not its POSIX variant)
    options.never_capture = True  # only whole matches are read
    options.log_errors = False
    options.max_mem = _MAX_MEM
    return options


@functools.lru_cache(maxsize=1024)
def compile_go(pattern: str) -> re2._Regexp:
    """The RE2 program of ``pattern`` once Go's regexp has accepted it; raises RegexError with
    Go's text, or UnsupportedRegex when RE2 cannot compile what Go accepts."""
    _Validator(pattern).validate()
    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        raise UnsupportedRegex(f"the pattern `{pattern}` cannot be run by this evaluator: {exc}") from None


# The programs search UTF-8 bytes: google-re2 converts every offset of a ``str`` search between
# characters and bytes in Python, which costs more than the search itself.


def find(text: str, pattern: str) -> str:
    """Go's ``FindString``: the leftmost match, or ''."""
    found = compile_go(pattern).search(text.encode())
    return found.group(0).decode() if found else ""


def find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    """Go's ``FindAllString(text, limit)``: successive matches, an empty match right after the
    previous match skipped; at most ``limit`` when it is not negative. A search from ``pos`` sees
    the whole text, so ``^`` and ``\\b`` read what precedes ``pos`` as Go's do."""
    compiled = compile_go(pattern)
    data = text.encode()
    out: list[str] = []
    pos, previous_end = 0, -1
    while (limit < 0 or len(out) < limit) and pos <= len(data):
        found = compiled.search(data, pos)
        if found is None:
            break
        accept = True
        if found.end() == pos:
            accept = found.start() != previous_end
            pos += _char_width(data, pos)
        else:
            pos = found.end()
        previous_end = found.end()
        if accept:
            out.append(found.group(0).decode())
    return out


def _char_width(data: bytes, pos: int) -> int:
    """The length of the UTF-8 character at ``pos`` (1 at the end, to step past it as Go does)."""
    lead = data[pos] if pos < len(data) else 0
    return 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


def matches(text: str, pattern: str) -> bool:
    """Go's ``MatchString``: whether the pattern matches anywhere in ``text``."""
    return compile_go(pattern).search(text.encode()) is not None
