"""The functions of the selector environment: Kubernetes' quantity and semver libraries, ``includes``
and the string, set and list helpers the ``cel`` package provides.

Each function refuses arguments of the wrong type with cel-go's ``no matching overload`` text and
fails with cel-go's own error texts (``index out of range: 5``). The
binding wraps exceptions raised in callbacks in its own message, so the upstream text is kept in a
per-thread slot (evaluation is synchronous) for ``environment`` to report.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, NoReturn

from cel import stdlib as cel_stdlib

from audit.dra.cel.contract import MAX_INCLUDES_ITEMS
from audit.dra.cel.values import parse_semver, type_name, unwrap, wrap_quantity, wrap_semver
from audit.dra.quantity import Quantity
from audit.dra.semver import Semver, normalize_semver

# Failing selectors are reported through CelRuntimeError; the binding would also log each failed
# callback as a warning, which would duplicate every expected error on stderr.
logging.getLogger("cel").setLevel(logging.ERROR)


_FAILURE = threading.local()


class _FunctionFailed(Exception):
    pass


def _fail(message: str) -> NoReturn:
    _FAILURE.message = message
    raise _FunctionFailed(message)


def _no_overload(name: str, *args: Any) -> NoReturn:
    # cel-go's run-time dispatch error (a statically typed call is refused when compiling instead).
    _fail(f"no such overload: {name}({', '.join(type_name(a) for a in args)})")


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
    """CEL equality for includes(): tagged values by value, bool never equal to int."""
    ua, ub = unwrap(a), unwrap(b)
    if ua is not None or ub is not None:
        return type(ua) is type(ub) and ua == ub
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
        if any(unwrap(a) is not None for a in args):
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


# Kubernetes' ext strings (v2), sets and list aggregates, as far as the cel package provides them.
_STDLIB: dict[str, Callable[..., Any]] = {
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": cel_stdlib.lower_ascii,
    "upperAscii": cel_stdlib.upper_ascii,
    "replace": cel_stdlib.replace,
    "split": cel_stdlib.split,
    "substring": _substring,
    "trim": cel_stdlib.trim,
    "join": cel_stdlib.join,
    "strings.quote": cel_stdlib.quote,
    "sets.contains": cel_stdlib.sets_contains,
    "sets.equivalent": cel_stdlib.sets_equivalent,
    "sets.intersects": cel_stdlib.sets_intersects,
    "min": cel_stdlib.min_,
    "max": cel_stdlib.max_,
    "sum": cel_stdlib.sum_,
}
_LIBRARY = {name: _guarded(name, fn) for name, fn in _STDLIB.items()}
_LIBRARY["bool"] = _bool


# Built once: every device context registers the same functions. ``includes`` is declared whether
# or not DRAListTypeAttributes is on (the gate decides only whether list attributes exist).
_FUNCTIONS: dict[str, Callable[..., Any]] = {**_LIBRARY, **_QUANTITY_AND_SEMVER, "includes": _includes}
PUBLIC_FUNCTIONS = frozenset(_FUNCTIONS)


def functions_for() -> dict[str, Callable[..., Any]]:
    """The functions a device context registers. The map is shared by every caller and must not
    be changed."""
    return _FUNCTIONS


def clear_failure() -> None:
    _FAILURE.message = None


def last_failure() -> str | None:
    """The upstream text of the last function that failed in this thread, if any."""
    message: str | None = getattr(_FAILURE, "message", None)
    return message
