"""Kubernetes ``resource.Quantity`` with the exact parsing, rounding and formatting of apimachinery.

Capacities, counters and capacity requests in DRA objects are quantities such as ``80Gi``,
``1500m`` or ``1e3``. Allocation compares and sums them, so their value must be exact: a quantity
is held as an integer number of nano-units, which is lossless because apimachinery itself rounds
every parsed value up to a multiple of 10^-9 ("if you want some resources, you should get some
resources"). The suffix family (BinarySI, DecimalSI, DecimalExponent) is kept for formatting, as
``Quantity.String()`` does: ``1.5Gi`` prints as ``1536Mi``, ``0.5`` as ``500m``.

Behaviour follows ``k8s.io/apimachinery/pkg/api/resource`` (quantity.go, suffix.go, amount.go):
the hand-written scanner ``parseQuantityString``, the suffix table, the int64 "fast path" that
keeps an already canonical input string verbatim, the cap of BinarySI values at 2^63-1, and
``Value()`` rounding away from zero. Deliberate limits: ``asApproximateFloat`` is the correctly
rounded float of the exact value (Go may differ in the last bit), ``is_integer`` is decided by the
value (Go's ``AsInt64`` also answers false for integral values it holds at a fractional scale, such
as ``1000m``), and decimal exponents beyond +/-1000 are refused instead of building huge numbers.
"""

from __future__ import annotations

import math
from enum import StrEnum
from fractions import Fraction
from typing import Any

__all__ = ["Format", "Quantity", "QUANTITY_REGEX_ERROR", "SUFFIX_ERROR"]

# Error texts of apimachinery (quantity.go: ErrFormatWrong, ErrSuffix, ErrNumeric).
QUANTITY_REGEX_ERROR = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
SUFFIX_ERROR = "unable to parse quantity's suffix"

_NANO = 10**9
_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)
# apimachinery keeps 18 decimal digits in its int64 fast path (maxInt64Factors).
_MAX_INT64_FACTORS = 18
_MAX_ABS_EXPONENT = 1000
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")


class Format(StrEnum):
    """The suffix family a quantity is printed in (``resource.Format``)."""

    DECIMAL_EXPONENT = "DecimalExponent"
    BINARY_SI = "BinarySI"
    DECIMAL_SI = "DecimalSI"


_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT = {0: "", **{e: s for s, e in _BINARY_SUFFIXES.items()}}


