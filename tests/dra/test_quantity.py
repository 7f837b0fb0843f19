"""Quantity parsing, rounding, arithmetic and canonical formatting as apimachinery does them."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.dra.quantity import QUANTITY_REGEX_ERROR, SUFFIX_ERROR, Format, Quantity

# (input, String(), exact value, format) — examples from apimachinery's quantity tests and docs.
CANONICAL = [
    ("1.5Gi", "1536Mi", Fraction(1610612736), Format.BINARY_SI),
    ("1000m", "1", Fraction(1), Format.DECIMAL_SI),
    ("0.5", "500m", Fraction(1, 2), Format.DECIMAL_SI),
    ("80Gi", "80Gi", Fraction(80 * 2**30), Format.BINARY_SI),
    ("100M", "100M", Fraction(10**8), Format.DECIMAL_SI),
    ("1e3", "1e3", Fraction(1000), Format.DECIMAL_EXPONENT),
    ("1E", "1E", Fraction(10**18), Format.DECIMAL_SI),
    ("1Ki", "1Ki", Fraction(1024), Format.BINARY_SI),
    ("8Ki", "8Ki", Fraction(8192), Format.BINARY_SI),
    ("1024Ki", "1Mi", Fraction(2**20), Format.BINARY_SI),
    ("1025Ki", "1025Ki", Fraction(1025 * 1024), Format.BINARY_SI),
    ("0.5Ki", "512", Fraction(512), Format.BINARY_SI),
    ("1.5Ki", "1536", Fraction(1536), Format.BINARY_SI),
    ("-1Gi", "-1Gi", Fraction(-(2**30)), Format.BINARY_SI),
    ("1.5k", "1500", Fraction(1500), Format.DECIMAL_SI),
    ("-1.5", "-1500m", Fraction(-3, 2), Format.DECIMAL_SI),
    (".5", "500m", Fraction(1, 2), Format.DECIMAL_SI),
    ("0.1n", "1n", Fraction(1, 10**9), Format.DECIMAL_SI),
    ("1e-12", "1e-9", Fraction(1, 10**9), Format.DECIMAL_EXPONENT),
    ("1e+3", "1e+3", Fraction(1000), Format.DECIMAL_EXPONENT),
    ("1000e0", "1e3", Fraction(1000), Format.DECIMAL_EXPONENT),
    ("0", "0", Fraction(0), Format.DECIMAL_SI),
    ("0Gi", "0", Fraction(0), Format.BINARY_SI),
    ("0.0Gi", "0", Fraction(0), Format.BINARY_SI),
    # apimachinery's TestQuantityParse: floating-point look-alikes, rounding, saturation, trolls.
    # kept verbatim: the int64 path reuses input whose scale is a multiple of 3 (quantity.go)
    ("100.035k", "100.035k", Fraction(100035), Format.DECIMAL_SI),
    ("0.0005k", "500m", Fraction(1, 2), Format.DECIMAL_SI),
    ("1.1E-9", "2e-9", Fraction(2, 10**9), Format.DECIMAL_EXPONENT),
    ("1.3E+6", "1300e3", Fraction(1300000), Format.DECIMAL_EXPONENT),
    ("3.001n", "4n", Fraction(4, 10**9), Format.DECIMAL_SI),
    ("0.00000012345", "124n", Fraction(124, 10**9), Format.DECIMAL_SI),
    ("9Ei", "9223372036854775807", Fraction(2**63 - 1), Format.BINARY_SI),
    ("9223372036854775807Ki", "9223372036854775807", Fraction(2**63 - 1), Format.BINARY_SI),
    ("100.035Ki", "102435840m", Fraction(10243584, 100), Format.BINARY_SI),
    ("0.5Mi", "512Ki", Fraction(524288), Format.BINARY_SI),
    ("0.000000000001Ki", "2n", Fraction(2, 10**9), Format.DECIMAL_SI),
    ("1.", "1.", Fraction(1), Format.DECIMAL_SI),  # kept verbatim, as "100.035k"
    ("1.G", "1.G", Fraction(10**9), Format.DECIMAL_SI),
    (".0001k", "100m", Fraction(1, 10), Format.DECIMAL_SI),
    ("12E", "12E", Fraction(12 * 10**18), Format.DECIMAL_SI),
    ("8Ei", "9223372036854775807", Fraction(2**63 - 1), Format.BINARY_SI),
    ("12345678901234567890", "12345678901234567890", Fraction(12345678901234567890), Format.DECIMAL_SI),
    ("1.0000000001", "1000000001n", Fraction(1000000001, 10**9), Format.DECIMAL_SI),
]


@pytest.mark.parametrize(("text", "shown", "exact", "fmt"), CANONICAL, ids=[c[0] for c in CANONICAL])
def test_parse_keeps_exact_value_and_prints_canonical_form(text: str, shown: str, exact: Fraction, fmt: Format) -> None:
    q = Quantity.parse(text)
    assert q.as_fraction() == exact
    assert str(q) == shown
    assert q.format is fmt


# apimachinery's TestQuantityString alternates: (text, String()).
ALTERNATES = [
    ("307200Ki", "300Mi"), ("1025024Mi", "1001Gi"), ("1024Gi", "1Ti"), ("5000m", "5"), ("1000M", "1G"),
    ("0.001T", "1G"), ("1000u", "1m"), ("1.08", "1080m"), ("1080000000n", "1080m"), (".001e12", "1e9"),
    ("0.001e0", "1e-3"), ("1000e-12", "1e-9"), ("3e8", "300e6"), ("00", "0"),
    # CanonicalizeBytes keeps BinarySI for an exact integer and divides it by 1024 only while that
    # stays exact: 14,400,000 is 14062.5Ki, so it prints without a suffix (and then reads as DecimalSI)
    ("14062.5Ki", "14400000"), ("14400000", "14400k"),
]


@pytest.mark.parametrize(("text", "shown"), ALTERNATES, ids=[c[0] for c in ALTERNATES])
def test_non_canonical_text_prints_canonically(text: str, shown: str) -> None:
    assert str(Quantity.parse(text)) == shown


INVALID = [
    ("1.1.M", QUANTITY_REGEX_ERROR),
    ("1+1.0M", QUANTITY_REGEX_ERROR),
    ("aoeu", QUANTITY_REGEX_ERROR),
    (" 1", QUANTITY_REGEX_ERROR),
    ("1 ", QUANTITY_REGEX_ERROR),
    ("", QUANTITY_REGEX_ERROR),
    ("1e3M", QUANTITY_REGEX_ERROR),
    ("0.1mi", SUFFIX_ERROR),
    (".5i", SUFFIX_ERROR),
    ("1i", SUFFIX_ERROR),
    ("-3.01i", SUFFIX_ERROR),
    ("-3.01e-", SUFFIX_ERROR),
    ("1K", SUFFIX_ERROR),
    ("1e", SUFFIX_ERROR),
]


@pytest.mark.parametrize(("text", "message"), INVALID, ids=[repr(c[0]) for c in INVALID])
def test_invalid_text_is_refused_with_upstream_message(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        Quantity.parse(text)
    assert str(err.value) == message


@pytest.mark.parametrize("value", [True, None, [1], float("nan")], ids=["bool", "none", "list", "nan"])
def test_non_quantity_values_are_refused(value: object) -> None:
    with pytest.raises(ValueError):
        Quantity.parse(value)


def test_huge_decimal_exponent_is_refused_instead_of_expanded() -> None:
    with pytest.raises(ValueError, match="out of the supported range"):
        Quantity.parse("1e100000")


@pytest.mark.parametrize(("value", "shown"), [(5, "5"), (1.5, "1500m"), (0, "0"), (-3, "-3")],
                         ids=["int", "float", "zero", "negative"])
def test_yaml_numbers_parse_like_their_json_text(value: int | float, shown: str) -> None:
    assert str(Quantity.parse(value)) == shown


ROUNDING = [
    ("1.5", 2, 1500),
    ("1.2", 2, 1200),
    ("-1.5", -2, -1500),
    ("1n", 1, 1),
    ("-1n", -1, -1),
    ("2", 2, 2000),
    ("1500m", 2, 1500),
    ("0.0001", 1, 1),
]


@pytest.mark.parametrize(("text", "value", "milli"), ROUNDING, ids=[c[0] for c in ROUNDING])
def test_value_and_milli_value_round_away_from_zero(text: str, value: int, milli: int) -> None:
    q = Quantity.parse(text)
    assert q.value() == value
    assert q.milli_value() == milli


def test_equal_values_in_different_suffixes_compare_equal_and_hash_alike() -> None:
    assert Quantity.parse("1Gi") == Quantity.parse("1024Mi")
    assert hash(Quantity.parse("1Gi")) == hash(Quantity.parse("1073741824"))
    assert Quantity.parse("1k") == Quantity.parse("1000")
    assert Quantity.parse("1G") != Quantity.parse("1Gi")


ORDER = [("1Gi", "1G", 1), ("1G", "1Gi", -1), ("500m", "0.5", 0), ("-1", "0", -1), ("1n", "0", 1)]


@pytest.mark.parametrize(("left", "right", "expected"), ORDER, ids=[f"{c[0]}-vs-{c[1]}" for c in ORDER])
def test_cmp_orders_by_value(left: str, right: str, expected: int) -> None:
    assert Quantity.parse(left).cmp(Quantity.parse(right)) == expected
    assert (Quantity.parse(left) < Quantity.parse(right)) is (expected < 0)


ARITHMETIC = [
    ("add", "1Gi", "512Mi", "1536Mi"),
    ("add", "0", "1Gi", "1Gi"),  # a zero receiver takes the other's format
    ("add", "1", "1Gi", "1073741825"),  # a non-zero receiver keeps DecimalSI
    ("sub", "1Gi", "512Mi", "512Mi"),
    ("sub", "1", "1500m", "-500m"),
    ("add", "1e3", "1", "1001"),
]


@pytest.mark.parametrize(("op", "left", "right", "shown"), ARITHMETIC, ids=[f"{c[0]}-{c[1]}-{c[2]}" for c in ARITHMETIC])
def test_add_and_sub_are_exact_and_keep_the_receiver_format(op: str, left: str, right: str, shown: str) -> None:
    a, b = Quantity.parse(left), Quantity.parse(right)
    result = a.add(b) if op == "add" else a.sub(b)
    assert str(result) == shown


def test_sign_integer_and_float_helpers() -> None:
    assert Quantity.parse("-2").sign() == -1
    assert Quantity.parse("0").sign() == 0
    assert Quantity.parse("1m").sign() == 1
    assert Quantity.parse("2Gi").is_integer()
    assert not Quantity.parse("1.5").is_integer()
    assert not Quantity.parse("10E").is_integer()  # beyond int64
    assert Quantity.parse("1.5").as_approximate_float() == 1.5
    assert Quantity.parse("80Gi").as_approximate_float() == 85899345920.0


def test_from_int_is_decimal_si() -> None:
    q = Quantity.from_int(2048)
    assert str(q) == "2048" and q.format is Format.DECIMAL_SI


SUFFIXES = ["", "m", "k", "M", "G", "Ki", "Mi", "Gi", "Ti", "n", "u"]


@settings(max_examples=150, deadline=None)
@given(st.integers(min_value=-(10**12), max_value=10**12), st.integers(min_value=0, max_value=4),
       st.sampled_from(SUFFIXES))
def test_canonical_text_parses_back_to_the_same_value(digits: int, decimals: int, suffix: str) -> None:
    magnitude = str(abs(digits))
    if decimals and len(magnitude) > decimals:
        magnitude = magnitude[:-decimals] + "." + magnitude[-decimals:]
    text = ("-" if digits < 0 else "") + magnitude + suffix
    q = Quantity.parse(text)
    again = Quantity.parse(str(q))
    assert again == q
    # printing may change the format once (a BinarySI value no power of 1024 divides prints as a
    # plain integer, which parses back as DecimalSI: "14062.5Ki" -> "14400000" -> "14400k"), never twice
    assert str(Quantity.parse(str(again))) == str(again)


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=-(10**15), max_value=10**15), st.integers(min_value=-(10**15), max_value=10**15))
def test_add_then_sub_returns_to_start(a: int, b: int) -> None:
    qa, qb = Quantity(a), Quantity(b)
    assert qa.add(qb).sub(qb) == qa
    assert qa.add(qb).cmp(qa) == (b > 0) - (b < 0)
