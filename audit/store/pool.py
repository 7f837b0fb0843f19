"""A small pool of store clients, so reads run side by side instead of one at a time.

A clickhouse-connect client is one session (an HTTP session id, or one chDB connection handle):
two threads sharing it either wait for each other or trip over the session. Each reader borrows
a client of its own for one query and gives it back; clients are opened on first need, up to
``size``, and a reader beyond that waits for one to come back. Both chDB (several handles on one
engine in one process) and a ClickHouse server answer the clients' queries concurrently.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

DEFAULT_SIZE = 4


class ClientPool:
    def __init__(self, connect: Callable[[], Any], size: int = DEFAULT_SIZE) -> None:
        if size < 1:
            raise ValueError(f"client pool size {size}: expected at least 1")
        self._connect = connect
        self._idle: queue.LifoQueue[Any] = queue.LifoQueue()
        self._lock = threading.Lock()
        self._opened: list[Any] = []
        self.size = size

    @contextmanager
    def client(self) -> Iterator[Any]:
        """A client for this thread alone until the block ends; a client whose query failed
        is closed rather than handed to the next reader in an unknown state."""
        client = self._take()
        healthy = False
        try:
            yield client
            healthy = True
        finally:
            if healthy:
                self._idle.put(client)
            else:
                self._discard(client)

    def _take(self) -> Any:
        while True:
            try:
                return self._idle.get_nowait()
            except queue.Empty:
                pass
            with self._lock:
                grow = len(self._opened) < self.size
                if grow:
                    self._opened.append(None)  # a slot, filled once connected
            if grow:
                break
            try:  # wake now and then: a discarded client frees a slot without coming back
                return self._idle.get(timeout=0.05)
            except queue.Empty:
                continue
        try:
            client = self._connect()
        except BaseException:
            with self._lock:
                self._opened.remove(None)
            raise
        with self._lock:
            self._opened[self._opened.index(None)] = client
        return client

    def _discard(self, client: Any) -> None:
        with self._lock:
            if client in self._opened:
                self._opened.remove(client)
        with contextlib.suppress(Exception):  # a broken client may fail to close; it is dropped either way
            client.close()

    def close(self) -> None:
        with self._lock:
            opened, self._opened = [c for c in self._opened if c is not None], []
        for client in opened:
            with contextlib.suppress(Exception):  # closing at shutdown is best effort
                client.close()
