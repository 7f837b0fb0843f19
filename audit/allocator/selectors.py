"""CEL selector evaluation for the allocator, cached per (device, expression).

Selector results depend only on the device and the expression, and an ``Inventory`` never
changes its devices, so results are kept on the device entry across allocation calls. Errors
are not cached as results: they abort the allocation anyway and must be re-raised with the
claim or class that referenced the expression.
"""

from __future__ import annotations

from typing import Any

from audit.allocator.features import Features
from audit.allocator.inventory import DeviceEntry


class SelectorFailure(Exception):
    """A selector could not be evaluated: ``kind`` is "compile" or "runtime"."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


class SelectorEvaluator:
    """Compiles each expression once and evaluates it against devices."""

    def __init__(self, features: Features) -> None:
        import importlib

        cel: Any = importlib.import_module("audit.dra.cel")

        self._cel = cel
        self._options = cel.CelOptions(
            consumable_capacity=features.consumable_capacity,
            list_type_attributes=features.list_type_attributes,
        )
        self._env = cel.CelEnvironment(self._options)
        self._compiled: dict[str, Any] = {}
        self._compile_errors: dict[str, str] = {}

    def matches(self, entry: DeviceEntry, expression: str) -> bool:
        cached = entry.cel_results.get(expression)
        if cached is not None:
            return cached
        compiled = self._compile(expression)
        if entry.cel_device is None:
            # API-shaped maps; unqualified names belong to the driver's domain.
            entry.cel_device = self._cel.device_context(
                entry.driver, entry.device.raw_attributes, entry.device.raw_capacity,
                entry.device.allow_multiple_allocations, self._options,
            )
        try:
            result = bool(compiled.evaluate(entry.cel_device))
        except self._cel.CelRuntimeError as exc:
            raise SelectorFailure("runtime", str(exc)) from None
        entry.cel_results[expression] = result
        return result

    def _compile(self, expression: str) -> Any:
        compiled = self._compiled.get(expression)
        if compiled is not None:
            return compiled
        if expression in self._compile_errors:
            raise SelectorFailure("compile", self._compile_errors[expression])
        try:
            compiled = self._env.compile(expression)
        except self._cel.CelCompileError as exc:
            self._compile_errors[expression] = str(exc)
            raise SelectorFailure("compile", str(exc)) from None
        self._compiled[expression] = compiled
        return compiled

