"""The DRA selector CEL environment: device variable, Kubernetes libraries, errors and typing."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.dra.cel import (
    MAX_EXPRESSION_LENGTH,
    CelCompileError,
    CelDevice,
    CelEnvironment,
    CelOptions,
    CelRuntimeError,
    device_context,
)
from audit.dra.quantity import Quantity

NV = "gpu.nvidia.com"
H100_ATTRIBUTES = {
    "productName": {"string": "NVIDIA H100 80GB HBM3"},
    "architecture": {"string": "Hopper"},
    "index": {"int": 3},
    "mig": {"bool": False},
    "driverVersion": {"version": "580.105.8"},
    "cudaComputeCapability": {"version": "9.0.0"},
    "resource.kubernetes.io/pcieRoot": {"string": "pci0000:55"},
    "address": {"string": "10.0.0.5"},
    "endpoint": {"string": "https://gpu-3.example.com:8443/v1/status?verbose=1&zone=a&zone=b"},
}
H100_CAPACITY = {"memory": {"value": "80Gi"}, "example.com/slots": {"value": "4"}}


@pytest.fixture(scope="module")
def env() -> CelEnvironment:
    return CelEnvironment()


@pytest.fixture(scope="module")
def h100() -> CelDevice:
    return device_context(NV, H100_ATTRIBUTES, H100_CAPACITY, allow_multiple_allocations=True)


TRUE_OR_FALSE = [
    ("driver", 'device.driver == "gpu.nvidia.com"', True),
    ("string-attribute", 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"', True),
    ("unqualified-name-in-driver-domain", 'device.attributes["gpu.nvidia.com"].architecture.startsWith("Hop")', True),
    ("qualified-name-in-own-domain", 'device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:55"', True),
    ("int-attribute", 'device.attributes["gpu.nvidia.com"].index > 2', True),
    ("bool-attribute", 'device.attributes["gpu.nvidia.com"].mig', False),
    ("allow-multiple-allocations", "device.allowMultipleAllocations", True),
    ("unknown-domain-is-empty-map", 'size(device.attributes["other.example.com"]) == 0', True),
    ("has-on-unknown-domain", 'has(device.attributes["other.example.com"].x)', False),
    ("unknown-domain-is-not-in-attributes", '"other.example.com" in device.attributes', False),
    ("in-guard-short-circuits", '"other.example.com" in device.attributes && device.attributes["other.example.com"].x == 1', False),
    ("only-real-domains-counted", "size(device.attributes) == 2 && size(device.capacity) == 2", True),
    ("computed-unknown-domain-is-empty-map", 'size(device.attributes[device.driver + ".other"]) == 0', True),
    ("computed-known-domain", "device.attributes[device.driver].index == 3", True),
    ("has-present-key", 'has(device.attributes["gpu.nvidia.com"].index)', True),
    ("capacity-in-other-domain", 'device.capacity["example.com"].slots == quantity("4")', True),
    ("macro-over-domains", 'device.attributes.exists(d, d == "resource.kubernetes.io")', True),
    ("comprehension", '[1, 2, 3].all(x, x > 0)', True),
    # quantity library
    ("quantity-compareTo", 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0', True),
    ("quantity-compareTo-equal", 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("80Gi")) == 0', True),
    ("quantity-isGreaterThan", 'device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("80G"))', True),
    ("quantity-isLessThan", 'device.capacity["gpu.nvidia.com"].memory.isLessThan(quantity("80Gi"))', False),
    ("quantity-equality-by-value", 'device.capacity["gpu.nvidia.com"].memory == quantity("81920Mi")', True),
    ("quantity-inequality", 'device.capacity["gpu.nvidia.com"].memory != quantity("80G")', True),
    ("quantity-add-quantity", 'quantity("1Gi").add(quantity("1Gi")) == quantity("2Gi")', True),
    ("quantity-add-int", 'quantity("1k").add(24) == quantity("1024")', True),
    ("quantity-sub-quantity", 'sign(quantity("1").sub(quantity("1500m"))) == -1', True),
    ("quantity-sub-int", 'quantity("10").sub(3).asInteger() == 7', True),
    ("quantity-asInteger", 'device.capacity["gpu.nvidia.com"].memory.asInteger() == 85899345920', True),
    ("quantity-asApproximateFloat", 'quantity("1.5").asApproximateFloat() == 1.5', True),
    ("quantity-sign-is-a-global-function", 'sign(quantity("-2")) == -1 && sign(quantity("0")) == 0', True),
    ("quantity-isInteger", 'quantity("2").isInteger() && !quantity("1.5").isInteger()', True),
    ("isQuantity-true", 'isQuantity("1.5Gi")', True),
    ("isQuantity-false", 'isQuantity("1.5GiB")', False),
    # semver library
    ("semver-attribute-isGreaterThan", 'device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("550.54.15"))', True),
    ("semver-attribute-isLessThan", 'device.attributes["gpu.nvidia.com"].driverVersion.isLessThan(semver("580.105.8"))', False),
    ("semver-compareTo", 'device.attributes["gpu.nvidia.com"].cudaComputeCapability.compareTo(semver("8.0.0")) == 1', True),
    ("semver-major-minor-patch", 'semver("1.2.3").major() == 1 && semver("1.2.3").minor() == 2 && semver("1.2.3").patch() == 3', True),
    ("semver-prerelease-lower", 'semver("1.0.0-rc.1").isLessThan(semver("1.0.0"))', True),
    ("semver-equality-ignores-build", 'semver("1.0.0+a") == semver("1.0.0+b")', True),
    ("semver-normalize", 'semver("v1.2", true) == semver("1.2.0")', True),
    ("isSemver-true", 'isSemver("1.2.3-alpha")', True),
    ("isSemver-false", 'isSemver("v1.2.3")', False),
    ("isSemver-normalize", 'isSemver("v1.2", true)', True),
    # Kubernetes' string extension
    ("strings-lowerAscii", 'device.attributes["gpu.nvidia.com"].productName.lowerAscii().contains("h100")', True),
    ("strings-split", '"a,b".split(",").size() == 2', True),
    ("sets-contains", "sets.contains([1, 2, 3], [2])", True),
    ("includes-without-list-gate", 'device.attributes["gpu.nvidia.com"].index.includes(3)', True),
    ("string-indexOf-offset-past-end-finds-nothing", '"abcd".indexOf("d", 4) == -1 && "abcd".lastIndexOf("b", 5) == -1',
     True),
    ("string-indexOf-empty-needle-at-any-offset", '"abcd".indexOf("", 9) == 9', True),
    ("string-charAt-end-is-empty", '"abc".charAt(3) == ""', True),
    # cel-go's list extension and Kubernetes' list library
    ("list-indexOf", "[1, 2, 1].indexOf(1) == 0 && [1, 2, 1].lastIndexOf(1) == 2 && [1].indexOf(5) == -1", True),
    ("list-min-max", "[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3", True),
    ("list-isSorted", "[1, 2].isSorted() && ![2, 1].isSorted()", True),
    ("list-distinct-sort-reverse", "[3, 1, 1].distinct().sort().reverse() == [3, 1]", True),
    ("list-sortBy", '["bb", "a"].sortBy(s, size(s)) == ["a", "bb"]', True),
    ("list-flatten-slice-range", "[[1], [2, 3]].flatten().slice(1, 3) == [2, 3] && lists.range(2) == [0, 1]", True),
    ("list-first-last", "[1, 2].first().value() == 1 && [1, 2].last().value() == 2", True),
    ("distinct-quantities-by-value", 'size([quantity("1"), quantity("1000m")].distinct()) == 1', True),
    # optional types
    ("optional-field-present", 'device.attributes["gpu.nvidia.com"].?architecture.orValue("") == "Hopper"', True),
    ("optional-field-absent", 'device.attributes["gpu.nvidia.com"].?memory.orValue(0) == 0', True),
    ("optional-index", 'device.attributes["gpu.nvidia.com"][?"index"].value() == 3', True),
    ("optional-chain-through-absent", 'device.attributes["gpu.nvidia.com"].?nosuch.?x.hasValue()', False),
    ("optional-field-of-a-string-is-none", 'device.attributes["gpu.nvidia.com"].?architecture.?x.hasValue()', False),
    ("optional-unknown-domain-is-empty-map",
     'device.attributes.?other.hasValue() && !device.attributes[?"other"].?x.hasValue()', True),
    ("optional-capacity",
     'device.capacity["gpu.nvidia.com"].?memory.orValue(quantity("0")).isGreaterThan(quantity("40Gi"))', True),
    ("optional-list-index-out-of-range", "[1, 2][?5].orValue(0) == 0 && [1, 2][?1].orValue(0) == 2", True),
    ("optional-literal-entries",
     '[1, ?optional.none(), ?optional.of(2)] == [1, 2] && {?"a": optional.none(), "b": 1}.size() == 1', True),
    ("optional-optMap", "optional.of(1).optMap(x, x + 1).value() == 2", True),
    ("optional-optFlatMap", "optional.of(1).optFlatMap(x, optional.of(x + 1)).value() == 2", True),
    ("optional-or", "optional.none().or(optional.of(1)).value() == 1", True),
    ("optional-unwrap", "optional.unwrap([optional.of(1), optional.none()]) == [1]", True),
    # cel.bind and two-variable comprehensions
    ("cel-bind", 'cel.bind(i, device.attributes["gpu.nvidia.com"].index, i * i == 9)', True),
    ("cel-bind-nested", "cel.bind(a, 1, cel.bind(b, a + 1, b == 2))", True),
    ("two-variable-all-over-list", "[1, 2].all(i, v, i < v)", True),
    ("two-variable-exists-over-domains",
     'device.attributes.exists(domain, ids, domain == "resource.kubernetes.io" && "pcieRoot" in ids)', True),
    ("two-variable-inner-macro-rebinds-name", "[1, 2].all(i, v, [5].all(v, v > i))", True),
    ("two-variable-existsOne", "[1, 2].existsOne(i, v, v > 1)", True),
    ("transformList-with-filter", "[1, 2, 3].transformList(i, v, i > 0, v * 10) == [20, 30]", True),
    ("transformMap", '{"a": 1}.transformMap(k, v, v + 1) == {"a": 2}', True),
    ("transformMapEntry", '{"a": 1}.transformMapEntry(k, v, {v: k}) == {1: "a"}', True),
    # Kubernetes' IP and CIDR libraries
    ("ip-family", 'ip(device.attributes["gpu.nvidia.com"].address).family() == 4 && ip("::1").family() == 6', True),
    ("ip-equality-by-address", 'ip("2001:db8:0:0:0:0:0:1") == ip("2001:db8::1")', True),
    ("ip-predicates", 'ip("127.1.2.3").isLoopback() && ip("::").isUnspecified() && ip("fe80::1").isLinkLocalUnicast() '
     '&& ip("ff12::1").isLinkLocalMulticast() && ip("10.0.0.1").isGlobalUnicast()', True),
    ("ip-broadcast-is-not-global-unicast", 'ip("255.255.255.255").isGlobalUnicast()', False),
    ("isIP-refuses-ipv4-mapped-ipv6", 'isIP("::ffff:1.2.3.4")', False),
    ("isIP-refuses-zone-and-leading-zero", 'isIP("fe80::1%eth0") || isIP("010.0.0.1")', False),
    ("ip-isCanonical", 'ip.isCanonical("2001:db8::abcd") && !ip.isCanonical("2001:DB8::ABCD")', True),
    ("cidr-containsIP", 'cidr("10.0.0.0/8").containsIP(device.attributes["gpu.nvidia.com"].address)', True),
    ("cidr-containsIP-other-family", 'cidr("10.0.0.0/8").containsIP(ip("::1"))', False),
    ("cidr-containsCIDR", 'cidr("10.0.0.0/8").containsCIDR("10.1.0.0/16") && !cidr("10.1.0.0/16").containsCIDR("10.0.0.0/8")',
     True),
    ("cidr-equality-keeps-host-bits", 'cidr("10.0.0.1/8") == cidr("10.0.0.0/8")', False),
    ("cidr-masked-ip-prefixLength", 'cidr("10.0.0.1/8").masked() == cidr("10.0.0.0/8") && '
     'cidr("10.0.0.1/8").ip() == ip("10.0.0.1") && cidr("::1/128").prefixLength() == 128', True),
    ("string-of-ip-and-cidr-is-canonical", 'string(ip("2001:DB8:0:0:0:0:0:1")) == "2001:db8::1" && '
     'string(cidr("10.0.0.1/8").masked()) == "10.0.0.0/8"', True),
    ("isCIDR", 'isCIDR("10.0.0.0/8") && !isCIDR("10.0.0.0") && !isCIDR("10.0.0.0/08")', True),
    # Kubernetes' URL library
    ("url-parts", 'url(device.attributes["gpu.nvidia.com"].endpoint).getHostname() == "gpu-3.example.com" && '
     'url(device.attributes["gpu.nvidia.com"].endpoint).getPort() == "8443"', True),
    ("url-query-in-matrix-form", 'url(device.attributes["gpu.nvidia.com"].endpoint).getQuery() == '
     '{"verbose": ["1"], "zone": ["a", "b"]}', True),
    ("url-query-drops-semicolon-pairs", 'url("https://a.example.com/?a=1;b=2&c=3+4").getQuery() == {"c": ["3 4"]}', True),
    ("url-scheme-lower-cased-host-kept", 'url("HTTPS://Example.COM").getScheme() == "https" && '
     'url("HTTPS://Example.COM").getHost() == "Example.COM"', True),
    ("url-escaped-path", 'url("https://a.example.com/a b/%C3%BC").getEscapedPath() == "/a%20b/%C3%BC"', True),
    ("url-ipv6-host", 'url("https://[::1]:80/").getHost() == "[::1]:80" && url("https://[::1]:80/").getHostname() == "::1"',
     True),
    ("isURL-needs-absolute", 'isURL("/absolute") && !isURL("relative") && !isURL("https://a:b:c/")', True),
    # Kubernetes' regex library and matches, in Go's RE2 syntax
    ("regex-find", '"abc 123".find("[0-9]+") == "123" && "abc".find("x") == ""', True),
    ("regex-findAll-skips-empty-match-after-match", '"baaac".findAll("a*") == ["", "aaa", ""]', True),
    ("regex-findAll-limit", '"1 2 3".findAll("[0-9]", 2) == ["1", "2"] && "1 2".findAll("[0-9]", 0) == []', True),
    ("regex-matches-global-form", 'matches(device.attributes["gpu.nvidia.com"].productName, "^NVIDIA H100")', True),
    ("regex-dollar-is-end-of-text", '"y\\n".matches("y$")', False),
    ("regex-classes-are-ascii", '"\\u0660".matches("\\\\d") || "\\u00e9".matches("\\\\w") || "\\u000b".matches("\\\\s")', False),
    ("regex-brace-without-count-is-literal", '"a{,2}".find("a{,2}") == "a{,2}"', True),
    ("regex-ungreedy-flag-and-quoting", '"aaa".find("(?U)a+") == "a" && "a.b".find("\\\\Q.\\\\E") == "."', True),
    ("regex-posix-and-unicode-classes", '"ab1".find("[[:alpha:]]+") == "ab" && "\\u0391\\u03b3".find("\\\\p{Lu}") == "\\u0391"',
     True),
    ("regex-unicode-script-classes", '"a\\u03b3".find("\\\\p{Greek}") == "\\u03b3" && '
     '"\\u0391\\u03b3".find("\\\\p{^Greek}|\\\\P{Lu}") == "\\u03b3"', True),
    ("regex-case-folding-is-unicode", '"\\u212a".matches("(?i)k") && "\\u017f".matches("(?i)s")', True),
    ("regex-findAll-caret-only-at-line-starts", '"ab".findAll("^a|b") == ["a", "b"] && "a\\nb".findAll("(?m)^.") == ["a", "b"]',
     True),
    # cel-go's string format
    ("format-integers", '"%d|%x|%X|%o|%b".format([-12, 255, 255, 8, true]) == "-12|ff|FF|10|1"', True),
    ("format-fixed-groups-thousands", '"%f|%.2f".format([1234567.891, -1234.5]) == "1,234,567.891000|-1,234.50"', True),
    ("format-scientific-ignores-precision", '"%.3e".format([0.000123]) == "1.230000\u00d710\u207b\u2070\u2074"',
     True),
    ("format-string-of-lists-and-maps", '"%s".format([[1, "a", 2.5, null]]) == "[1, \\"a\\", 2.500000, null]" && '
     '"%s".format([{"b": 1, "a": [true]}]) == "{\\"a\\":[true], \\"b\\":1}"', True),
    ("format-double-as-string", '"%s|%s".format([1234567.0, 0.1]) == "1.234567e+06|0.1"', True),
    ("format-attribute-through-dyn", '"%s-%d".format([dyn(device.attributes["gpu.nvidia.com"].architecture), '
     'dyn(device.attributes["gpu.nvidia.com"].index)]) == "Hopper-3"', True),
    ("format-list-literal-may-mix-types", '"%s %d".format(["a", 1]) == "a 1"', True),
]


@pytest.mark.parametrize(("expression", "expected"), [c[1:] for c in TRUE_OR_FALSE], ids=[c[0] for c in TRUE_OR_FALSE])
def test_selector_evaluates_like_kubernetes(env: CelEnvironment, h100: CelDevice, expression: str, expected: bool) -> None:
    assert env.compile(expression).evaluate(h100) is expected


RUNTIME_ERRORS = [
    ("unknown-id", 'device.attributes["gpu.nvidia.com"].memory == 1', "no such key: memory"),
    ("unknown-id-in-unknown-domain", 'device.attributes["other.example.com"].x == 1', "no such key: x"),
    ("unknown-capacity", 'device.capacity["gpu.nvidia.com"].cores.isGreaterThan(quantity("1"))', "no such key: cores"),
    ("string-result", 'device.attributes["gpu.nvidia.com"].architecture',
     "CEL result of type string could not be converted to bool: unsupported native conversion from string to 'bool'"),
    ("int-result", 'device.attributes["gpu.nvidia.com"].index',
     "CEL result of type int could not be converted to bool: unsupported type conversion from 'int' to bool"),
    ("quantity-result", 'device.attributes["gpu.nvidia.com"].?nosuch.orValue(quantity("1"))',
     "CEL result of type kubernetes.Quantity could not be converted to bool: type conversion error from 'Quantity' to 'bool'"),
    ("semver-result", 'device.attributes["gpu.nvidia.com"].driverVersion',
     "CEL result of type kubernetes.Semver could not be converted to bool: type conversion error from 'Semver' to 'bool'"),
    ("double-result", 'device.attributes["gpu.nvidia.com"].?nosuch.orValue(1.5)',
     "CEL result of type double could not be converted to bool: type conversion error from Double to 'bool'"),
    ("bad-quantity-literal", 'sign(quantity("1.5GB")) == 1',
     "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ("bad-quantity-suffix", 'sign(quantity("1K")) == 1', "unable to parse quantity's suffix"),
    ("bad-semver-literal", 'semver("1.2").major() == 1', "No Major.Minor.Patch elements found"),
    ("asInteger-fraction", 'quantity("1.5").asInteger() == 1', "cannot convert value to integer"),
    ("division-by-zero", "1 / 0 == 1", "division by zero"),
    ("modulus-by-zero", 'device.attributes["gpu.nvidia.com"].index % 0 == 0', "modulus by zero"),
    ("integer-overflow-adding", 'device.attributes["gpu.nvidia.com"].index + 9223372036854775807 > 0', "integer overflow"),
    ("integer-overflow-multiplying", '9223372036854775807 * device.attributes["gpu.nvidia.com"].index > 0',
     "integer overflow"),
    ("unsigned-integer-overflow", 'uint(device.attributes["gpu.nvidia.com"].index) - 4u > 0u',
     "unsigned integer overflow"),
    ("int-conversion-overflow", 'int(double(device.attributes["gpu.nvidia.com"].index) * 1e19) > 0', "integer overflow"),
    ("int-of-non-number", 'int(device.attributes["gpu.nvidia.com"].architecture) > 0',
     "type conversion error from 'string' to 'int'"),
    ("bool-of-non-bool-string", 'bool(device.attributes["gpu.nvidia.com"].architecture)',
     "type conversion error from 'string' to 'bool'"),
    ("charAt-past-end", '"abc".charAt(device.attributes["gpu.nvidia.com"].index + 1) == ""', "index out of range: 4"),
    ("substring-reversed", '"abcd".substring(device.attributes["gpu.nvidia.com"].index, 1) == ""',
     "invalid substring range. start: 3, end: 1"),
    ("slice-past-end", '[1, 2].slice(0, device.attributes["gpu.nvidia.com"].index) == []',
     "cannot slice(0, 3), list is length 2"),
    ("min-of-empty-list", "[].min() == 1", "min called on empty list"),
    ("optional-none-value", 'device.attributes["gpu.nvidia.com"].?nosuch.value() == 1', "optional.none() dereference"),
    ("transformMapEntry-duplicate-key", '[1, 2].transformMapEntry(k, v, {"x": k}) == {"x": 1}',
     "insert failed: key x already exists"),
    ("ip-parse-error", 'ip("1.2.3.256").family() == 4',
     'IP Address "1.2.3.256" parse error during conversion from string: ParseAddr("1.2.3.256"): IPv4 field has value >255'),
    ("ip-parse-error-position", 'ip("1:2::3::4").family() == 6',
     'IP Address "1:2::3::4" parse error during conversion from string: ParseAddr("1:2::3::4"): multiple :: in '
     'address (at ":4")'),
    ("ip-ipv4-mapped", 'ip("::ffff:1.2.3.4").family() == 6', 'IPv4-mapped IPv6 address "::ffff:1.2.3.4" is not allowed'),
    ("ip-zone", 'ip("fe80::1%eth0").family() == 6', 'IP address "fe80::1%eth0" with zone value is not allowed'),
    ("cidr-parse-error-prefixed-twice", 'cidr("10.0.0.0/08").prefixLength() == 8',
     "network address parse error during conversion from string: network address parse error during conversion "
     'from string: netip.ParsePrefix("10.0.0.0/08"): bad bits after slash: "08"'),
    ("cidr-containsIP-unparsable-string", 'cidr("10.0.0.0/8").containsIP(device.attributes["gpu.nvidia.com"].architecture)',
     "no such overload"),
    ("url-parse-error", 'url("https://a.example.com/%zz").getHost() == ""',
     'URL parse error during conversion from string: parse "https://a.example.com/%zz": invalid URL escape "%zz"'),
    ("url-relative", 'url(device.attributes["gpu.nvidia.com"].architecture).getHost() == ""',
     'URL parse error during conversion from string: parse "Hopper": invalid URI for request'),
    ("url-ipv4-in-brackets", 'url("https://[1.2.3.4]/").getHost() == ""',
     'URL parse error during conversion from string: parse "https://[1.2.3.4]/": invalid IP-literal'),
    ("find-computed-pattern-illegal", '"abc".find(device.attributes["gpu.nvidia.com"].architecture + "(") == ""',
     "Illegal regex: error parsing regexp: missing closing ): `Hopper(`"),
    ("format-runtime-type-error", '"%d".format([dyn(1.5)]) == ""',
     "error during formatting: decimal clause can only be used on integers, was given double"),
    ("format-runtime-missing-argument", '"%s %s".format(dyn(["a"])) == ""', "index 1 out of range"),
    ("format-quantity-in-list", '"%s".format(dyn([[quantity("1")]])) == ""',
     "error during formatting: no formatting function for kubernetes.Quantity"),
]


@pytest.mark.parametrize(("expression", "message"), [c[1:] for c in RUNTIME_ERRORS], ids=[c[0] for c in RUNTIME_ERRORS])
def test_runtime_error_has_upstream_text(env: CelEnvironment, h100: CelDevice, expression: str, message: str) -> None:
    selector = env.compile(expression)
    with pytest.raises(CelRuntimeError) as err:
        selector.evaluate(h100)
    assert str(err.value) == message


TYPING = [
    ("quantity-plus-string", 'device.capacity["gpu.nvidia.com"].memory + "x" == "y"', "no such overload"),
    ("quantity-less-than-operator", 'device.capacity["gpu.nvidia.com"].memory < quantity("1")', "no such overload"),
    ("quantity-times-int", 'device.capacity["gpu.nvidia.com"].memory * 2 == 2', "no such overload"),
    ("compareTo-on-string", 'device.attributes["gpu.nvidia.com"].productName.compareTo(quantity("1")) == 0',
     "no such overload: compareTo(string, kubernetes.Quantity)"),
    ("compareTo-quantity-with-semver", 'quantity("1").compareTo(semver("1.0.0")) == 0',
     "no such overload: compareTo(kubernetes.Quantity, kubernetes.Semver)"),
    ("compareTo-with-plain-string", 'quantity("1").compareTo("1") == 0',
     "no such overload: compareTo(kubernetes.Quantity, string)"),
    ("add-string", 'quantity("1").add("1") == quantity("2")',
     "no such overload: add(kubernetes.Quantity, string)"),
    ("add-bool", 'quantity("1").add(true) == quantity("2")',
     "no such overload: add(kubernetes.Quantity, bool)"),
    ("sign-of-int", "sign(5) == 1", "no such overload: sign(int)"),
    ("major-on-quantity", 'quantity("1").major() == 1', "no such overload: major(kubernetes.Quantity)"),
    ("major-on-string-attribute", 'device.attributes["gpu.nvidia.com"].architecture.major() == 1',
     "no such overload: major(string)"),
    ("quantity-of-int", "quantity(5).isInteger()", "no such overload: quantity(int)"),
    ("string-function-on-quantity", 'quantity("1").lowerAscii() == "1"',
     "no such overload: lowerAscii(kubernetes.Quantity)"),
]


@pytest.mark.parametrize(("expression", "message"), [c[1:] for c in TYPING], ids=[c[0] for c in TYPING])
def test_quantities_and_semvers_reject_other_types(env: CelEnvironment, h100: CelDevice, expression: str, message: str) -> None:
    selector = env.compile(expression)
    with pytest.raises(CelRuntimeError) as err:
        selector.evaluate(h100)
    assert str(err.value) == message


COMPILE_ERRORS = [
    ("syntax", "device.driver ==", "ERROR: <input>:1:17: Syntax error"),
    ("undeclared-variable", 'gpu.driver == "x"', "ERROR: <input>:1:1: undeclared reference to 'gpu' (in container '')"),
    ("undeclared-on-second-line", 'device.driver == "x" &&\n  foo', "ERROR: <input>:2:3: undeclared reference to 'foo'"),
    ("unknown-function-at-its-parenthesis", 'device.driver.startWith("x")',
     "ERROR: <input>:1:24: undeclared reference to 'startWith'"),
    ("undefined-device-field", "device.name == 'x'", "ERROR: <input>:1:7: undefined field 'name'"),
    ("size-of-capacity", 'device.capacity["gpu.nvidia.com"].memory.size() > 0',
     "found no matching overload for 'size' applied to 'kubernetes.Quantity.()'"),
    ("size-of-quantity-global", 'size(quantity("1")) == 1', "found no matching overload for 'size' applied to '(kubernetes.Quantity)'"),
    ("size-of-semver", 'semver("1.0.0").size() == 1', "applied to 'kubernetes.Semver.()'"),
    ("sign-is-not-a-method", 'quantity("1").sign() == 1',
     "ERROR: <input>:1:19: found no matching overload for 'sign' applied to 'kubernetes.Quantity.()'"),
    ("sign-of-attribute-is-not-a-method", 'device.attributes["gpu.nvidia.com"].index.sign() == 1',
     "ERROR: <input>:1:47: found no matching overload for 'sign' applied to 'any.()'"),
    ("extension-function-called-globally", 'charAt("abc", 1) == "b"',
     "ERROR: <input>:1:7: found no matching overload for 'charAt' applied to '(string, int)'"),
    ("list-function-called-globally", "min([1, 2]) == 1",
     "ERROR: <input>:1:4: found no matching overload for 'min' applied to '(list(int))'"),
    ("global-function-called-as-method", '"1".isQuantity()',
     "ERROR: <input>:1:15: found no matching overload for 'isQuantity' applied to 'string.()'"),
    ("reverse-of-string", '"abc".reverse() == "cba"',
     "ERROR: <input>:1:14: found no matching overload for 'reverse' applied to 'string.()'"),
    ("mixed-list-literal", 'device.driver in [1, "a"]', "ERROR: <input>:1:22: expected type 'int' but found 'string'"),
    ("attribute-in-int-list-literal", '[1, device.attributes["gpu.nvidia.com"].index].size() == 2',
     "ERROR: <input>:1:40: expected type 'int' but found 'any'"),
    ("mixed-map-literal-values", '{"a": 1, "b": "x"}.size() == 2', "ERROR: <input>:1:15: expected type 'int' but found 'string'"),
    ("existsOne-has-only-a-two-variable-form", "[1, 2].existsOne(x, x > 1)",
     "ERROR: <input>:1:17: undeclared reference to 'existsOne'"),
    ("cidr-is-not-a-method", '"10.0.0.0/8".cidr().prefixLength() == 8',
     "ERROR: <input>:1:18: found no matching overload for 'cidr' applied to 'string.()'"),
    ("size-of-ip", 'size(ip("1.2.3.4")) == 1', "ERROR: <input>:1:5: found no matching overload for 'size' applied to '(net.IP)'"),
    ("matches-literal-pattern", '"abc".matches("(")', "ERROR: <input>:1:15: invalid matches argument"),
    ("format-literal-type", '"%d".format([1.5]) == "1"',
     "ERROR: <input>:1:14: error during formatting: decimal clause can only be used on integers, was given double"),
    ("format-attribute-is-any", '"%s".format([device.attributes["gpu.nvidia.com"].architecture]) == "Hopper"',
     "ERROR: <input>:1:49: error during formatting: string clause can only be used on strings, bools, bytes, ints, "
     "doubles, maps, lists, types, durations, and timestamps, was given google.protobuf.Any"),
    ("format-too-many-arguments", '"%s".format(["a", "b"]) == "a"',
     "ERROR: <input>:1:12: too many arguments supplied to string.format (expected 1, got 2)"),
    ("format-bad-clause", '"%z".format([1]) == ""',
     "ERROR: <input>:1:12: could not parse formatting clause: unrecognized formatting clause \"z\""),
]


def test_unicode_16_script_class_is_refused_as_unsupported(env: CelEnvironment) -> None:
    # Go's unicode tables know the scripts Unicode 16 added; RE2's do not yet, so a pattern naming
    # one is refused rather than matched differently (upstream compiles it).
    with pytest.raises(CelCompileError) as err:
        env.compile('"a".find("\\\\p{Garay}") == ""')
    assert str(err.value) == ("compilation failed: ERROR: <input>:1:10: the Unicode class \\p{Garay} is not "
                              'supported by this evaluator\n | "a".find("\\\\p{Garay}") == ""\n | .........^')


def test_nested_quantifier_on_longest_string_attribute_evaluates(env: CelEnvironment) -> None:
    """``^(a+)+$`` on a 64-character string attribute (the DRA limit) that almost matches: Go's
    regexp and RE2 answer in linear time, a backtracking matcher (Python's ``re``, which this
    evaluator used before) never finishes."""
    device = device_context(NV, {"model": {"string": "a" * 63 + "b"}}, {}, False)
    model = 'device.attributes["gpu.nvidia.com"].model'
    selector = env.compile(f'{model}.matches("^(a+)+$") || {model}.find("^(a+)+$") != "" || '
                           f'{model}.findAll("^(a+)+$").size() > 0')
    assert selector.evaluate(device) is False


PLANNING_ERRORS = [
    ("find-lookahead", '"abc".find("(?=b)") == ""', "invalid or unsupported Perl syntax: `(?=`"),
    ("findAll-unbalanced", '"abc".findAll("(") == []', "missing closing ): `(`"),
    ("matches-global-form", 'matches("abc", "a++")', "invalid nested repetition operator: `++`"),
    ("backreference", '"aa".find("(a)\\\\1") == ""', "invalid escape sequence: `\\1`"),
    ("end-of-text-z-upper", '"ab".find("b\\\\Z") == ""', "invalid escape sequence: `\\Z`"),
    ("repeat-count-over-1000", '"ab".find("a{2,1001}") == ""', "invalid repeat count: `{2,1001}`"),
    ("nested-repeat-counts-over-1000", '"ab".find("(a{2}){501}") == ""', "invalid repeat count: `{501}`"),
]


@pytest.mark.parametrize(("expression", "fragment"), [c[1:] for c in PLANNING_ERRORS], ids=[c[0] for c in PLANNING_ERRORS])
def test_constant_pattern_go_refuses_fails_when_planned(env: CelEnvironment, expression: str, fragment: str) -> None:
    with pytest.raises(CelCompileError) as err:
        env.compile(expression)
    assert str(err.value) == f"program instantiation failed: error parsing regexp: {fragment}"


OPTIONAL_SYNTAX_ERRORS = [
    ("syntax-error-beside-optional-selection", 'device.attributes["gpu.example.com"].?x.hasValue() &&',
     "ERROR: <input>:1:54: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', "
     "'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n"
     ' | device.attributes["gpu.example.com"].?x.hasValue() &&\n'
     " | .....................................................^"),
    ("optional-selection-in-has", 'has(device.attributes["gpu.example.com"].?model)',
     "ERROR: <input>:1:41: invalid argument to has() macro\n"
     ' | has(device.attributes["gpu.example.com"].?model)\n'
     " | ........................................^"),
]


@pytest.mark.parametrize(("expression", "message"), [c[1:] for c in OPTIONAL_SYNTAX_ERRORS],
                         ids=[c[0] for c in OPTIONAL_SYNTAX_ERRORS])
def test_parse_error_beside_optional_syntax_is_reported_alone(env: CelEnvironment, expression: str, message: str) -> None:
    with pytest.raises(CelCompileError) as err:
        env.compile(expression)
    assert str(err.value) == f"compilation failed: {message}"


def test_every_compile_error_is_reported_in_position_order(env: CelEnvironment) -> None:
    with pytest.raises(CelCompileError) as err:
        env.compile("math.greatest(1, 2) == 2")
    assert str(err.value) == (
        "compilation failed: ERROR: <input>:1:1: undeclared reference to 'math' (in container '')\n"
        " | math.greatest(1, 2) == 2\n | ^\n"
        "ERROR: <input>:1:14: undeclared reference to 'greatest' (in container '')\n"
        " | math.greatest(1, 2) == 2\n | .............^"
    )


@pytest.mark.parametrize(("expression", "fragment"), [c[1:] for c in COMPILE_ERRORS], ids=[c[0] for c in COMPILE_ERRORS])
def test_compile_error_reports_position(env: CelEnvironment, expression: str, fragment: str) -> None:
    with pytest.raises(CelCompileError) as err:
        env.compile(expression)
    assert str(err.value).startswith("compilation failed: ")
    assert fragment in str(err.value)


STATIC_RESULT_TYPES = [
    ("driver", "device.driver", "string"),
    ("int-literal", "1", "int"),
    ("capacity", 'device.capacity["gpu.nvidia.com"].memory', "kubernetes.Quantity"),
    ("quantity-call", 'quantity("1")', "kubernetes.Quantity"),
    ("semver-call", 'semver("1.0.0")', "kubernetes.Semver"),
    ("compareTo", 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("1"))', "int"),
    ("parenthesised", "(device.driver)", "string"),
    ("dyn", "dyn(true)", "dyn"),
    ("ip", 'ip("1.2.3.4")', "net.IP"),
    ("cidr-masked", 'cidr("10.0.0.0/8").masked()', "net.CIDR"),
    ("url", 'url("https://a.example.com")', "kubernetes.URL"),
    ("format", '"%s".format(["a"])', "string"),
]


@pytest.mark.parametrize(("expression", "type_name"), [c[1:] for c in STATIC_RESULT_TYPES],
                         ids=[c[0] for c in STATIC_RESULT_TYPES])
def test_statically_non_bool_selector_fails_to_compile(env: CelEnvironment, expression: str, type_name: str) -> None:
    with pytest.raises(CelCompileError) as err:
        env.compile(expression)
    assert str(err.value) == f"must evaluate to bool or the unknown type, not {type_name}"


def test_compile_error_shows_line_and_caret(env: CelEnvironment) -> None:
    with pytest.raises(CelCompileError) as err:
        env.compile("device.name == 'x'")
    assert str(err.value) == (
        "compilation failed: ERROR: <input>:1:7: undefined field 'name'\n | device.name == 'x'\n | ......^"
    )


def test_allow_multiple_allocations_is_undeclared_without_consumable_capacity() -> None:
    env = CelEnvironment(CelOptions(consumable_capacity=False))
    with pytest.raises(CelCompileError, match="undefined field 'allowMultipleAllocations'"):
        env.compile("device.allowMultipleAllocations")
    assert CelEnvironment().compile("device.allowMultipleAllocations").expression == "device.allowMultipleAllocations"


def test_expression_longer_than_10_kib_is_refused(env: CelEnvironment) -> None:
    padding = " " * (MAX_EXPRESSION_LENGTH - len("true"))
    assert env.compile("true" + padding).evaluate(device_context(NV, {}, {}, False)) is True
    with pytest.raises(CelCompileError) as err:
        env.compile("true " + padding)
    assert str(err.value) == "compilation failed: expression too long (10241 bytes, must be at most 10240)"


def test_compilation_is_cached_per_expression_including_errors(env: CelEnvironment) -> None:
    assert env.compile('device.driver == "a"') is env.compile('device.driver == "a"')
    with pytest.raises(CelCompileError) as first:
        env.compile("nope")
    with pytest.raises(CelCompileError) as second:
        env.compile("nope")
    assert first.value is second.value


def test_unparsable_version_fails_every_evaluation_on_that_device(env: CelEnvironment) -> None:
    device = device_context(NV, {"driverVersion": {"version": "580.105"}, "model": {"string": "x"}}, {}, False)
    for expression in ('device.driver == "gpu.nvidia.com"', 'device.attributes["gpu.nvidia.com"].model == "x"'):
        with pytest.raises(CelRuntimeError) as err:
            env.compile(expression).evaluate(device)
        assert str(err.value) == "attribute driverVersion: parse semantic version: No Major.Minor.Patch elements found"
    assert device.error is not None


def test_list_attribute_without_gate_fails_evaluation_on_that_device(env: CelEnvironment) -> None:
    device = device_context(NV, {"models": {"strings": ["a", "b"]}}, {}, False)
    with pytest.raises(CelRuntimeError) as err:
        env.compile('device.driver == "gpu.nvidia.com"').evaluate(device)
    assert str(err.value) == "attribute models: unsupported attribute value"


LIST_GATE = CelOptions(list_type_attributes=True)
LIST_ATTRIBUTES = {
    "models": {"strings": ["H100", "A100"]},
    "numaNodes": {"ints": [0, 1]},
    "flags": {"bools": [True]},
    "firmware": {"versions": ["1.2.3", "2.0.0"]},
    "index": {"int": 3},
}
INCLUDES = [
    ("strings", 'device.attributes["gpu.nvidia.com"].models.includes("A100")', True),
    ("strings-missing", 'device.attributes["gpu.nvidia.com"].models.includes("B200")', False),
    ("ints", 'device.attributes["gpu.nvidia.com"].numaNodes.includes(1)', True),
    ("bool-is-not-int", 'device.attributes["gpu.nvidia.com"].flags.includes(1)', False),
    ("versions", 'device.attributes["gpu.nvidia.com"].firmware.includes(semver("2.0.0"))', True),
    ("scalar", 'device.attributes["gpu.nvidia.com"].index.includes(3)', True),
    ("list-size", 'device.attributes["gpu.nvidia.com"].models.size() == 2', True),
]


@pytest.mark.parametrize(("expression", "expected"), [c[1:] for c in INCLUDES], ids=[c[0] for c in INCLUDES])
def test_list_type_attributes_with_gate(expression: str, expected: bool) -> None:
    device = device_context(NV, LIST_ATTRIBUTES, {}, False, LIST_GATE)
    assert CelEnvironment(LIST_GATE).compile(expression).evaluate(device) is expected


def test_includes_refuses_more_than_48_items() -> None:
    env = CelEnvironment(LIST_GATE)
    device = device_context(NV, {"many": {"ints": list(range(49))}}, {}, False, LIST_GATE)
    with pytest.raises(CelRuntimeError, match="more than the maximum of 48"):
        env.compile('device.attributes["gpu.nvidia.com"].many.includes(1)').evaluate(device)


def test_runtime_error_is_cached_and_raised_again(env: CelEnvironment, h100: CelDevice) -> None:
    selector = env.compile('device.attributes["gpu.nvidia.com"].absent == 1')
    for _ in range(2):
        with pytest.raises(CelRuntimeError, match="no such key: absent"):
            selector.evaluate(h100)


def test_same_selector_gives_per_device_answers(env: CelEnvironment) -> None:
    selector = env.compile('device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0')
    big = device_context(NV, {}, {"memory": {"value": "80Gi"}}, False)
    small = device_context(NV, {}, {"memory": {"value": "24Gi"}}, False)
    assert [selector.evaluate(big), selector.evaluate(small), selector.evaluate(big)] == [True, False, True]


QUANTITY_TEXT = st.builds(
    lambda n, suffix: f"{n}{suffix}",
    st.integers(min_value=-(10**6), max_value=10**6),
    st.sampled_from(["", "m", "k", "M", "Ki", "Mi", "Gi", "n"]),
)


@settings(max_examples=60, deadline=None)
@given(QUANTITY_TEXT, QUANTITY_TEXT)
def test_cel_quantity_comparison_agrees_with_python(left: str, right: str) -> None:
    env = CelEnvironment()
    device = device_context(NV, {}, {"a": {"value": left}}, False)
    expected = Quantity.parse(left).cmp(Quantity.parse(right))
    selector = env.compile(f'device.capacity["gpu.nvidia.com"].a.compareTo(quantity("{right}")) == {expected}')
    assert selector.evaluate(device) is True
    equal = env.compile(f'device.capacity["gpu.nvidia.com"].a == quantity("{right}")')
    assert equal.evaluate(device) is (expected == 0)
    greater = env.compile(f'device.capacity["gpu.nvidia.com"].a.isGreaterThan(quantity("{right}"))')
    assert greater.evaluate(device) is (expected == 1)


def test_cached_results_do_not_keep_devices_alive(env: CelEnvironment) -> None:
    import gc
    import weakref

    selector = env.compile('device.driver == "gpu.nvidia.com"')
    device = device_context(NV, H100_ATTRIBUTES, H100_CAPACITY, False)
    assert selector.evaluate(device) is True
    alive = weakref.ref(device)
    del device
    gc.collect()
    assert alive() is None


DEVICE_ERRORS = [
    ("unparsable-capacity", {}, {"memory": {"value": "80GB"}},
     "capacity memory: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"),
    ("attribute-without-value", {"model": {}}, {}, "attribute model: unsupported attribute value"),
    ("int-attribute-holding-bool", {"index": {"int": True}}, {}, "attribute index: unsupported attribute value"),
    ("first-bad-attribute-by-name", {"zeta": {}, "alpha": {"version": "x"}}, {},
     "attribute alpha: parse semantic version: No Major.Minor.Patch elements found"),
]


@pytest.mark.parametrize(("attributes", "capacity", "message"), [c[1:] for c in DEVICE_ERRORS], ids=[c[0] for c in DEVICE_ERRORS])
def test_unconvertible_device_fails_evaluation_with_upstream_text(
        env: CelEnvironment, attributes: dict, capacity: dict, message: str) -> None:  # type: ignore[type-arg]
    device = device_context(NV, attributes, capacity, False)
    assert device.error == message
    with pytest.raises(CelRuntimeError) as err:
        env.compile("true").evaluate(device)
    assert str(err.value) == message


def test_capacity_accepts_parsed_quantities_and_plain_numbers(env: CelEnvironment) -> None:
    device = device_context(NV, {}, {"memory": {"value": Quantity.parse("2Gi")}, "slots": {"value": 4}}, False)
    selector = env.compile('device.capacity["gpu.nvidia.com"].memory == quantity("2048Mi") && '
                           'device.capacity["gpu.nvidia.com"].slots.compareTo(quantity("4")) == 0')
    assert selector.evaluate(device) is True


MAP_ORDER = [
    ("map-over-a-map-literal", '{"e": 5, "d": 4, "c": 3, "b": 2, "a": 1}.map(k, k) == ["a", "b", "c", "d", "e"]'),
    ("filter-over-a-map-literal", '{"e": 5, "d": 4, "c": 3, "b": 2, "a": 1}.filter(k, k != "c") == ["a", "b", "d", "e"]'),
    ("map-over-attribute-names", 'device.attributes["gpu.nvidia.com"].map(k, k)[0] == "address"'),
    ("transform-list-over-a-map", '{"e": 5, "d": 4, "c": 3, "b": 2, "a": 1}.transformList(k, v, v) == [1, 2, 3, 4, 5]'),
    ("integer-keys-by-value", '{30: "c", 1: "a", 2: "b"}.map(k, k) == [1, 2, 30]'),
]


@pytest.mark.parametrize("expression", [c[1] for c in MAP_ORDER], ids=[c[0] for c in MAP_ORDER])
def test_a_macro_iterates_a_map_in_one_order(expression: str) -> None:
    """The binding, like cel-go, iterates a map in a random order: a list built from one came out
    in another order at each evaluation, so a decision and its replay could differ. Each
    evaluation here is a fresh environment and device, so nothing is answered from a cache."""
    answers = {CelEnvironment().compile(expression).evaluate(
        device_context(NV, H100_ATTRIBUTES, H100_CAPACITY, allow_multiple_allocations=True)) for _ in range(20)}
    assert answers == {True}
