"""A process that has not folded a cluster takes its lifecycle from the pod tables when they are
written up to the last stored event, and it is the fold's lifecycle: the same pods field for
field, the same series, and every figure the API shows equal. An event stored past the tables
makes it fold the whole log instead.

Each check uses a fresh ``LifecycleCache`` on a store whose background fold wrote the tables (a
server started anew on that store), reached through a view of the store that refuses to read
events: answering from the tables must not fold anything.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import HealthCheck, given, settings

from audit.events import WorldEvent
from audit.metrics import Window, fairness_report, fallback_report, fold_lifecycle, health_report
from audit.metrics.breakdown import regret_breakdown, wait_breakdown
from audit.metrics.lifecycle import Lifecycle
from audit.store.lifecycle import LifecycleCache
from audit.store.podload import stored_lifecycle, written_seq
from audit.store.podtable import PodTable
from audit.store.queries import AuditStore
from tests.metrics.histories import PodPlan, TaintPlan, history, plans, taint_plans
from tests.metrics.test_columnar import scopes, windows


class NoEvents:
    """The store, but reading its event log fails: what answers must come from the pod tables."""

    def __init__(self, store: AuditStore) -> None:
        self.store = store

    def __getattr__(self, name: str) -> Any:
        if name == "events":
            raise AssertionError("the event log was read: the lifecycle was folded, not read back")
        return getattr(self.store, name)


def _ingest(store: AuditStore, events: list[WorldEvent]) -> None:
    body = "".join(json.dumps(e.to_dict()) + "\n" for e in events).encode()
    assert store.ingest_jsonl(body, "events", "test").delivered
    assert store.wait_pod_table(120)


def _fresh(store: AuditStore) -> LifecycleCache:
    return LifecycleCache(PodTable(store._insert_columns))


def _figures(life: Lifecycle, window: Window, scope: str | None) -> list[Any]:
    return [fairness_report(life, window, scope), fallback_report(life, window, scope), health_report(life, window),
            wait_breakdown(life, window, "hour", scope), regret_breakdown(life, window, "model", scope)]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plans, taint_plans, windows, scopes)
def test_the_lifecycle_read_back_from_the_tables_is_the_folds(store: AuditStore, pods: list[PodPlan],
                                                              taints: list[TaintPlan], window: Window,
                                                              scope: str | None) -> None:
    log = history(pods, taints)
    cluster = f"c{abs(hash((tuple(pods), tuple(taints)))) % 10**12}"
    for ev in log.events:
        ev.cluster = cluster
    half = len(log.events) // 2
    _ingest(store, log.events[:half])  # two rounds of the background fold: rows rewritten, spans closed
    _ingest(store, log.events[half:])
    folded = fold_lifecycle(log.events, cluster)
    cache = _fresh(store)
    read = cache.current(NoEvents(store), cluster)
    assert read.pods == folded.pods and [p.row for p in read.pods] == list(range(len(folded.pods)))
    assert (read.capacity, read.unhealthy, read.end_ms, read.seq) == (
        folded.capacity, folded.unhealthy, folded.end_ms, log.events[-1].seq)
    assert [t for t, _ in read.policies] == [t for t, _ in folded.policies]
    assert _figures(read, window, scope) == _figures(folded, window, scope)
    assert _figures(dataclasses.replace(read, columns=None), window, scope) == _figures(folded, window, scope)
    assert cache.folded_seq(cluster) == log.events[-1].seq  # nothing left for the keeper to fold


def test_an_event_stored_past_the_tables_folds_the_whole_log(store: AuditStore) -> None:
    pods = [PodPlan("a", "one", 2, 0, 10, 30, "bind", 0), PodPlan("b", "two", 1, 5, 20, 40, "bind", 1),
            PodPlan("a", "one", 1, 30, 5, 0, "pend", 0)]
    log = history(pods)
    half = len(log.events) // 2
    _ingest(store, log.events[:half])
    assert written_seq(store._query, "c1") == log.events[half - 1].seq
    unkept = store.writer(name="no-pods", keep_pods=False)  # stores events without waking the fold
    unkept.write_events(log.events[half:])
    assert unkept.flush(timeout=60), unkept.last_error
    assert written_seq(store._query, "c1") == log.events[half - 1].seq  # the tables stayed behind
    cache = _fresh(store)
    got = cache.current(store, "c1")
    assert got.seq == log.events[-1].seq
    assert got.pods == fold_lifecycle(log.events, "c1").pods
    assert written_seq(store._query, "c1") == log.events[-1].seq  # the fold wrote them up to date


def test_tables_holding_other_than_their_mark_counts_are_not_read_back(store: AuditStore) -> None:
    log = history([PodPlan("a", "one", 2, 0, 10, 30, "bind", 0), PodPlan("b", "two", 1, 5, 20, 40, "bind", 1)])
    _ingest(store, log.events)
    assert stored_lifecycle(store._query, "c1") is not None
    store.client.command("ALTER TABLE pods DELETE WHERE row = 0 SETTINGS mutations_sync = 1")
    assert stored_lifecycle(store._query, "c1") is None
    assert stored_lifecycle(store._query, "no-such-cluster") is None
    assert _fresh(store).current(store, "c1").pods == fold_lifecycle(log.events, "c1").pods