def _split(text: str) -> tuple[bool, str, str, str]:
    """``parseQuantityString``: (positive, numerator digits, denominator digits, suffix)."""
    positive = True
    pos = 0
    end = len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos] or "0"
    denom = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise ValueError(QUANTITY_REGEX_ERROR)
    return positive, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, Format]:
    """``suffixHandler.interpret``: (base, exponent, format) of a suffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], Format.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], Format.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if not body or not body.isdigit() or not body.isascii():
            raise ValueError(SUFFIX_ERROR)
        exponent = int(digits)
        if abs(exponent) > _MAX_ABS_EXPONENT:
            raise ValueError(f"quantity exponent {exponent} is out of the supported range +/-{_MAX_ABS_EXPONENT}")
        return 10, exponent, Format.DECIMAL_EXPONENT
    raise ValueError(SUFFIX_ERROR)


def _ceil_away(numerator: int, denominator: int) -> int:
    """Divide, rounding any remainder away from zero (inf.RoundUp)."""
    q, r = divmod(abs(numerator), denominator)
    if r:
        q += 1
    return -q if numerator < 0 else q


def _strip_factor(value: int, base: int) -> tuple[int, int]:
    """``removeInt64Factors``: divide out ``base`` while it divides evenly; (rest, times)."""
    magnitude, times = abs(value), 0
    while magnitude >= base and magnitude % base == 0:
        magnitude //= base
        times += 1
    return (-magnitude if value < 0 else magnitude), times


class Quantity:
    """An exact, immutable Kubernetes quantity; equality and order follow ``Cmp``.

    Build one with ``parse`` or ``from_int``; the constructor takes the value in nano-units."""

    __slots__ = ("_nanos", "_format", "_text")

    def __init__(self, nanos: int, fmt: Format = Format.DECIMAL_SI, text: str | None = None) -> None:
        self._nanos = nanos
        self._format = fmt
        self._text = text

    # --- construction -------------------------------------------------------------------
    @classmethod
    def parse(cls, value: Any) -> Quantity:
        """Parse like ``resource.ParseQuantity``; ints and floats are read from their JSON text."""
        if isinstance(value, Quantity):
            return value
        if isinstance(value, bool):
            raise ValueError(QUANTITY_REGEX_ERROR)
        if isinstance(value, int):
            value = str(value)
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(QUANTITY_REGEX_ERROR)
            value = repr(value)
        if not isinstance(value, str) or not value:
            raise ValueError(QUANTITY_REGEX_ERROR)
        if value == "0":
            return cls(0, Format.DECIMAL_SI, "0")
        positive, num, denom, suffix = _split(value)
        base, exponent, fmt = _interpret(suffix)
        fast = _fast_path(value, positive, num, denom, base, exponent, fmt)
        if fast is not None:
            return fast
        return _slow_path(positive, num, denom, base, exponent, fmt)

    @classmethod
    def from_int(cls, value: int, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        """``resource.NewQuantity(value, format)``."""
        return cls(value * _NANO, fmt)

    # --- values -------------------------------------------------------------------------
    @property
    def format(self) -> Format:
        return self._format

    @property
    def nanos(self) -> int:
        """The exact value in units of 10^-9."""
        return self._nanos

    def as_fraction(self) -> Fraction:
        return Fraction(self._nanos, _NANO)

    def value(self) -> int:
        """``Value()``: the value rounded up (away from zero) to an integer."""
        return _ceil_away(self._nanos, _NANO)

    def milli_value(self) -> int:
        """``MilliValue()``: the value in thousandths, rounded away from zero."""
        return _ceil_away(self._nanos, 10**6)

    def as_approximate_float(self) -> float:
        return self._nanos / _NANO if abs(self._nanos) < 2**53 else float(self.as_fraction())

    def is_integer(self) -> bool:
        """True when the value is a whole number that fits an int64."""
        return self._nanos % _NANO == 0 and _INT64_MIN <= self._nanos // _NANO <= _INT64_MAX

    def is_zero(self) -> bool:
        return self._nanos == 0

    def sign(self) -> int:
        return (self._nanos > 0) - (self._nanos < 0)

    # --- arithmetic and order -------------------------------------------------------------
    def add(self, other: Quantity) -> Quantity:
        """``Add``: the receiver keeps its format unless it is zero (then it takes ``other``'s)."""
        fmt = other._format if self._nanos == 0 else self._format
        return Quantity(self._nanos + other._nanos, fmt)

    def sub(self, other: Quantity) -> Quantity:
        fmt = other._format if self._nanos == 0 else self._format
        return Quantity(self._nanos - other._nanos, fmt)

    def neg(self) -> Quantity:
        return Quantity(-self._nanos, self._format)

    def cmp(self, other: Quantity) -> int:
        return (self._nanos > other._nanos) - (self._nanos < other._nanos)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self._nanos == other._nanos

    def __lt__(self, other: Quantity) -> bool:
        return self._nanos < other._nanos

    def __le__(self, other: Quantity) -> bool:
        return self._nanos <= other._nanos

    def __gt__(self, other: Quantity) -> bool:
        return self._nanos > other._nanos

    def __ge__(self, other: Quantity) -> bool:
        return self._nanos >= other._nanos

    def __hash__(self) -> int:
        return hash(("Quantity", self._nanos))

    # --- formatting -------------------------------------------------------------------------
    def __str__(self) -> str:
        if self._text is not None:
            return self._text
        return _canonical(self._nanos, self._format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


def _fast_path(
    text: str, positive: bool, num: str, denom: str, base: int, exponent: int, fmt: Format
) -> Quantity | None:
    """apimachinery's int64 path: exact small values, keeping ``text`` when it is canonical."""
    if fmt is Format.BINARY_SI:
        if exponent < 0 or denom:
            return None
        # "1Mi (2^20) has ~6 digits of decimal precision" (quantity.go)
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
        scale = 0
        multiplier = 1 << exponent
    else:
        precision = _MAX_INT64_FACTORS - (len(num) + len(denom))
        scale = exponent - len(denom)
        multiplier = 1
    if precision < 0 or scale < -9:
        return None
    shifted = num + denom
    digits = int(shifted)
    result = digits * multiplier
    if result > _INT64_MAX:
        return None
    if not positive:
        result = -result
    nanos = result * 10 ** (scale + 9)
    if fmt is Format.BINARY_SI:
        canonical_text = exponent % 10 == 0 and (digits & 0x07) != 0
    else:
        canonical_text = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
    return Quantity(nanos, fmt, text if canonical_text else None)


def _slow_path(positive: bool, num: str, denom: str, base: int, exponent: int, fmt: Format) -> Quantity:
    """apimachinery's inf.Dec path: exact value rounded up to nano; BinarySI is capped at 2^63-1 and
    becomes DecimalSI below 1."""
    digits = int(num + denom)
    if base == 10:
        shift = exponent - len(denom) + 9
        if shift >= 0:
            magnitude = digits * 10**shift
        elif -shift > len(num) + len(denom) + 1:
            magnitude = 1 if digits else 0  # far below 1n: rounds up to the smallest unit
        else:
            magnitude = _ceil_away(digits, 10**-shift)
    else:
        magnitude = _ceil_away(digits * (1 << exponent) * _NANO, 10 ** len(denom))
        if magnitude > _INT64_MAX * _NANO:
            magnitude = _INT64_MAX * _NANO
        if 0 < magnitude < _NANO:
            fmt = Format.DECIMAL_SI  # "This avoids rounding and hopefully confusion, too." (quantity.go)
    return Quantity(magnitude if positive else -magnitude, fmt)


def _canonical(nanos: int, fmt: Format) -> str:
    """``CanonicalizeBytes``: the shortest exact text in the quantity's suffix family."""
    if nanos == 0:
        return "0"
    if fmt is Format.BINARY_SI and (abs(nanos) < 1024 * _NANO or nanos % _NANO != 0):
        # Small values and values with a fraction are shown in DecimalSI to avoid rounding.
        fmt = Format.DECIMAL_SI
    if fmt is Format.BINARY_SI:
        mantissa, times = _strip_factor(nanos // _NANO, 1024)
        exponent = times * 10
        if exponent > 60:
            # Beyond Ei no suffix exists; keep the value exact in Ei.
            mantissa *= 1024 ** ((exponent - 60) // 10)
            exponent = 60
        return f"{mantissa}{_BINARY_BY_EXPONENT[exponent]}"
    mantissa, times = _strip_factor(nanos, 10)
    exponent = times - 9
    remainder = exponent % 3  # floor modulo: move down to the next multiple of 3
    mantissa *= 10**remainder
    exponent -= remainder
    if fmt is Format.DECIMAL_EXPONENT:
        return f"{mantissa}e{exponent}" if exponent else str(mantissa)
    if exponent > 18:
        # DecimalSI has no suffix above E (10^18); keep the value exact in E.
        mantissa *= 10 ** (exponent - 18)
        exponent = 18
    return f"{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"
