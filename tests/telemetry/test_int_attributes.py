"""Integer attributes follow OpenTelemetry's attribute type mapping: within int64 an ``int_value``,
outside it the decimal text as a ``string_value``, exact either way and read back as the integer."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from audit.telemetry import otlpwire
from audit.telemetry.attributes import INT64_MAX, INT64_MIN, int_from_otlp, otlp_int

EDGES = [INT64_MIN - 1, INT64_MIN, -1, 0, 2**53 + 1, INT64_MAX, INT64_MAX + 1, 2**64 - 1, 2**64]
integers = st.sampled_from(EDGES) | st.integers(min_value=-(2**130), max_value=2**130)


@given(integers)
def test_any_integer_is_written_as_the_mapping_says_and_read_back_exactly(n: int) -> None:
    written = AnyValue.FromString(otlpwire.any_value(n))
    assert written == (AnyValue(int_value=n) if INT64_MIN <= n <= INT64_MAX else AnyValue(string_value=str(n)))
    assert otlp_int(n) == getattr(written, written.WhichOneof("value"))
    assert int_from_otlp(otlp_int(n)) == n


@pytest.mark.parametrize(
    ("sent", "why"),
    [("5", "is text, but an integer within int64 travels as int_value"),
     (str(INT64_MIN), "is text, but an integer within int64 travels as int_value"),
     ("+9223372036854775808", "is not an integer (an integer outside int64 travels as its decimal text)"),
     ("09223372036854775808", "is not an integer (an integer outside int64 travels as its decimal text)"),
     (" 9223372036854775808", "is not an integer (an integer outside int64 travels as its decimal text)"),
     ("9" * 41, "is not an integer (an integer outside int64 travels as its decimal text)"),
     (9.3e18, "is a float, not an integer"),
     (False, "is a bool, not an integer")],
    ids=["small-as-text", "int64-min-as-text", "plus-sign", "leading-zero", "space", "past-128-bits", "float", "bool"],
)
def test_anything_but_what_the_mapping_writes_is_not_read_as_an_integer(sent: object, why: str) -> None:
    with pytest.raises(ValueError) as refused:
        int_from_otlp(sent)
    assert str(refused.value) == why
