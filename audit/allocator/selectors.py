"""CEL selector evaluation for the allocator, cached per (device, expression).

Selector results depend only on the device and the expression, and an ``Inventory`` never
changes its devices, so results are kept on the device entry across allocation calls. An
evaluator shared by several inventories (one per node, rebuilt when the node's taints change)
also keeps each parsed device's results and CEL context, so an entry rebuilt over the same parsed
device starts with them. Errors are not cached as results: they abort the allocation anyway and
must be re-raised with the claim or class that referenced the expression.
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
        # id(parsed device) -> (that device, its driver, its CEL context, its results): what an
        # entry's context and results are made of, whichever inventory the entry belongs to
        self._devices: dict[int, tuple[Any, str, Any, dict[str, bool]]] = {}

    _KEPT_DEVICES = 100_000

    def matches(self, entry: DeviceEntry, expression: str) -> bool:
        cached = entry.cel_results.get(expression)
        if cached is not None:
            return cached
        if entry.cel_device is None and self._adopt(entry):
            # (a result kept for the device was compiled here before: compiling again changes nothing)
            cached = entry.cel_results.get(expression)
            if cached is not None:
                return cached
        compiled = self._compile(expression)
        if entry.cel_device is None:
            self._keep(entry)
        try:
            result = bool(compiled.evaluate(entry.cel_device))
        except self._cel.CelRuntimeError as exc:
            raise SelectorFailure("runtime", str(exc)) from None
        entry.cel_results[expression] = result
        return result

    def _adopt(self, entry: DeviceEntry) -> bool:
        """Give a fresh entry the context and results kept for its parsed device (the same object,
        under the same driver: the context is made of nothing else); False when none are kept."""
        device = entry.device
        kept = self._devices.get(id(device))
        if kept is None or kept[0] is not device or kept[1] != entry.driver:
            return False
        entry.cel_device = kept[2]
        kept[3].update(entry.cel_results)
        entry.cel_results = kept[3]
        return True

    def _keep(self, entry: DeviceEntry) -> None:
        """Build the entry's CEL context and keep it, with the entry's results, for its device."""
        device = entry.device
        # API-shaped maps; unqualified names belong to the driver's domain.
        entry.cel_device = self._cel.device_context(
            entry.driver, device.raw_attributes, device.raw_capacity, device.allow_multiple_allocations, self._options,
        )
        if len(self._devices) >= self._KEPT_DEVICES:
            self._devices.clear()
        self._devices[id(device)] = (device, entry.driver, entry.cel_device, entry.cel_results)

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

