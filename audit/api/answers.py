"""A bounded cache of answers that cannot change: a stored decision, and its summary "why".

History is append-only (``audit.store.history``): once a decision id is stored, its record never
changes, and the summary explanation is a pure function of the record and the model asked about.
So a decision found once, and each summary computed from it, can be served again without the
store. Only answers that were found are kept (a decision not stored yet may arrive any moment),
keyed by everything that shapes them: the caller's scope and the redaction in force. The least
recently used entries go first beyond ``size``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

DEFAULT_SIZE = 20_000


class AnswerCache:
    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get_or_compute(self, key: Hashable, compute: Callable[[], T | None]) -> T | None:
        """The cached answer for ``key``, else ``compute()`` (kept unless it is None)."""
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                self.hits += 1
                found: T = self._entries[key]
                return found
            self.misses += 1
        value = compute()
        return value if value is None else self.keep(key, value)

    def keep(self, key: Hashable, value: T) -> T:
        """Keep ``value`` as the answer for ``key`` (whose miss is already counted) and return it."""
        with self._lock:
            self._entries[key] = value
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return value
