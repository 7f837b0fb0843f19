"""Decisions asked for by id while the read clients are busy are read together, and every caller
gets what its own lookup would have: its record within its tenant scope, or nothing."""

from __future__ import annotations

import threading
import time
from contextlib import ExitStack
from typing import Any

import pytest
from clickhouse_connect.driver.exceptions import DatabaseError

from audit.store.lookups import IdLookups
from audit.store.queries import AuditStore
from tests.store.conftest import asks_by_id, engine_text, write_all
from tests.store.factory import make_record

RECORDS = [make_record(i) for i in range(12)]  # tenants rotate: acme, globex, initech, umbrella


def _concurrently(lookups: IdLookups, store: AuditStore, asks: list[tuple[str, str | None]],
                  hold: str = "clients") -> list[Any]:
    """Each ask in a thread of its own, started while every read client (or every read by id allowed
    at once) is held, so that they queue (and join) before any of them can read; what was held is
    let go once all have asked."""
    answers: list[Any] = [None] * len(asks)

    def ask(i: int) -> None:
        try:
            answers[i] = lookups.get(*asks[i])
        except Exception as exc:  # noqa: BLE001 - compared by the test
            answers[i] = exc

    with ExitStack() as held:
        if hold == "clients":
            for _ in range(store._reads.size):
                held.enter_context(store._reads.client())
        else:
            held.enter_context(lookups._in_flight)
        threads = [threading.Thread(target=ask, args=(i,)) for i in range(len(asks))]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while lookups.lookups < len(asks) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # the first asker is queued for a client, the others wait for its read
    for t in threads:
        t.join(timeout=60)
    return answers


@pytest.mark.parametrize("hold", ["clients", "reads by id in flight"])
def test_lookups_made_together_are_read_by_one_query_and_answer_each_scope(store: AuditStore, hold: str) -> None:
    write_all(store, RECORDS)
    asks = asks_by_id(RECORDS)
    expected = [engine_text(store, d, t) for d, t in asks]
    assert sum(e is not None for e in expected) == 2 * len(RECORDS)  # admin and own tenant find it; others do not
    lookups = IdLookups(lambda: store._reads.client(short=True), store._decision_text, store._decision_texts,
                        in_flight=1)
    assert _concurrently(lookups, store, asks, hold) == expected
    assert (lookups.lookups, lookups.queries) == (len(asks), 1)


@pytest.mark.parametrize("most", [1, 4, 64])
def test_a_batch_holds_at_most_its_limit(store: AuditStore, most: int) -> None:
    write_all(store, RECORDS)
    asks = [(r.decision_id, None) for r in RECORDS]
    lookups = IdLookups(lambda: store._reads.client(short=True), store._decision_text, store._decision_texts, most)
    assert _concurrently(lookups, store, asks) == [engine_text(store, d, t) for d, t in asks]
    assert lookups.queries == -(-len(asks) // most)


def test_a_lookup_that_finds_a_client_free_runs_alone(store: AuditStore) -> None:
    write_all(store, RECORDS[:2])
    for r in RECORDS[:2]:
        assert store.get_decision_text(r.decision_id, r.tenant) == engine_text(store, r.decision_id, r.tenant)
        assert store.get_decision(r.decision_id, None) == r
    assert (store.id_lookups.lookups, store.id_lookups.queries) == (4, 4)  # one query each


def test_when_the_shared_read_fails_each_caller_reads_its_own(store: AuditStore) -> None:
    write_all(store, RECORDS)

    def broken(client: Any, ids: list[str]) -> dict[str, tuple[str, str]]:
        client.query("SELECT * FROM no_such_table")
        raise AssertionError("unreachable")

    asks = [(r.decision_id, r.tenant) for r in RECORDS]
    lookups = IdLookups(lambda: store._reads.client(short=True), store._decision_text, broken)
    answers = _concurrently(lookups, store, asks)
    # the caller whose read failed reports the failure; the others read their own and find it
    assert sum(isinstance(a, DatabaseError) for a in answers) == 1
    assert [a for a in answers if not isinstance(a, Exception)] == [
        engine_text(store, d, t) for (d, t), a in zip(asks, answers, strict=True) if not isinstance(a, Exception)]
    assert len([a for a in answers if isinstance(a, str)]) == len(asks) - 1
