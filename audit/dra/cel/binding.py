"""Loads the Rust-backed ``cel`` package without the interactive shell its ``__init__`` imports.

``cel/__init__.py`` (common-expression-language) imports ``cel.cli``, a REPL built on typer,
rich, prompt_toolkit and pygments that the selectors never use and that costs more start-up
time than the whole allocator. ``preload()`` registers the ``cel`` package in ``sys.modules``
with what its ``__init__`` exports from the core extension (``cel.cel``) and its ``stdlib``,
so a later ``import cel`` finds it ready; ``cel.cli`` stays importable on demand. When ``cel``
was already imported the normal way, nothing changes.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys


def preload() -> None:
    if "cel" in sys.modules:
        return
    spec = importlib.util.find_spec("cel")
    if spec is None or spec.submodule_search_locations is None:
        raise ImportError("the 'cel' package (common-expression-language) is not installed")
    package = importlib.util.module_from_spec(spec)
    sys.modules["cel"] = package
    try:
        core = importlib.import_module("cel.cel")
        for name in getattr(core, "__all__", ()):
            setattr(package, name, getattr(core, name))
        package.stdlib = importlib.import_module("cel.stdlib")  # type: ignore[attr-defined]
    except BaseException:
        del sys.modules["cel"]
        raise
