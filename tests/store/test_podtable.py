"""The pod table keeper: folds in the background, at once for a caller that waits, before stopping,
and for events another process stored.

Also: a write that fails hands its rows back, so the next write still carries them.
"""

from __future__ import annotations

import gc
import threading
from typing import Any

import pytest

from audit.events import WorldEvent
from audit.metrics import LifecycleFold
from audit.store import rows
from audit.store.podtable import PodTable, PodTableKeeper
from audit.store.queries import AuditStore
from tests.metrics.eventlog import Log


class _Synced:
    def __init__(self) -> None:
        self.clusters: list[str] = []
        self.seqs: list[list[int]] = []
        self.events: list[WorldEvent] = []
        self.lock = threading.Lock()

    def __call__(self, cluster: str, known: list[WorldEvent]) -> None:
        with self.lock:
            self.clusters.append(cluster)
            self.seqs.append([e.seq for e in known])
            self.events.extend(known)


def _event(cluster: str, seq: int) -> WorldEvent:
    return WorldEvent(seq=seq, time="2026-01-01T00:00:00Z", type="add", object_kind="Node", namespace="",
                      name=f"n{seq}", payload={}, cluster=cluster)


def _poke(keeper: PodTableKeeper, events: list[WorldEvent]) -> None:
    """What the store does with an events batch a writer delivered."""
    keeper.poke([ev.cluster for ev in events], [rows.event_json(ev) for ev in events])


def test_a_caller_that_waits_gets_the_round_at_once() -> None:
    synced = _Synced()
    keeper = PodTableKeeper(synced, settle=3600, max_lag=3600)  # never on its own within the test
    try:
        _poke(keeper, [_event("c1", 1), _event("c2", 1)])
        _poke(keeper, [_event("c1", 2)])
        assert keeper.wait_idle(60)
        assert synced.clusters == ["c1", "c2"]  # two pokes of c1 folded in one round
        assert synced.seqs == [[1, 2], [1]]  # with the events delivered
        assert synced.events == [_event("c1", 1), _event("c1", 2), _event("c2", 1)]  # field for field
    finally:
        keeper.close()


def test_delivered_events_wait_for_the_fold_without_objects_for_the_cycle_collector() -> None:
    """Events held until the writers are idle would otherwise bring on full collections of the
    heap in the middle of ingest: a thousand waiting add no tracked object, only their strings."""
    keeper = PodTableKeeper(_Synced(), settle=3600, max_lag=3600)
    try:
        events = [_event("c1", i) for i in range(1, 1001)]
        clusters, lines = [ev.cluster for ev in events], [rows.event_json(ev) for ev in events]
        del events
        gc.collect()
        before = len(gc.get_objects())
        keeper.poke(clusters, lines)
        assert len(gc.get_objects()) - before < 10  # the cluster's list of lines, not one per event
    finally:
        keeper.close()


def test_closing_folds_what_is_still_due() -> None:
    synced = _Synced()
    keeper = PodTableKeeper(synced, settle=3600, max_lag=3600)
    _poke(keeper, [_event("c1", 1)])
    keeper.close()
    assert synced.clusters == ["c1"]


def test_a_failed_write_hands_its_rows_back() -> None:
    log = Log().nodes("H100", 1, 4).at(0).pod("team-a/p", ("gpu", ["H100", "A100"], 2)).tick(1)
    fold = LifecycleFold("c1").apply_all(log.events)
    written: list[tuple[str, dict[str, list[Any]]]] = []
    fail = [True]

    def insert(table: str, columns: dict[str, list[Any]]) -> None:
        if fail[0]:
            raise ConnectionError("store away")
        written.append((table, columns))

    table = PodTable(insert)
    with pytest.raises(ConnectionError):
        table.write(fold, fold.lifecycle())
    fail[0] = False
    assert table.write(fold, fold.lifecycle()) == 1
    pods = dict(written)["pods"]
    assert (pods["pod"], pods["row"], pods["version"]) == (["p"], [0], [log.events[-1].seq])
    assert table.write(fold, fold.lifecycle()) == 0  # nothing folded since: nothing written


def test_the_keeper_waits_for_busy_writers_then_folds() -> None:
    """While a writer still holds undelivered items the fold does not take the interpreter from it;
    once the writers are idle it runs without anyone asking."""
    done = threading.Event()
    busy = [True]

    def sync(cluster: str, known: list[WorldEvent]) -> None:
        done.set()

    keeper = PodTableKeeper(sync, lambda: busy[0], settle=0.01, max_lag=3600)
    try:
        _poke(keeper, [_event("c1", 1)])
        assert not done.wait(0.3)  # thirty settle periods: it would have started by now
        busy[0] = False
        assert done.wait(60)
    finally:
        keeper.close()


def test_events_stored_by_another_process_are_folded_without_a_delivery(store: AuditStore) -> None:
    """A producer writing straight into the store (``simulate --dsn``) tells this process nothing;
    the keeper finds the cluster whose stored events run past its fold and brings the table current."""
    log = Log().nodes("H100", 1, 4).at(0).pod("team-a/p", ("gpu", ["H100", "A100"], 2)).tick(1)
    writer = store.writer(name="elsewhere", keep_pods=False)  # as if from another process: no poke
    writer.write_events(log.events)
    assert writer.flush()
    assert store._query("SELECT count() FROM pods").result_rows == [(0,)]
    store.keep_pod_tables()
    assert store.wait_pod_table(60)
    assert store._query("SELECT pod FROM pods FINAL WHERE cluster = 'c1'").result_rows == [("p",)]
    assert store._stale_pod_clusters() == []
