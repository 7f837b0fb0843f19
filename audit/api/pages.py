"""A bounded cache of listing pages, each valid while the stored decisions stay as they were.

Dashboards ask for the same newest page of a tenant again and again, and most of the time nothing
was stored in between. A page is kept with the store's version of its decisions
(``AuditStore.decisions_version``) at the moment its query started, and served again only while
the store still reports that version: any insert, merge or expiry moves it on, so a page never
outlives what it shows. (Read before the query, the version can only be older than the data the
query saw; such a page is never served, since the version has moved past it.) A store that cannot
tell its version (a cluster) is not cached. Keys hold everything that shapes a page: the filter,
cursor and limit, and the caller's scope and redaction. The least recently used go first beyond
``size``.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

DEFAULT_SIZE = 2_000


class PageCache:
    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[Hashable, Any]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get_or_compute(self, key: Hashable, version: Hashable | None, compute: Callable[[], Any]) -> Any:
        """The page kept for ``key`` at ``version``, else ``compute()`` (kept at ``version``)."""
        if version is None:
            return compute()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] == version:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry[1]
            self.misses += 1
        value = compute()
        with self._lock:
            self._entries[key] = (version, value)
            self._entries.move_to_end(key)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return value
