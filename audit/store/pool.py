"""A small pool of store clients, so reads run side by side instead of one at a time.

A clickhouse-connect client is one session (an HTTP session id, or one chDB connection handle):
two threads sharing it either wait for each other or trip over the session. Each reader borrows
a client of its own for one query and gives it back; clients are opened on first need, up to
``size``, and a reader beyond that waits for one to come back. Both chDB (several handles on one
engine in one process) and a ClickHouse server answer the clients' queries concurrently, and the
embedded engine lets go of the interpreter lock while it runs one.

Readers that wait are served in turn, and a returned client goes straight to the reader whose
turn it is: a thread that gives a client back and asks again at once does not take it from one
that was already waiting (without this hand-off, a few busy threads kept the clients among
themselves and a waiting reader's wait had no bound). A short read (one decision by id: one
granule) is served before waiting long ones (a page of records, a scan), so that under many
readers it waits for about one client to come back rather than for every page queued before it;
but a long read is passed over by at most ``overtake`` short ones, or a steady stream of short
reads would leave it waiting without end (pages then waited several times longer than before).
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

DEFAULT_SIZE = 4
DEFAULT_OVERTAKE = 2  # short reads that may go before the long read waiting longest


class _Waiter:
    __slots__ = ("client", "event", "passed", "slot")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.client: Any = None
        self.slot = False  # given the right to open a client instead of an idle one
        self.passed = 0  # short reads served before this long one while it waited first


class ClientPool:
    def __init__(self, connect: Callable[[], Any], size: int = DEFAULT_SIZE, overtake: int = DEFAULT_OVERTAKE) -> None:
        if size < 1 or overtake < 0:
            raise ValueError(f"client pool size {size}, overtake {overtake}: expected at least 1 and 0")
        self.overtake = overtake
        self._connect = connect
        self._idle: list[Any] = []  # last returned first: its connection is the warmest
        self._lock = threading.Lock()
        self._opened: list[Any] = []
        self._short: deque[_Waiter] = deque()
        self._long: deque[_Waiter] = deque()
        self.size = size

    @contextmanager
    def client(self, short: bool = False) -> Iterator[Any]:
        """A client for this thread alone until the block ends; a client whose query failed
        is closed rather than handed to the next reader in an unknown state. ``short`` marks a
        read that touches a granule or two, served before waiting long ones."""
        client = self._take(short)
        healthy = False
        try:
            yield client
            healthy = True
        finally:
            if healthy:
                self._give_back(client)
            else:
                self._discard(client)

    def waiting(self) -> tuple[int, int]:
        """(short, long) readers waiting for a client now."""
        with self._lock:
            return len(self._short), len(self._long)

    def _take(self, short: bool) -> Any:
        with self._lock:
            if self._idle and not (self._short or self._long):
                return self._idle.pop()
            if len(self._opened) < self.size and not (self._short or self._long):
                self._opened.append(None)  # a slot, filled once connected
                waiter = None
            else:
                waiter = _Waiter()
                (self._short if short else self._long).append(waiter)
                self._pass_slot()  # a slot freed while others waited is this queue's first's
        if waiter is not None:
            waiter.event.wait()
            if not waiter.slot:
                return waiter.client
        return self._open()

    def _open(self) -> Any:
        try:
            client = self._connect()
        except BaseException:
            with self._lock:
                self._opened.remove(None)
                self._pass_slot()
            raise
        with self._lock:
            self._opened[self._opened.index(None)] = client
        return client

    def _next_waiter(self) -> _Waiter | None:
        """The reader whose turn it is (lock held): the first short one, unless the first long one
        was passed over ``overtake`` times already; else the first long one."""
        if self._short and (not self._long or self._long[0].passed < self.overtake):
            if self._long:
                self._long[0].passed += 1
            return self._short.popleft()
        if self._long:
            return self._long.popleft()
        return None

    def _give_back(self, client: Any) -> None:
        with self._lock:
            waiter = self._next_waiter()
            if waiter is None:
                self._idle.append(client)
                return
            waiter.client = client
        waiter.event.set()

    def _pass_slot(self) -> None:
        """A slot came free (lock held): the next waiter opens a client in it."""
        if len(self._opened) < self.size:
            waiter = self._next_waiter()
            if waiter is not None:
                self._opened.append(None)
                waiter.slot = True
                waiter.event.set()

    def _discard(self, client: Any) -> None:
        with self._lock:
            if client in self._opened:
                self._opened.remove(client)
            self._pass_slot()
        with contextlib.suppress(Exception):  # a broken client may fail to close; it is dropped either way
            client.close()

    def close(self) -> None:
        with self._lock:
            opened, self._opened = [c for c in self._opened if c is not None], []
            self._idle = []
        for client in opened:
            with contextlib.suppress(Exception):  # closing at shutdown is best effort
                client.close()
