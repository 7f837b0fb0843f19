"""A bounded cache of listing pages, each valid while the stored decisions stay as they were.

Dashboards ask for the same newest page of a tenant again and again, and most of the time nothing
was stored in between. A page (its encoded body) is kept with the store's version of its decisions
(``AuditStore.decisions_version``) at the moment its query started, and served again only while
the store still reports that version: any insert, merge or expiry moves it on, so a page never
outlives what it shows. (Read before the query, the version can only be older than the data the
query saw; such a page is never served, since the version has moved past it.) A store that cannot
tell its version (a cluster) is not cached. Keys hold everything that shapes a page: the filter,
cursor and limit, and the caller's scope and redaction. The least recently used go first beyond
``size``. Readers that miss the same page at the same version while one of them reads it wait for
that read rather than repeating it: after an insert moves the version on, every dashboard or reader
polling a tenant's newest page misses it at once, and each of those reads would cost the same.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

DEFAULT_SIZE = 2_000


class _Read:
    """One read of a page in progress, which readers of the same page and version wait for."""

    __slots__ = ("done", "ok", "value")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.ok = False
        self.value: Any = None


class PageCache:
    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, tuple[Hashable, Any]] = OrderedDict()
        self._reading: dict[tuple[Hashable, Hashable], _Read] = {}
        self.hits = 0  # served without a read of the store: kept, or read meanwhile for another reader
        self.misses = 0

    def get_or_compute(self, key: Hashable, version: Hashable | None, compute: Callable[[], Any]) -> Any:
        """The page kept for ``key`` at ``version``, else the one another reader is computing for
        them, else ``compute()`` (kept at ``version``)."""
        if version is None:
            return compute()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] == version:
                self._entries.move_to_end(key)
                self.hits += 1
                return entry[1]
            read = self._reading.get((key, version))
            if read is None:
                read = self._reading[(key, version)] = _Read()
                self.misses += 1
                mine = True
            else:
                self.hits += 1
                mine = False
        if not mine:
            read.done.wait()
            if read.ok:
                return read.value
            with self._lock:  # a read that failed (the store was away) is not shared: this one tries itself
                self.hits -= 1
                self.misses += 1
            return compute()
        try:
            read.value = compute()
            read.ok = True
        finally:
            with self._lock:
                del self._reading[(key, version)]
                if read.ok:
                    self._entries[key] = (version, read.value)
                    self._entries.move_to_end(key)
                    while len(self._entries) > self._size:
                        self._entries.popitem(last=False)
            read.done.set()
        return read.value
