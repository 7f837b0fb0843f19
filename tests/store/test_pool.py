"""The store's client pool: readers run side by side, waiting readers are served in turn, short
reads first, and a client whose query failed gives its place to a new one.

Turns are observed through the pool's count of waiting readers and through events each reader
sets once it holds a client, never through elapsed time."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from audit.store.pool import ClientPool
from audit.store.queries import AuditStore

WAIT = 30.0  # seconds: a bound for a thread to reach its next step, not a measurement


class Handle:
    """What the pool hands out: here a named object that knows whether it was closed."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.closed = False

    def close(self) -> None:
        self.closed = True


def _pool(size: int) -> ClientPool:
    opened = iter(range(1, 1000))
    return ClientPool(lambda: Handle(next(opened)), size)


def _until(condition: object) -> None:
    event = threading.Event()
    for _ in range(int(WAIT * 100)):
        if condition():  # type: ignore[operator]
            return
        event.wait(0.01)
    raise AssertionError("the pool never reached the expected state")


class Reader:
    """A thread that takes a client, says so, and keeps it until told to give it back."""

    def __init__(self, pool: ClientPool, name: str, order: list[str], short: bool = False) -> None:
        self.holding = threading.Event()
        self.done = threading.Event()
        self.client: Handle | None = None

        def run() -> None:
            with pool.client(short) as client:
                self.client = client
                order.append(name)
                self.holding.set()
                assert self.done.wait(WAIT)

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def release(self) -> None:
        self.done.set()
        self.thread.join(WAIT)


@contextmanager
def _held(pool: ClientPool) -> Iterator[Handle]:
    with pool.client() as client:
        yield client


def test_a_returned_client_goes_to_the_waiting_reader_not_to_the_next_one_to_ask() -> None:
    pool, order = _pool(1), []
    with _held(pool):
        waiting = Reader(pool, "waiting", order)
        _until(lambda: pool.waiting() == (0, 1))
    assert waiting.holding.wait(WAIT)  # handed over on return, before anyone else could ask
    later = Reader(pool, "later", order)
    _until(lambda: pool.waiting() == (0, 1))  # the next to ask waits its turn
    waiting.release()
    assert later.holding.wait(WAIT)
    later.release()
    assert order == ["waiting", "later"]


def test_waiting_short_reads_are_served_before_long_ones_that_waited_longer() -> None:
    pool, order = ClientPool(lambda: Handle(1), 1, overtake=5), []
    with _held(pool):
        first_long = Reader(pool, "long 1", order)
        _until(lambda: pool.waiting() == (0, 1))
        second_long = Reader(pool, "long 2", order)
        _until(lambda: pool.waiting() == (0, 2))
        short = Reader(pool, "short", order, short=True)
        _until(lambda: pool.waiting() == (1, 2))
    for reader in (short, first_long, second_long):
        assert reader.holding.wait(WAIT)
        reader.release()
    assert order == ["short", "long 1", "long 2"]


@pytest.mark.parametrize(("overtake", "expected"), [
    (0, ["long 1", "long 2", "short 1", "short 2", "short 3"]),
    (1, ["short 1", "long 1", "short 2", "long 2", "short 3"]),
    (2, ["short 1", "short 2", "long 1", "short 3", "long 2"]),
    (3, ["short 1", "short 2", "short 3", "long 1", "long 2"]),
], ids=["in-turn", "one-short-first", "two-shorts-first", "every-short-first"])
def test_a_long_read_is_passed_over_by_at_most_overtake_short_ones(overtake: int, expected: list[str]) -> None:
    pool, order = ClientPool(lambda: Handle(1), 1, overtake=overtake), []
    readers = []
    with _held(pool):
        for n, (name, short) in enumerate([("long 1", False), ("long 2", False), ("short 1", True),
                                           ("short 2", True), ("short 3", True)]):
            readers.append(Reader(pool, name, order, short=short))
            _until(lambda n=n, short=short: sum(pool.waiting()) == n + 1)
    for _ in readers:  # each in the pool's order: release whoever holds the client now
        _until(lambda: len(order) > sum(r.done.is_set() for r in readers))
        holder = next(r for r in readers if r.holding.is_set() and not r.done.is_set())
        holder.release()
    assert order == expected


def test_a_client_whose_query_failed_is_closed_and_the_next_reader_gets_a_new_one() -> None:
    pool, order = _pool(1), []
    with pytest.raises(OSError), pool.client() as broken:
        waiting = Reader(pool, "waiting", order)
        _until(lambda: pool.waiting() == (0, 1))
        raise OSError("connection reset")
    assert waiting.holding.wait(WAIT)
    assert broken.closed and waiting.client is not None and waiting.client.n == 2
    waiting.release()


def test_readers_beyond_the_pool_size_wait_and_within_it_do_not() -> None:
    pool, order = _pool(2), []
    one, two = Reader(pool, "one", order), Reader(pool, "two", order)
    assert one.holding.wait(WAIT) and two.holding.wait(WAIT)
    third = Reader(pool, "third", order)
    _until(lambda: pool.waiting() == (0, 1))
    one.release()
    assert third.holding.wait(WAIT) and third.client is one.client
    two.release()
    third.release()


def test_two_readers_queries_run_in_the_engine_at_once(store: AuditStore) -> None:
    """One reader's query is still running when another reader's query lists it among the
    engine's running queries: the pool's clients do not take turns in the engine."""
    failed: list[BaseException] = []

    def slow() -> None:
        try:
            store._query("SELECT sleep(2) AS pool_concurrency_probe")
        except BaseException as exc:  # noqa: BLE001 - reported below
            failed.append(exc)

    thread = threading.Thread(target=slow)
    thread.start()
    seen = False
    for _ in range(200):
        running = store._query("SELECT count() FROM system.processes "
                               "WHERE query LIKE '%sleep(2) AS pool_concurrency_probe%' "
                               "AND query NOT LIKE '%system.processes%'").result_rows[0][0]
        if running:
            seen = True
            break
        if not thread.is_alive():
            break
        threading.Event().wait(0.01)
    thread.join(WAIT)
    assert not failed
    assert seen
