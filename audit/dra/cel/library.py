"""The functions of the selector environment: Kubernetes' quantity and semver libraries, ``includes``,
cel-go's string, list, set and optional extensions, those of ``extensions`` (IP, CIDR, URL, regex),
and the helpers ``desugar`` rewrites syntax into.

Each function refuses arguments of the wrong type with cel-go's ``no matching overload`` text and
fails with cel-go's own error texts (``index out of range: 5``, ``cannot slice(2, 1), ...``), kept
for ``environment`` by ``failures``. The helpers are named
with the ``_ct_`` prefix; selectors cannot call them, because the static checks only know
``PUBLIC_FUNCTIONS``.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, NoReturn

from cel import OptionalValue
from cel import stdlib as cel_stdlib

from audit.dra.cel import extensions
from audit.dra.cel.contract import MAX_INCLUDES_ITEMS
from audit.dra.cel.failures import fail as _fail
from audit.dra.cel.failures import no_overload as _no_overload
from audit.dra.cel.values import parse_semver, tag_of, type_name, unwrap, wrap_quantity, wrap_semver
from audit.dra.quantity import Quantity
from audit.dra.semver import Semver, normalize_semver

# Failing selectors are reported through CelRuntimeError; the binding would also log each failed
# callback as a warning, which would duplicate every expected error on stderr.
logging.getLogger("cel").setLevel(logging.ERROR)


# Quantity and semver functions as in k8s.io/apiserver/pkg/cel/library (quantity.go, semverlib.go).


@functools.lru_cache(maxsize=4096)
def _parse_quantity_literal(text: str) -> dict[str, str]:
    return wrap_quantity(Quantity.parse(text))


def _quantity(text: Any) -> dict[str, str]:
    if not isinstance(text, str):
        _no_overload("quantity", text)
    try:
        return _parse_quantity_literal(text)
    except ValueError as exc:
        _fail(str(exc))


def _is_quantity(text: Any) -> bool:
    if not isinstance(text, str):
        _no_overload("isQuantity", text)
    try:
        _parse_quantity_literal(text)
    except ValueError:
        return False
    return True


def _semver(text: Any, normalize: Any = False) -> dict[str, str]:
    if not isinstance(text, str) or not isinstance(normalize, bool):
        _no_overload("semver", text, normalize)
    try:
        return wrap_semver(parse_semver(normalize_semver(text) if normalize else text))
    except ValueError as exc:
        _fail(str(exc))


def _is_semver(text: Any, normalize: Any = False) -> bool:
    if not isinstance(text, str) or not isinstance(normalize, bool):
        _no_overload("isSemver", text, normalize)
    try:
        parse_semver(normalize_semver(text) if normalize else text)
    except ValueError:
        return False
    return True


def _quantity_arg(name: str, value: Any, *others: Any) -> Quantity:
    inner = unwrap(value)
    if not isinstance(inner, Quantity):
        _no_overload(name, value, *others)
    return inner


def _compare(name: str, left: Any, right: Any) -> int:
    a, b = unwrap(left), unwrap(right)
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        return a.cmp(b)
    if isinstance(a, Semver) and isinstance(b, Semver):
        return a.compare(b)
    _no_overload(name, left, right)


def _compare_to(left: Any, right: Any) -> int:
    return _compare("compareTo", left, right)


def _is_greater_than(left: Any, right: Any) -> bool:
    return _compare("isGreaterThan", left, right) == 1


def _is_less_than(left: Any, right: Any) -> bool:
    return _compare("isLessThan", left, right) == -1


def _arith(name: str, left: Any, right: Any) -> dict[str, str]:
    q = _quantity_arg(name, left, right)
    if isinstance(right, int) and not isinstance(right, bool):
        other = Quantity.from_int(right)
    else:
        inner = unwrap(right)
        if not isinstance(inner, Quantity):
            _no_overload(name, left, right)
        other = inner
    return wrap_quantity(q.add(other) if name == "add" else q.sub(other))


def _add(left: Any, right: Any) -> dict[str, str]:
    return _arith("add", left, right)


def _sub(left: Any, right: Any) -> dict[str, str]:
    return _arith("sub", left, right)


def _as_integer(value: Any) -> int:
    q = _quantity_arg("asInteger", value)
    if not q.is_integer():
        _fail("cannot convert value to integer")
    return q.value()


def _as_approximate_float(value: Any) -> float:
    return _quantity_arg("asApproximateFloat", value).as_approximate_float()


def _sign(value: Any) -> int:
    return _quantity_arg("sign", value).sign()


def _is_integer(value: Any) -> bool:
    return _quantity_arg("isInteger", value).is_integer()


def _semver_part(name: str) -> Callable[[Any], int]:
    def part(value: Any) -> int:
        inner = unwrap(value)
        if not isinstance(inner, Semver):
            _no_overload(name, value)
        number: int = getattr(inner, name)
        return number

    return part


def _same(a: Any, b: Any) -> bool:
    """CEL equality for includes(): tagged values by their canonical value, bool never equal to int."""
    if tag_of(a) is not None or tag_of(b) is not None:
        return bool(tag_of(a) == tag_of(b) and a == b)
    if isinstance(a, bool) != isinstance(b, bool):
        return False
    return bool(a == b)


def _includes(receiver: Any, value: Any) -> bool:
    if isinstance(receiver, list | tuple):
        if len(receiver) > MAX_INCLUDES_ITEMS:
            _fail(f"includes: list has {len(receiver)} items, more than the maximum of {MAX_INCLUDES_ITEMS}")
        return any(_same(item, value) for item in receiver)
    return _same(receiver, value)


def _guarded(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """A library function whose Python errors become CEL run-time errors with their own text."""

    def call(*args: Any) -> Any:
        if any(tag_of(a) is not None for a in args):
            _no_overload(name, *args)
        try:
            return function(*args)
        except (TypeError, ValueError, IndexError, KeyError) as exc:
            _fail(f"{name}: {exc}")

    return call


_QUANTITY_AND_SEMVER: dict[str, Callable[..., Any]] = {
    "quantity": _quantity,
    "isQuantity": _is_quantity,
    "semver": _semver,
    "isSemver": _is_semver,
    "compareTo": _compare_to,
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "add": _add,
    "sub": _sub,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_approximate_float,
    # Declared by quantity.go as a global function only: ``sign(q)``, while ``q.sign()`` finds no overload.
    "sign": _sign,
    "isInteger": _is_integer,
    "major": _semver_part("major"),
    "minor": _semver_part("minor"),
    "patch": _semver_part("patch"),
}

# Strings (cel-go ext.Strings v2): the functions whose range checks the ``cel`` package words or
# decides differently (an offset past the end finds nothing; an empty needle is found at any offset).


def _out_of_range(index: int) -> NoReturn:
    _fail(f"index out of range: {index}")


def _char_at(text: str, index: int) -> str:
    if index < 0 or index > len(text):
        _out_of_range(index)
    return text[index:index + 1]


def _index_of(text: str, needle: str, offset: int | None = None) -> int:
    start = 0 if offset is None else offset
    if needle == "":
        return start
    if start < 0:
        _out_of_range(start)
    if start >= len(text):
        return -1
    return text.find(needle, start)


def _last_index_of(text: str, needle: str, offset: int | None = None) -> int:
    if offset is None:
        return text.rfind(needle)
    if needle == "":
        return offset
    if offset < 0:
        _out_of_range(offset)
    if offset >= len(text):
        return -1
    return text.rfind(needle, 0, offset + len(needle))


def _substring(text: str, start: int, end: int | None = None) -> str:
    stop = len(text) if end is None else end
    if start < 0 or start > len(text):
        _out_of_range(start)
    if start > stop:
        _fail(f"invalid substring range. start: {start}, end: {stop}")
    if stop > len(text):
        _out_of_range(stop)
    return text[start:stop]


def _bool(value: Any) -> bool:
    try:
        return cel_stdlib.bool_(value)
    except ValueError:
        _fail(f"type conversion error from '{type_name(value)}' to 'bool'")


# Lists: Kubernetes' list library (k8s.io/apiserver/pkg/cel/library/lists.go) and cel-go's
# ext.Lists; indexOf and lastIndexOf serve both strings and lists.


def _list_arg(name: str, value: Any, *others: Any) -> list[Any]:
    if not isinstance(value, list):
        _no_overload(name, value, *others)
    return value


def _position(name: str, receiver: Any, item: Any, offset: int | None, last: bool) -> int:
    if isinstance(receiver, str):
        if not isinstance(item, str) or not (offset is None or isinstance(offset, int)):
            _no_overload(name, receiver, item)
        return _last_index_of(receiver, item, offset) if last else _index_of(receiver, item, offset)
    items = _list_arg(name, receiver, item)
    order = range(len(items) - 1, -1, -1) if last else range(len(items))
    return next((i for i in order if _same(items[i], item)), -1)


def _list_index_of(receiver: Any, item: Any, offset: Any = None) -> int:
    return _position("indexOf", receiver, item, offset, last=False)


def _list_last_index_of(receiver: Any, item: Any, offset: Any = None) -> int:
    return _position("lastIndexOf", receiver, item, offset, last=True)


def _extreme(name: str, pick: Callable[..., Any]) -> Callable[[Any], Any]:
    def extreme(receiver: Any) -> Any:
        items = _list_arg(name, receiver)
        if not items:
            _fail(f"{name} called on empty list")
        try:
            return pick(items)
        except TypeError:
            _no_overload(name, receiver)

    return extreme


def _is_sorted(receiver: Any) -> bool:
    items = _list_arg("isSorted", receiver)
    try:
        return all(not items[i + 1] < items[i] for i in range(len(items) - 1))
    except TypeError:
        _no_overload("isSorted", receiver)


def _sort(receiver: Any) -> list[Any]:
    try:
        return sorted(_list_arg("sort", receiver))
    except TypeError:
        _fail("list elements must be comparable")


def _distinct(receiver: Any) -> list[Any]:
    kept: list[Any] = []
    for item in _list_arg("distinct", receiver):
        if not any(_same(item, seen) for seen in kept):
            kept.append(item)
    return kept


def _flatten(receiver: Any, depth: Any = 1) -> list[Any]:
    items = _list_arg("flatten", receiver, depth)
    if not isinstance(depth, int) or isinstance(depth, bool):
        _no_overload("flatten", receiver, depth)
    if depth < 0:
        _fail("level must be non-negative")
    out: list[Any] = []
    for item in items:
        out.extend(_flatten(item, depth - 1) if isinstance(item, list) and depth > 0 else [item])
    return out


def _slice(receiver: Any, start: Any, end: Any) -> list[Any]:
    items = _list_arg("slice", receiver, start, end)
    if start < 0 or end < 0:
        _fail(f"cannot slice({start}, {end}), negative indexes not supported")
    if start > end:
        _fail(f"cannot slice({start}, {end}), start index must be less than or equal to end index")
    if len(items) < end:
        _fail(f"cannot slice({start}, {end}), list is length {len(items)}")
    return items[start:end]


def _reverse(receiver: Any) -> list[Any]:
    return list(reversed(_list_arg("reverse", receiver)))


def _range(count: Any) -> list[int]:
    if not isinstance(count, int) or isinstance(count, bool):
        _no_overload("lists.range", count)
    return list(range(count))


def _first(receiver: Any) -> OptionalValue:
    items = _list_arg("first", receiver)
    return OptionalValue.of(items[0]) if items else OptionalValue.none()


def _last(receiver: Any) -> OptionalValue:
    items = _list_arg("last", receiver)
    return OptionalValue.of(items[-1]) if items else OptionalValue.none()


# Optional values (cel-go's OptionalTypes): the library functions, and the helpers that optional
# selection, optional literal entries, ``optMap``/``optFlatMap`` and ``sortBy`` are rewritten into.


def _unwrap_optionals(receiver: Any) -> list[Any]:
    items = _list_arg("optional.unwrap", receiver)
    if not all(isinstance(item, OptionalValue) for item in items):
        _no_overload("optional.unwrap", receiver)
    return [item.value() for item in items if item.has_value()]


def _present(value: Any) -> tuple[bool, Any]:
    """(has a value, the value) of the receiver of an optional selection: a plain value or an optional."""
    if isinstance(value, OptionalValue):
        return (True, value.value()) if value.has_value() else (False, None)
    return True, value


def _opt_field(receiver: Any, name: str) -> OptionalValue:
    present, value = _present(receiver)
    if not present:
        return OptionalValue.none()
    if not isinstance(value, dict) or tag_of(value) is not None:
        return OptionalValue.none()  # as cel-go answers for a value without fields
    return OptionalValue.of(value[name]) if name in value else OptionalValue.none()


def _opt_index(receiver: Any, key: Any) -> OptionalValue:
    present, value = _present(receiver)
    if not present:
        return OptionalValue.none()
    if isinstance(value, list):
        if not isinstance(key, int) or isinstance(key, bool):
            _fail("unsupported index type")
        return OptionalValue.of(value[key]) if 0 <= key < len(value) else OptionalValue.none()
    if not isinstance(value, dict) or tag_of(value) is not None:
        _no_overload("_[?_]", value, key)
    return OptionalValue.of(value[key]) if key in value else OptionalValue.none()


def _opt_domain(domains: Any, name: Any) -> OptionalValue:
    """``device.attributes.?d`` / ``[?d]``: Kubernetes' domain maps answer every domain, an unknown
    one with an empty map (k8s.io/dynamic-resource-allocation/cel/compile.go)."""
    return OptionalValue.of(domains.get(name, {}))


def _opt_as_list(receiver: Any) -> list[Any]:
    if not isinstance(receiver, OptionalValue):
        _no_overload("optMap", receiver)
    return [receiver.value()] if receiver.has_value() else []


def _opt_from_list(values: list[Any]) -> OptionalValue:
    return OptionalValue.of(values[0]) if values else OptionalValue.none()


def _opt_flat_from_list(values: list[Any]) -> OptionalValue:
    if not values:
        return OptionalValue.none()
    # The binding's map() hands an optional with a value back as the bare value (but keeps
    # optional.none()); optFlatMap's body is an optional, so a bare value was optional.of(it).
    result = values[0]
    return result if isinstance(result, OptionalValue) else OptionalValue.of(result)


def _opt_list_literal(items: list[Any]) -> list[Any]:
    out = []
    for item in items:
        if not isinstance(item, OptionalValue):
            _no_overload("optional list entry", item)
        if item.has_value():
            out.append(item.value())
    return out


def _opt_map_literal(entries: list[Any]) -> dict[Any, Any]:
    out = {}
    for key, item in entries:
        if not isinstance(item, OptionalValue):
            _no_overload("optional map entry", item)
        if item.has_value():
            out[key] = item.value()
    return out


# Two-variable comprehensions and sortBy run as one-variable macros over [key or index, value] pairs.


def _key_order(key: Any) -> tuple[int, Any]:
    """A map key's place in the one order ClaimTrail iterates maps in: bools, then numbers, then
    strings (the kinds a CEL map key can be), each by value."""
    if isinstance(key, bool):
        return (0, key)
    return (1, key) if isinstance(key, int) else (2, str(key))


def _in_order(receiver: Any) -> Any:
    """A macro's receiver as it is iterated: a list as it is, a map as its keys in ``_key_order``,
    anything else unchanged (the macro refuses it in its own words). cel-go iterates a map in Go's
    map order and the ``cel`` binding in its hash map's, both random: a ``map`` or ``filter`` over
    a map would give its list in another order at each evaluation (18 orders in 20 evaluations of
    one five-key literal), so a decision and its replay could differ. The fixed order is one of
    those upstream can take."""
    if isinstance(receiver, dict) and tag_of(receiver) is None:
        return sorted(receiver, key=_key_order)
    return receiver


def _pairs(receiver: Any) -> list[list[Any]]:
    if isinstance(receiver, dict) and tag_of(receiver) is None:
        return [[key, receiver[key]] for key in _in_order(receiver)]
    if isinstance(receiver, list):
        return [[index, value] for index, value in enumerate(receiver)]
    _no_overload("comprehension", receiver)


def _pairs_to_map(pairs: list[list[Any]]) -> dict[Any, Any]:
    return {key: value for key, value in pairs}


def _merge_entries(entries: list[Any]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for entry in entries:
        if not isinstance(entry, dict) or tag_of(entry) is not None:
            _no_overload("transformMapEntry", entry)
        for key, value in entry.items():
            if key in out:
                _fail(f"insert failed: key {key} already exists")
            out[key] = value
    return out


def _sort_by_keys(pairs: list[list[Any]]) -> list[Any]:
    try:
        return [value for _, value in sorted(pairs, key=lambda pair: pair[0])]
    except TypeError:
        _fail("list elements must be comparable")


# The rest of Kubernetes' ext strings (v2) and sets, as the cel package provides them.
_STDLIB: dict[str, Callable[..., Any]] = {
    "lowerAscii": cel_stdlib.lower_ascii,
    "upperAscii": cel_stdlib.upper_ascii,
    "replace": cel_stdlib.replace,
    "split": cel_stdlib.split,
    "trim": cel_stdlib.trim,
    "join": cel_stdlib.join,
    "strings.quote": cel_stdlib.quote,
    "sets.contains": cel_stdlib.sets_contains,
    "sets.equivalent": cel_stdlib.sets_equivalent,
    "sets.intersects": cel_stdlib.sets_intersects,
    "sum": cel_stdlib.sum_,
}
_LIBRARY = {name: _guarded(name, fn) for name, fn in _STDLIB.items()}
_CHECKED: dict[str, Callable[..., Any]] = {"charAt": _char_at, "substring": _substring, "slice": _slice}
_LIBRARY.update({name: _guarded(name, fn) for name, fn in _CHECKED.items()})
_LIBRARY.update({
    "bool": _bool,
    "indexOf": _list_index_of,
    "lastIndexOf": _list_last_index_of,
    "min": _extreme("min", min),
    "max": _extreme("max", max),
    "isSorted": _is_sorted,
    "sort": _sort,
    "distinct": _distinct,
    "flatten": _flatten,
    "reverse": _reverse,
    "lists.range": _range,
    "first": _first,
    "last": _last,
    "optional.unwrap": _unwrap_optionals,
    "unwrapOpt": _unwrap_optionals,
})

# What ``desugar`` rewrites syntax into; never callable from a selector's own text.
HELPERS: dict[str, Callable[..., Any]] = {
    "_ct_opt_field": _opt_field,
    "_ct_opt_index": _opt_index,
    "_ct_opt_domain": _opt_domain,
    "_ct_opt_as_list": _opt_as_list,
    "_ct_opt_from_list": _opt_from_list,
    "_ct_opt_flat_from_list": _opt_flat_from_list,
    "_ct_opt_list_literal": _opt_list_literal,
    "_ct_opt_map_literal": _opt_map_literal,
    "_ct_pairs": _pairs,
    "_ct_pairs_to_map": _pairs_to_map,
    "_ct_merge_entries": _merge_entries,
    "_ct_sort_by_keys": _sort_by_keys,
    "_ct_in_order": _in_order,
    **extensions.HELPERS,
}


# Built once: every device context registers the same functions. ``includes`` is declared whether
# or not DRAListTypeAttributes is on (the gate decides only whether list attributes exist).
_PUBLIC: dict[str, Callable[..., Any]] = {**_LIBRARY, **_QUANTITY_AND_SEMVER, **extensions.FUNCTIONS,
                                          "includes": _includes}
_FUNCTIONS = {**_PUBLIC, **HELPERS}
PUBLIC_FUNCTIONS = frozenset(_PUBLIC)


def functions_for() -> dict[str, Callable[..., Any]]:
    """The functions a device context registers: the public ones and the rewrite helpers.
    The map is shared by every caller and must not be changed."""
    return _FUNCTIONS
