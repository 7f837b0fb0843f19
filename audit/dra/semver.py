"""Semantic versions (semver.org 2.0.0) as DRA version attributes use them.

Two checks exist upstream and both are reproduced: the API server admits a version attribute when
it matches the semver.org regular expression (``is_semver_spec``), and the CEL environment parses
it with ``blang/semver/v4`` ``Parse`` (``Semver.parse``), which additionally refuses numbers that
do not fit uint64. An attribute can therefore pass admission and still fail in a selector. Error
texts are blang's. Ordering follows semver precedence; build metadata is ignored for ordering.
"""

from __future__ import annotations

import re
from functools import total_ordering

__all__ = ["Semver", "is_semver_spec", "normalize_semver"]

_UINT64_MAX = 2**64 - 1
_NUMBERS = frozenset("0123456789")
_ALPHANUM = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-")

# The regular expression recommended by semver.org, which the API server uses for version attributes.
_SEMVER_SPEC = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?",
    re.ASCII,
)


def is_semver_spec(text: str) -> bool:
    """True when ``text`` matches the semver.org 2.0.0 grammar (no size limit on numbers)."""
    return _SEMVER_SPEC.fullmatch(text) is not None


def _only(text: str, allowed: frozenset[str]) -> bool:
    return all(ch in allowed for ch in text)


def _leading_zero(text: str) -> bool:
    return len(text) > 1 and text[0] == "0"


def _parse_uint(text: str) -> int:
    """``strconv.ParseUint(text, 10, 64)`` for a string already known to hold only digits."""
    if not text:
        raise ValueError('strconv.ParseUint: parsing "": invalid syntax')
    value = int(text)
    if value > _UINT64_MAX:
        raise ValueError(f'strconv.ParseUint: parsing "{text}": value out of range')
    return value


def _core_number(text: str, part: str) -> int:
    if not _only(text, _NUMBERS):
        raise ValueError(f"Invalid character(s) found in {part.lower()} number {_go_quote(text)}")
    if _leading_zero(text):
        raise ValueError(f"{part} number must not contain leading zeroes {_go_quote(text)}")
    return _parse_uint(text)


def _go_quote(text: str) -> str:
    """Go's ``%q`` for the printable ASCII strings that reach error messages."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


PreRelease = tuple[tuple[int, int | str], ...]


@total_ordering
class Semver:
    """A parsed version; ``str()`` gives the text it was parsed from."""

    __slots__ = ("major", "minor", "patch", "prerelease", "build", "_text")

    def __init__(self, major: int, minor: int, patch: int, prerelease: PreRelease, build: tuple[str, ...],
                 text: str) -> None:
        self.major = major
        self.minor = minor
        self.patch = patch
        # Identifiers as (0, number) or (1, text): numeric identifiers sort before alphanumeric ones.
        self.prerelease = prerelease
        self.build = build
        self._text = text

    @classmethod
    def parse(cls, text: str) -> Semver:
        """blang/semver ``Parse``: strict, no leading ``v``, no leading zeros, uint64 numbers."""
        if not isinstance(text, str):
            raise ValueError(f"version must be a string, not {type(text).__name__}")
        if not text:
            raise ValueError("Version string empty")
        parts = text.split(".", 2)
        if len(parts) != 3:
            raise ValueError("No Major.Minor.Patch elements found")
        major = _core_number(parts[0], "Major")
        minor = _core_number(parts[1], "Minor")
        rest = parts[2]
        build: list[str] = []
        prerelease: list[str] = []
        if "+" in rest:
            rest, meta = rest.split("+", 1)
            build = meta.split(".")
        if "-" in rest:
            rest, pre = rest.split("-", 1)
            prerelease = pre.split(".")
        patch = _core_number(rest, "Patch")
        pre_ids = tuple(_prerelease_identifier(p) for p in prerelease)
        for meta_id in build:
            if not meta_id:
                raise ValueError("Build meta data is empty")
            if not _only(meta_id, _ALPHANUM):
                raise ValueError(f"Invalid character(s) found in build meta data {_go_quote(meta_id)}")
        return cls(major, minor, patch, pre_ids, tuple(build), text)

    def compare(self, other: Semver) -> int:
        """-1, 0 or 1 by semver precedence (build metadata ignored)."""
        left = (self.major, self.minor, self.patch)
        right = (other.major, other.minor, other.patch)
        if left != right:
            return -1 if left < right else 1
        if self.prerelease == other.prerelease:
            return 0
        # A version without pre-release identifiers has higher precedence than one with them.
        if not self.prerelease:
            return 1
        if not other.prerelease:
            return -1
        for mine, theirs in zip(self.prerelease, other.prerelease, strict=False):
            if mine != theirs:
                return -1 if _id_key(mine) < _id_key(theirs) else 1
        return -1 if len(self.prerelease) < len(other.prerelease) else 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __lt__(self, other: Semver) -> bool:
        return self.compare(other) < 0

    def __hash__(self) -> int:
        return hash((self.major, self.minor, self.patch, self.prerelease))

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Semver({self._text!r})"


def _id_key(identifier: tuple[int, int | str]) -> tuple[int, int, str]:
    kind, value = identifier
    return (kind, value, "") if isinstance(value, int) else (kind, 0, value)


def _prerelease_identifier(text: str) -> tuple[int, int | str]:
    if not text:
        raise ValueError("Prerelease is empty")
    if _only(text, _NUMBERS):
        if _leading_zero(text):
            raise ValueError(f"Numeric PreRelease version must not contain leading zeroes {_go_quote(text)}")
        return (0, _parse_uint(text))
    if _only(text, _ALPHANUM):
        return (1, text)
    raise ValueError(f"Invalid character(s) found in prerelease {_go_quote(text)}")


def normalize_semver(text: str) -> str:
    """The lenient form of CEL ``semver(s, true)``: drop a leading ``v``, fill a missing minor or
    patch with 0 and strip leading zeros from the three numbers, then parse strictly."""
    body = text[1:] if text.startswith("v") else text
    cut = len(body)
    for marker in ("-", "+"):
        index = body.find(marker)
        if index != -1:
            cut = min(cut, index)
    core, suffix = body[:cut], body[cut:]
    numbers = core.split(".")
    if len(numbers) < 3:
        numbers += ["0"] * (3 - len(numbers))
    numbers = [n.lstrip("0") or "0" if n and _only(n, _NUMBERS) else n for n in numbers]
    return ".".join(numbers) + suffix
