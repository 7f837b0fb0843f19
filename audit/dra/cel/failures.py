"""How library functions fail a selector with upstream's text.

The ``cel`` binding wraps an exception raised in a Python callback in a message of its own, so the
text cel-go would give is kept in a per-thread slot (evaluation is synchronous) for
``environment`` to report.
"""

from __future__ import annotations

import threading
from typing import Any, NoReturn

from audit.dra.cel.values import type_name

_FAILURE = threading.local()


class FunctionFailed(Exception):
    pass


def fail(message: str) -> NoReturn:
    _FAILURE.message = message
    raise FunctionFailed(message)


def no_overload(name: str, *args: Any) -> NoReturn:
    """cel-go's run-time dispatch error (a statically typed call is refused when compiling instead)."""
    fail(f"no such overload: {name}({', '.join(type_name(a) for a in args)})")


def clear_failure() -> None:
    _FAILURE.message = None


def last_failure() -> str | None:
    """The upstream text of the last function that failed in this thread, if any."""
    message: str | None = getattr(_FAILURE, "message", None)
    return message
