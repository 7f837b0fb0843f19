"""A fold's whole state as plain values, to hold two folds equal bit for bit.

Objects count by their fields, dicts and sequences in their iteration order (sets have none to
keep), floats by their bits. Left out: the caches a ``World.fork()`` starts afresh, and the flag
that only says whether the columns' arrays are shared with a view handed out.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import Any

import numpy as np

from audit.metrics import LifecycleFold
from audit.metrics.columns import PodColumns
from audit.metrics.regret import RegretWatch
from audit.world import World

_NOT_STATE = {World: {"derived"}, PodColumns: {"_shared"}}
_HOLDERS = (LifecycleFold, World, RegretWatch, PodColumns)


def fold_state(x: Any) -> Any:
    """Everything ``x`` (a fold, a lifecycle, a report, or any part of one) holds."""
    if isinstance(x, _HOLDERS):
        skip = _NOT_STATE.get(type(x), set())
        return type(x).__name__, [(k, fold_state(v)) for k, v in vars(x).items() if k not in skip]
    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        return type(x).__name__, [(f.name, fold_state(getattr(x, f.name))) for f in dataclasses.fields(x)]
    if isinstance(x, dict):
        return "dict", [(fold_state(k), fold_state(v)) for k, v in x.items()]
    if isinstance(x, list | tuple | deque):
        return type(x).__name__, [fold_state(v) for v in x]
    if isinstance(x, set | frozenset):
        return "set", frozenset(x)
    if isinstance(x, np.ndarray):
        return "array", x.dtype.str, x.tolist()
    if isinstance(x, float):
        return "float", x.hex()
    return x
