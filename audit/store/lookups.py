"""Decisions asked for by id at the same moment, read from the store by one query.

A read by id costs the embedded engine about a millisecond and a half of work before it reads
anything (parsing, planning, a pipeline per query), more than finding the record. Under many
concurrent readers, lookups by id queue for a client of the read pool (``audit.store.pool``); the
lookups that arrive while one waits (for a client, or for one of the reads by id allowed at once)
join it, and once it has a client, all of them are read by one ``IN`` query (four ids cost about a
third of the engine time of four single reads). A lookup
that finds a client free at once runs alone, with the single-id query, and waits for nothing. Each
caller gets only a record of its own tenant scope, as the single query's condition would give.
If the shared read fails, each waiting caller reads its own id again, so a failure is reported to
every caller as its own. A server that keeps an index of records by id (``audit.store.id_index``)
asks here only for what its index does not hold.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

DEFAULT_MOST = 64  # ids read by one query; later lookups start a batch of their own

# (client, decision id, tenant or None) -> the record text the caller may see, or None
OneQuery = Callable[[Any, str, "str | None"], "str | None"]
# (client, decision ids) -> {decision id: (tenant, record text)} for the ids found
ManyQuery = Callable[[Any, list[str]], dict[str, tuple[str, str]]]


class _Batch:
    __slots__ = ("done", "found", "ids", "ok")

    def __init__(self) -> None:
        self.ids: list[str] = []  # one per caller waiting
        self.done = threading.Event()
        self.ok = False
        self.found: dict[str, tuple[str, str]] = {}


class IdLookups:
    def __init__(self, client: Callable[[], AbstractContextManager[Any]], one: OneQuery, many: ManyQuery,
                 most: int = DEFAULT_MOST, in_flight: int | None = None) -> None:
        self._client = client
        # reads by id under way at once, one per core by default: the engine's work per read is CPU,
        # so more at once only share the cores, while lookups that wait meanwhile join one read
        self._in_flight = threading.BoundedSemaphore(in_flight or max(1, os.cpu_count() or 1))
        self._one = one
        self._many = many
        self._most = most
        self._lock = threading.Lock()
        self._open: _Batch | None = None  # the batch whose reader waits for a client: lookups join it
        self.queries = 0
        self.lookups = 0

    def get(self, decision_id: str, tenant: str | None) -> str | None:
        """The stored record text of ``decision_id`` if it exists within ``tenant`` (None: every tenant)."""
        with self._lock:
            self.lookups += 1
            batch = self._open
            lead = batch is None or len(batch.ids) >= self._most
            if lead:
                batch = self._open = _Batch()
            assert batch is not None
            batch.ids.append(decision_id)
        if not lead:
            batch.done.wait()
            if batch.ok:
                return _scoped(batch.found.get(decision_id), tenant)
            with self._client() as client:  # the shared read failed: this caller reads (and fails) alone
                return self._one(client, decision_id, tenant)
        try:
            with self._in_flight, self._client() as client:
                with self._lock:  # from here on, later lookups wait for a client of their own
                    if self._open is batch:
                        self._open = None
                    ids = sorted(set(batch.ids))
                    alone = len(batch.ids) == 1
                    self.queries += 1
                if alone:  # no one joined, and no one can now: the single-id query, as without batching
                    return self._one(client, decision_id, tenant)
                batch.found = self._many(client, ids)
                batch.ok = True
        finally:
            with self._lock:
                if self._open is batch:
                    self._open = None
            batch.done.set()
        return _scoped(batch.found.get(decision_id), tenant)


def _scoped(found: tuple[str, str] | None, tenant: str | None) -> str | None:
    if found is None or (tenant is not None and found[0] != tenant):
        return None
    return found[1]
