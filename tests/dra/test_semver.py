"""Semantic versions: blang/semver parsing, the API server's semver.org check and precedence."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.dra.semver import Semver, is_semver_spec, normalize_semver

VALID = [
    ("1.2.3", (1, 2, 3)),
    ("0.0.0", (0, 0, 0)),
    ("580.105.8", (580, 105, 8)),
    ("1.2.3-alpha.1+build.7", (1, 2, 3)),
    ("1.0.0-0.3.7", (1, 0, 0)),
    ("1.0.0-x-y-z.--", (1, 0, 0)),
    ("1.0.0+21AF26D3----117B344092BD", (1, 0, 0)),
    ("18446744073709551615.0.0", (2**64 - 1, 0, 0)),
]


@pytest.mark.parametrize(("text", "core"), VALID, ids=[c[0] for c in VALID])
def test_valid_versions_parse_and_print_as_written(text: str, core: tuple[int, int, int]) -> None:
    v = Semver.parse(text)
    assert (v.major, v.minor, v.patch) == core
    assert str(v) == text
    assert is_semver_spec(text)


INVALID = [
    ("", "Version string empty"),
    ("1.2", "No Major.Minor.Patch elements found"),
    ("v1.2.3", 'Invalid character(s) found in major number "v1"'),
    ("01.2.3", 'Major number must not contain leading zeroes "01"'),
    ("1.02.3", 'Minor number must not contain leading zeroes "02"'),
    ("1.2.03", 'Patch number must not contain leading zeroes "03"'),
    ("1.2.x", 'Invalid character(s) found in patch number "x"'),
    ("1.2.3-", "Prerelease is empty"),
    ("1.2.3-a..b", "Prerelease is empty"),
    ("1.2.3-01", 'Numeric PreRelease version must not contain leading zeroes "01"'),
    ("1.2.3-a_b", 'Invalid character(s) found in prerelease "a_b"'),
    ("1.2.3+", "Build meta data is empty"),
    ("1.2.3+a#", 'Invalid character(s) found in build meta data "a#"'),
    ("1..3", 'strconv.ParseUint: parsing "": invalid syntax'),
]


@pytest.mark.parametrize(("text", "message"), INVALID, ids=[repr(c[0]) for c in INVALID])
def test_invalid_versions_are_refused_with_blang_message(text: str, message: str) -> None:
    with pytest.raises(ValueError) as err:
        Semver.parse(text)
    assert str(err.value) == message
    assert not is_semver_spec(text)


def test_version_admitted_by_api_server_can_still_fail_in_cel() -> None:
    text = "18446744073709551616.0.0"  # one above uint64
    assert is_semver_spec(text)
    with pytest.raises(ValueError, match="value out of range"):
        Semver.parse(text)


def test_precedence_follows_semver_spec_example() -> None:
    # The ordering example from semver.org section 11.
    ordered = ["1.0.0-alpha", "1.0.0-alpha.1", "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2",
               "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1", "1.1.0", "2.0.0"]
    parsed = [Semver.parse(v) for v in ordered]
    for earlier, later in zip(parsed, parsed[1:], strict=False):
        assert earlier.compare(later) == -1
        assert later.compare(earlier) == 1
        assert earlier < later


def test_build_metadata_does_not_affect_precedence() -> None:
    assert Semver.parse("1.2.3+a").compare(Semver.parse("1.2.3+b")) == 0
    assert Semver.parse("1.2.3+a") == Semver.parse("1.2.3")


NORMALIZE = [("v1.2.3", "1.2.3"), ("1", "1.0.0"), ("v1.02", "1.2.0"), ("1.0-rc.1", "1.0.0-rc.1"), ("01.2.3", "1.2.3")]


@pytest.mark.parametrize(("text", "normal"), NORMALIZE, ids=[c[0] for c in NORMALIZE])
def test_normalize_accepts_common_loose_forms(text: str, normal: str) -> None:
    assert normalize_semver(text) == normal
    Semver.parse(normalize_semver(text))


identifier = st.one_of(st.integers(min_value=0, max_value=50).map(str),
                       st.text(alphabet="abc-", min_size=1, max_size=3))
version = st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 3),
                    st.lists(identifier, max_size=3))


def _text(v: tuple[int, int, int, list[str]]) -> str:
    core = f"{v[0]}.{v[1]}.{v[2]}"
    return core + ("-" + ".".join(v[3]) if v[3] else "")


@settings(max_examples=150, deadline=None)
@given(version, version, version)
def test_ordering_is_a_total_order(a: tuple, b: tuple, c: tuple) -> None:  # type: ignore[type-arg]
    va, vb, vc = (Semver.parse(_text(x)) for x in (a, b, c))
    assert va.compare(vb) == -vb.compare(va)
    if va <= vb and vb <= vc:
        assert va <= vc
    assert (va.compare(vb) == 0) == (va == vb)
