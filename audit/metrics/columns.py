"""The pod lifecycle as columns: one numpy array per ``PodLife`` field, kept current row by row.

A day of a large cluster holds hundreds of thousands of pods; a window's figures visit every one
of them, which in a Python loop over ``PodLife`` objects takes seconds. The fold therefore also
keeps each field in an array, rewriting only the rows of pods that changed since it last looked
(``PodColumns.sync``), and ``audit.metrics.columnar`` evaluates the reference functions' rules on
whole arrays. The rows hold exactly what the ``PodLife`` objects hold: a time that has not
happened (``None``) is ``NEVER``, strings are codes into ``names`` and a pod's H100-equivalent
weight a code into ``weights`` (a cluster has few distinct ones: sums per weight stay integers).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from audit.metrics.lifecycle import PodLife

NEVER = np.iinfo(np.int64).max  # a time not reached yet: later than every window's end

_TIMES = ("created_ms", "bound_ms", "failed_ms", "allocated_ms", "released_ms")
_FLAGS = ("dra", "alternatives", "first_choice", "fallback", "regretted")
_CODES = ("tenant", "preferred", "allocated")


@dataclass(frozen=True)
class Columns:
    """A read-only view of the first ``n`` rows (what a ``Lifecycle`` snapshot covers)."""

    n: int
    created_ms: Any
    bound_ms: Any
    failed_ms: Any
    allocated_ms: Any
    released_ms: Any
    devices: Any
    h100_eq: Any  # codes into weights
    dra: Any
    alternatives: Any
    first_choice: Any
    fallback: Any
    regretted: Any
    tenant: Any  # codes into names
    preferred: Any
    allocated: Any
    names: tuple[str, ...]
    weights: tuple[float, ...]


class PodColumns:
    """Growable arrays of the pods' fields; row i is ``lives[i]``."""

    def __init__(self) -> None:
        self.n = 0
        self._cap = 0
        self._arrays: dict[str, Any] = {}
        self._names: list[str] = []
        self._code: dict[str, int] = {}
        self._weights: list[float] = []
        self._weight_code: dict[float, int] = {}
        # a view handed out shares the arrays: the next write copies them first, so a figure being
        # computed from an earlier snapshot never sees rows of a later one
        self._shared = False
        self._grow(1024)

    @classmethod
    def of(cls, pods: Sequence[PodLife]) -> PodColumns:
        cols = cls()
        cols.sync(pods, range(len(pods)))
        return cols

    def fork(self) -> PodColumns:
        """Columns equal to these, synced on independently. The arrays are shared and marked so on
        both sides, as for a view handed out: a side copies them when it first writes, and a side
        that never writes never pays for a copy."""
        cols = PodColumns.__new__(PodColumns)
        cols.n, cols._cap = self.n, self._cap
        cols._arrays = dict(self._arrays)
        cols._names, cols._code = list(self._names), dict(self._code)
        cols._weights, cols._weight_code = list(self._weights), dict(self._weight_code)
        cols._shared = self._shared = True
        return cols

    def _grow(self, cap: int) -> None:
        dtypes = {**dict.fromkeys(_TIMES, np.int64), "devices": np.int64, "h100_eq": np.int32,
                  **dict.fromkeys(_FLAGS, np.bool_), **dict.fromkeys(_CODES, np.int32)}
        for name, dtype in dtypes.items():
            new: Any = np.zeros(cap, dtype=dtype)
            old = self._arrays.get(name)
            if old is not None:
                new[:self.n] = old[:self.n]
            self._arrays[name] = new
        self._cap = cap

    def _intern(self, s: str) -> int:
        code = self._code.get(s)
        if code is None:
            code = self._code[s] = len(self._names)
            self._names.append(s)
        return code

    def _weight(self, w: float) -> int:
        code = self._weight_code.get(w)
        if code is None:
            code = self._weight_code[w] = len(self._weights)
            self._weights.append(w)
        return code

    def sync(self, lives: Sequence[PodLife], rows: Iterable[int]) -> None:
        """Rewrite ``rows`` of ``lives`` (the rows of pods added or changed since the last sync)."""
        if len(lives) > self._cap:
            self._grow(max(len(lives), 2 * self._cap))
        idx = np.fromiter(rows, dtype=np.int64)
        if idx.size == 0:
            self.n = max(self.n, len(lives))
            return
        picked = [lives[i] for i in idx.tolist()]
        if self._shared:
            self._arrays = {name: array.copy() for name, array in self._arrays.items()}
            self._shared = False
        a = self._arrays
        for name in _TIMES:
            a[name][idx] = [NEVER if (v := getattr(p, name)) is None else v for p in picked]
        a["devices"][idx] = [p.devices for p in picked]
        a["h100_eq"][idx] = [self._weight(p.h100_eq) for p in picked]
        a["dra"][idx] = [p.track == "dra" for p in picked]
        a["alternatives"][idx] = [p.alternatives for p in picked]
        a["first_choice"][idx] = [p.first_choice for p in picked]
        a["fallback"][idx] = [p.fallback for p in picked]
        a["regretted"][idx] = [p.regretted for p in picked]
        for name in _CODES:
            a[name][idx] = [self._intern(getattr(p, name)) for p in picked]
        self.n = max(self.n, len(lives))

    def view(self) -> Columns:
        n = self.n
        self._shared = True
        return Columns(n, **{k: v[:n] for k, v in self._arrays.items()}, names=tuple(self._names),
                       weights=tuple(self._weights))
