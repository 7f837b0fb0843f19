"""The vocabulary the DRA CEL environment shares with its callers: options, errors and limits."""

from __future__ import annotations

from dataclasses import dataclass

# resourceapi.CELSelectorExpressionMaxLength
MAX_EXPRESSION_LENGTH = 10 * 1024
# includes() refuses lists longer than the per-device attribute value limit (KEP-5491).
MAX_INCLUDES_ITEMS = 48


class CelCompileError(ValueError):
    """The expression is not a valid selector: ``compilation failed: <cel-go's errors>``, or why its
    result type cannot be a selector's."""


class CelRuntimeError(RuntimeError):
    """Evaluating a selector on one device failed (e.g. ``no such key: memory``)."""


@dataclass(frozen=True)
class CelOptions:
    """Feature gates that change the environment (``DRAConsumableCapacity``, ``DRAListTypeAttributes``)."""

    consumable_capacity: bool = True
    list_type_attributes: bool = False
