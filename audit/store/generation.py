"""How many inserts of decisions this process has begun and ended, per embedded store directory.

A listing page is served again only while the decisions it shows are unchanged
(``audit.api.pages``). An embedded engine locks its directory to one process, so on such a store
every insert of decisions is made by this process, through a ``RecordWriter``: counting those
inserts, begun and ended, tells whether the stored decisions may have changed without asking the
engine for its parts on every page. Both counts matter: while an insert runs its rows may or may
not be visible yet, and once it ends the pair differs from any pair read before, so no page read
before it is served after it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class WriteGenerations:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, tuple[int, int]] = {}

    @contextmanager
    def writing(self, directory: str | None) -> Iterator[None]:
        """Count one insert into the store at ``directory`` (None: a server's store, not counted).
        It ends even when the insert fails: a failed insert may still have stored part of its rows."""
        if directory is None:
            yield
            return
        self._move(directory, 1, 0)
        try:
            yield
        finally:
            self._move(directory, 0, 1)

    def current(self, directory: str) -> tuple[int, int]:
        """(inserts begun, inserts ended) so far, read together."""
        with self._lock:
            return self._counts.get(directory, (0, 0))

    def _move(self, directory: str, begun: int, ended: int) -> None:
        with self._lock:
            b, e = self._counts.get(directory, (0, 0))
            self._counts[directory] = (b + begun, e + ended)


GENERATIONS = WriteGenerations()  # one per process, as the engine's lock on a directory is
