"""The CEL environment of DRA device selectors, on the Rust-backed ``cel`` package.

Selectors in DeviceClasses and requests see one variable, ``device``, with ``driver``,
``attributes[domain].id``, ``capacity[domain].id`` (a Kubernetes quantity) and, when consumable
capacity is enabled, ``allowMultipleAllocations``. This module reproduces the Kubernetes 1.36
environment (``k8s.io/dynamic-resource-allocation/cel/compile.go``): an unknown domain is an empty
map, an unknown id is the run-time error ``no such key: <id>``, a non-bool result is an error,
version attributes are semver values parsed with blang's rules, and an attribute that cannot be
converted makes every evaluation on that device fail.

How it maps onto ``cel``, which cannot hold Python objects and does not type-check:

* Quantities, semvers, IP addresses, CIDRs and URLs travel as one-key maps whose key is a private
  tag and whose value is their canonical text. Every custom function refuses untagged
  arguments, built-in operators refuse maps (``memory + "x"``, ``memory < x`` fail as in
  Kubernetes), ``size()`` on an expression that is statically of one of these types is refused
  at compile time, and ``==`` compares the canonical value — which is what Kubernetes' ``Equal``
  does (``quantity("1Gi") == quantity("1024Mi")`` is true; build metadata of versions is
  ignored; ``ip("::0:1") == ip("::1")``, while a CIDR keeps its host bits until ``masked()``).
  Where the type is only known at run time (attributes are dynamic) ``size()`` of a version
  attribute answers 1 instead of failing.
* Static checks Kubernetes makes when compiling — undeclared variables, unknown functions,
  undefined fields of ``device``, functions called as methods that are globals or the reverse,
  list and map literals mixing types, a result type that is evidently not bool
  (``device.driver``) — are made here on the token stream, with cel-go's
  ``ERROR: <input>:line:col:`` layout, every error of an expression in one report. Type errors
  a type checker would find deeper inside an expression surface at run time instead.
* Results are cached per (selector, device object); devices are held weakly. A selector that
  reads only named values of ``device`` (its footprint: ``device.driver``,
  ``device.attributes["d"].id``, ...) is evaluated once per distinct combination of those
  values and on a ``device`` holding only them, since the binding's conversion of a whole device
  costs far more than the evaluation; devices convert their values lazily for the same reason.
* A domain the device lacks reads as an empty map: every ``device.attributes[K]`` and
  ``device.capacity[K]`` is compiled as ``(K in device.attributes ? device.attributes[K] : {})``,
  so ``in``, ``size()`` and macros over ``device.attributes`` still see only real domains.
* Syntax the ``cel`` parser lacks — optional selection (``m.?f``, ``m[?k]``), optional entries of
  literals, ``optMap``/``optFlatMap``, ``cel.bind``, two-variable comprehensions
  (``all(k, v, p)``, ``transformList``, ...) and ``sortBy`` — is rewritten into plain CEL over
  helper functions before it runs (``desugar``); cel-go's list and string extensions and the
  optional library are functions of ``library`` with cel-go's semantics and error texts.
* Kubernetes' IP, CIDR and URL libraries parse with ports of Go's ``net/netip`` and ``net/url``
  (Python's ``ipaddress`` and ``urllib.parse`` accept and split differently), refusing zones and
  IPv4-mapped IPv6 addresses as upstream does. ``matches`` (both forms), ``find`` and
  ``findAll`` run on RE2 (linear time, as Go's ``regexp``): ``regex`` refuses what Go refuses
  with Go's text and runs the pattern unchanged; constant patterns are checked when compiling,
  as the Kubernetes environment's regex validator and optimizations do. ``format`` is cel-go's
  version-2 format with the en_US printer's output (``1,234.50``, ``1.234500×10⁰³``) and its
  compile-time validator (an attribute value in a literal argument list is ``google.protobuf.Any`` there).
* A macro over a map iterates its keys in one fixed order (booleans, numbers, strings, each by
  value), where cel-go and the binding iterate it in a random order: ``map``, ``filter`` and
  ``transformList`` over a map give one list, one of those upstream can give, at every
  evaluation, so a decision replays alike.
* The binding's run-time errors are reported in cel-go's words (``integer overflow``,
  ``modulus by zero``, ``type conversion error from 'string' to 'int'``, and a non-bool result
  with the reason ConvertToNative gives).
* ``cel`` tracks no evaluation cost, so the 1,000,000 cost limit is not enforced; the 10 KiB
  expression limit is. The authorizer and image libraries are refused at compile time as
  unsupported, and so is a regex naming a script Unicode 16 added (``\\p{Garay}``: Go's tables
  have them, RE2's not yet); other classes (``\\pL``, ``\\p{Greek}``) match by RE2's tables, and a
  pattern too large for RE2's memory budget is refused as unsupported. Type errors
  that only a type checker finds (``"a" + 1``, ``quantity("1") < quantity("2")``, ``ip(1)``,
  ``ip("::1").ip()``) fail when evaluated rather than when compiled, with a different text; the
  type names ``net.IP``/``net.CIDR`` are not declared; a map with double keys in ``format``
  fails; type values reach ``format`` as their names (quoted inside a list); an integer negation
  that overflows (``-(-9223372036854775807 - 1)``) wraps instead of failing; and
  ``isInteger``/``asInteger`` decide by the value, where Go also refuses values it holds as a
  decimal or at a fractional scale (``1000m``, ``1.5Gi``, 19 digits): the canonical value is what
  ``==`` compares, so it cannot also say how Go stores the quantity.
"""

from audit.dra.cel.binding import preload

preload()  # before any module below runs ``import cel``

from audit.dra.cel.contract import (  # noqa: E402
    MAX_EXPRESSION_LENGTH,
    CelCompileError,
    CelOptions,
    CelRuntimeError,
)
from audit.dra.cel.device import CelDevice, device_context  # noqa: E402
from audit.dra.cel.environment import CelEnvironment, CompiledSelector  # noqa: E402

__all__ = [
    "CelCompileError",
    "CelRuntimeError",
    "CelOptions",
    "CelDevice",
    "CelEnvironment",
    "CompiledSelector",
    "device_context",
    "MAX_EXPRESSION_LENGTH",
]
