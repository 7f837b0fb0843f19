"""Compiling selectors once and evaluating them on devices, with upstream's error texts."""

from __future__ import annotations

import re
import weakref

import cel

from audit.dra.cel.checks import analyse, validate_literals
from audit.dra.cel.contract import MAX_EXPRESSION_LENGTH, CelCompileError, CelOptions, CelRuntimeError
from audit.dra.cel.desugar import desugar
from audit.dra.cel.device import CelDevice
from audit.dra.cel.failures import clear_failure, last_failure
from audit.dra.cel.footprint import Path, footprint
from audit.dra.cel.library import PUBLIC_FUNCTIONS
from audit.dra.cel.syntax import with_empty_domains, with_own_methods
from audit.dra.cel.values import type_name

_PYTHON_FAILURE = "Python function call failed"
# The binding's conversion failures, and the type names cel-go's "type conversion error" gives.
_CONVERSION = re.compile(r"Function '(int|uint|double|duration|timestamp)' error: (?:string parse error|Parsing Error|"
                         r"premature end|input contains invalid|invalid|trailing input)")
_CONVERSION_TYPES = {"int": "int", "uint": "uint", "double": "double", "duration": "google.protobuf.Duration",
                     "timestamp": "google.protobuf.Timestamp"}
# cel-go's texts of run-time errors the binding words its own way.
_BINDING_TEXTS = (
    (re.compile(r"Function 'int' error: integer overflow"), "integer overflow"),
    (re.compile(r"Function 'uint' error: unsigned integer overflow"), "unsigned integer overflow"),
    (re.compile(r"optional\.none\(\) dereference"), "optional.none() dereference"),
)


def _overflow(message: str) -> str:
    """``integer overflow`` or ``unsigned integer overflow``: the binding names the operation and
    its operands but not their type. A negative operand is an int and one past int64 a uint; of
    two that fit both, subtracting overflows only as uints, adding and multiplying are taken as
    ints (two such uints cannot overflow when added; products are ambiguous, and ints usual)."""
    found = re.match(r"Arithmetic overflow in '(\w+)' on (-?\d+) and (-?\d+)", message)
    if found is None:
        return "integer overflow"
    operation, left, right = found.group(1), int(found.group(2)), int(found.group(3))
    if left < 0 or right < 0:
        return "integer overflow"
    if left >= 2**63 or right >= 2**63 or operation == "sub":
        return "unsigned integer overflow"
    return "integer overflow"


def _runtime_error(exc: Exception) -> CelRuntimeError:
    """Translate an error of the binding into the text cel-go would give."""
    if isinstance(exc, KeyError):
        key = exc.args[0] if exc.args else ""
        return CelRuntimeError(f"no such key: {key}")
    message = str(exc)
    recorded = last_failure()
    if recorded is not None and _PYTHON_FAILURE in message:
        return CelRuntimeError(recorded)
    if isinstance(exc, ZeroDivisionError):
        return CelRuntimeError("modulus by zero" if message.startswith("modulo") else "division by zero")
    if message.startswith("Arithmetic overflow"):
        return CelRuntimeError(_overflow(message))
    conversion = _CONVERSION.match(message)
    if conversion:
        return CelRuntimeError(f"type conversion error from 'string' to '{_CONVERSION_TYPES[conversion.group(1)]}'")
    for pattern, text in _BINDING_TEXTS:
        if pattern.search(message):
            return CelRuntimeError(text)
    undefined = re.match(r"Undefined variable or function: '([^']*)'", message)
    if undefined:
        return CelRuntimeError(f"no such overload: {undefined.group(1)}")
    if isinstance(exc, TypeError):
        # cel-go's text for an operator applied to operands it has no overload for; the binding's
        # own text would name the tagged representation ("map") instead of the Kubernetes type.
        return CelRuntimeError("no such overload")
    return CelRuntimeError(message)


# Why cel-go's ConvertToNative refuses a value of each type as a bool, as the allocator's message
# ends ("CEL result of type int could not be converted to bool: ...").
_NOT_BOOL = {
    "string": "unsupported native conversion from string to 'bool'",
    "int": "unsupported type conversion from 'int' to bool",
    "uint": "unsupported type conversion from 'uint' to bool",
    "double": "type conversion error from Double to 'bool'",
    "bytes": "type conversion error from Bytes to 'bool'",
    "null_type": "type conversion error from 'null_type' to 'bool'",
    "list": "type conversion error from list to 'bool'",
    "map": "type conversion error from map to 'bool'",
    "kubernetes.Quantity": "type conversion error from 'Quantity' to 'bool'",
    "kubernetes.Semver": "type conversion error from 'Semver' to 'bool'",
    "google.protobuf.Duration": "type conversion error from 'Duration' to 'bool'",
    "google.protobuf.Timestamp": "type conversion error from 'Timestamp' to 'bool'",
}


def _not_bool(result: object) -> str:
    if isinstance(result, cel.OptionalValue):
        # An optional converts as the value it holds.
        return _not_bool(result.value()) if result.has_value() else _NOT_BOOL["null_type"]
    name = type_name(result)
    return _NOT_BOOL.get(name, f"type conversion error from '{name}' to 'bool'")


