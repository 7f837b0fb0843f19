"""Compiling selectors once and evaluating them on devices, with upstream's error texts."""

from __future__ import annotations

import re
import weakref

import cel

from audit.dra.cel.checks import analyse
from audit.dra.cel.contract import MAX_EXPRESSION_LENGTH, CelCompileError, CelOptions, CelRuntimeError
from audit.dra.cel.device import CelDevice
from audit.dra.cel.footprint import Path, footprint
from audit.dra.cel.library import PUBLIC_FUNCTIONS, clear_failure, last_failure
from audit.dra.cel.syntax import with_empty_domains
from audit.dra.cel.values import type_name

_PYTHON_FAILURE = "Python function call failed"


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
        return CelRuntimeError("division by zero")
    undefined = re.match(r"Undefined variable or function: '([^']*)'", message)
    if undefined:
        return CelRuntimeError(f"no such overload: {undefined.group(1)}")
    if isinstance(exc, TypeError):
        # cel-go's text for an operator applied to operands it has no overload for; the binding's
        # own text would name the tagged representation ("map") instead of the Kubernetes type.
        return CelRuntimeError("no such overload")
    return CelRuntimeError(message)


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
        return CelRuntimeError(f"CEL result of type {type_name(result)} could not be converted to bool")


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
            program = cel.compile(expression)
        except Exception as exc:  # the binding reports syntax errors as ValueError with a position
            message = str(exc)
            start = message.find("ERROR: <input>")
            detail = (message[start:] if start >= 0 else message).replace("\n| ", "\n | ")
            return CelCompileError(f"compilation failed: {detail}")
        try:
            analyse(expression, self.options.consumable_capacity, PUBLIC_FUNCTIONS)
        except CelCompileError as exc:
            return exc
        rewritten = with_empty_domains(expression)
        if rewritten != expression:
            try:
                program = cel.compile(rewritten)
            except Exception as exc:  # only an unforeseen shape of domain access can get here
                return CelCompileError(f"compilation failed: cannot make unknown domains empty maps: {exc}")
        return CompiledSelector(expression, program, footprint(expression))