# Results kept per footprint value of one selector; past this many distinct values (a selector
# on per-device ids such as a UUID) new ones are evaluated without being kept.
MAX_SHARED_RESULTS = 65536


class CompiledSelector:
    """A compiled selector; ``evaluate`` caches its result per device object, and for selectors
    with a footprint also per footprint value, which devices of one model share."""

    __slots__ = ("expression", "footprint", "_program", "_results", "_shared")

    def __init__(self, expression: str, program: cel.Program, paths: tuple[Path, ...] | None = None) -> None:
        self.expression = expression
        self.footprint = paths  # the device paths the selector reads; None: it may read anything
        self._program = program
        # Weak keys: a long simulation builds many short-lived devices; results must not keep them.
        self._results: weakref.WeakKeyDictionary[CelDevice, bool | CelRuntimeError] = weakref.WeakKeyDictionary()
        self._shared: dict[tuple[object, ...], bool | CelRuntimeError] = {}

    def evaluate(self, device: CelDevice) -> bool:
        """True/False, or CelRuntimeError when evaluation fails on this device."""
        if self.footprint is not None and device.error is None:
            key = device.values_at(self.footprint)
            outcome = self._shared.get(key)
            if outcome is None:
                outcome = self._execute(device.narrowed_context(self.footprint))
                if len(self._shared) < MAX_SHARED_RESULTS:
                    self._shared[key] = outcome
        else:
            outcome = self._results.get(device)
            if outcome is None:
                outcome = self._run(device)
                self._results[device] = outcome
        if isinstance(outcome, CelRuntimeError):
            # One error answers many evaluations; a fresh traceback keeps each raise from growing
            # the previous one (and keeping its frames alive).
            raise outcome.with_traceback(None)
        return outcome

    def _run(self, device: CelDevice) -> bool | CelRuntimeError:
        """Evaluate on the whole device, ignoring the footprint and every cache."""
        if device.error is not None:
            return CelRuntimeError(device.error)
        return self._execute(device.context)

    def _execute(self, context: cel.Context) -> bool | CelRuntimeError:
        clear_failure()
        try:
            result = self._program.execute(context)
        except Exception as exc:  # the binding raises several exception types for run-time errors
            return _runtime_error(exc)
        if isinstance(result, bool):
            return result
        return CelRuntimeError(f"CEL result of type {type_name(result)} could not be converted to bool: "
                               f"{_not_bool(result)}")


class CelEnvironment:
    """Compiles selectors for one set of feature gates; compiled selectors are cached by text."""

    def __init__(self, options: CelOptions = CelOptions()) -> None:
        self.options = options
        self._compiled: dict[str, CompiledSelector | CelCompileError] = {}

    def compile(self, expression: str) -> CompiledSelector:
        """Compile ``expression`` or raise CelCompileError (cached, errors included)."""
        cached = self._compiled.get(expression)
        if cached is None:
            cached = self._compile(expression)
            self._compiled[expression] = cached
        if isinstance(cached, CelCompileError):
            raise cached
        return cached

    def _compile(self, expression: str) -> CompiledSelector | CelCompileError:
        size = len(expression.encode())
        if size > MAX_EXPRESSION_LENGTH:
            return CelCompileError(
                f"compilation failed: expression too long ({size} bytes, must be at most {MAX_EXPRESSION_LENGTH})")
        try:
            cel.compile(expression)
        except Exception as exc:  # the binding reports syntax errors as ValueError with a position
            detail = _syntax_errors(str(exc))
            if detail:
                return CelCompileError(f"compilation failed: {detail}")
        try:
            analyse(expression, self.options.consumable_capacity, PUBLIC_FUNCTIONS)
            validate_literals(expression)
        except CelCompileError as exc:
            return exc
        try:
            program = cel.compile(with_own_methods(with_empty_domains(desugar(expression)), _OWN_METHODS))
        except Exception as exc:  # only an unforeseen shape of a rewrite can get here
            return CelCompileError(f"compilation failed: this evaluator cannot run the expression: {exc}")
        return CompiledSelector(expression, program, footprint(expression))


# cel-go's matches reads RE2 syntax with ASCII classes; the binding's runs Rust's regex crate.
_OWN_METHODS = {"matches": "_ct_matches"}

# The binding's parser refuses optional syntax, which ``desugar`` rewrites: those errors are not
# the expression's.
_DESUGARED_SYNTAX = ("unsupported syntax '.?'", "unsupported syntax '[?'", "unsupported syntax '?'")


def _syntax_errors(message: str) -> str:
    """cel-go's report of the parse errors in a message of the binding, without those of syntax
    ``desugar`` rewrites ('' when no other remains)."""
    start = message.find("ERROR: <input>")
    if start < 0:
        return message
    blocks = re.split(r"\n(?=ERROR: <input>)", message[start:])
    kept = [b for b in blocks if not any(syntax in b.split("\n", 1)[0] for syntax in _DESUGARED_SYNTAX)]
    return "\n".join(kept).replace("\n| ", "\n | ")
