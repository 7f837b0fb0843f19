"""``StoreHistory`` reads ahead when folds follow each other, and answers exactly what the store does.

A cursor replaying many decisions asks for a few events at a time, each range starting where the
last ended; the history then reads past the range and serves the next ones from those texts. The
rows below are on a real embedded chDB store: every answer must equal the store's own for the
same range, a gap must come back as a gap, and an event stored after a read must be seen.
"""

from __future__ import annotations

from typing import Any

from audit.events import WorldEvent
from audit.replay import StoreHistory
from audit.store.queries import AuditStore

CLUSTER = "read-ahead"
GAP = 150


def _event(seq: int) -> WorldEvent:
    return WorldEvent.from_dict({"cluster": CLUSTER, "seq": seq, "time": "2026-05-01T07:00:00.000Z",
                                 "type": "upsert", "object_kind": "Node", "namespace": "", "name": f"node-{seq}",
                                 "payload": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{seq}"}}})


def _write(store: AuditStore, seqs: range | list[int]) -> None:
    writer = store.writer(background=False)
    writer.write_events([_event(s) for s in seqs])
    assert writer.flush()
    writer.close()


class CountingStore:
    """The real store, counting the event reads that reach it."""

    def __init__(self, store: AuditStore) -> None:
        self.store, self.reads = store, 0

    def event_texts(self, *args: Any) -> Any:
        self.reads += 1
        return self.store.event_texts(*args)

    def digested_events(self, *args: Any) -> Any:
        self.reads += 1
        return self.store.digested_events(*args)


def _read(history: StoreHistory, after: int, upto: int) -> list[tuple[int, str | None]]:
    return [(ev.seq, digest) for ev, digest in history.digested_events(CLUSTER, after, upto)]


def _stored(store: AuditStore, after: int, upto: int) -> list[tuple[int, str | None]]:
    return [(ev.seq, digest) for ev, digest in store.digested_events(CLUSTER, after, upto)]


def test_folds_that_follow_each_other_get_the_stores_answers_from_a_few_reads(store):
    _write(store, [s for s in range(300) if s != GAP])
    counting = CountingStore(store)
    history = StoreHistory(counting)
    steps = [(a, a + 3) for a in range(-1, GAP - 4, 3)]  # 49 folds of 3 events, up to the gap
    for after, upto in steps:
        assert _read(history, after, upto) == _stored(store, after, upto)
    # the first fold reads its range, the next 64 events past its own, the third up to the gap:
    # three reads where each fold was one
    assert (len(steps), counting.reads) == (49, 3)


def test_a_gap_read_ahead_of_comes_back_as_the_gap(store):
    _write(store, [s for s in range(300) if s != GAP])
    history = StoreHistory(store)
    for after in range(-1, 140, 4):
        _read(history, after, after + 4)  # reads ahead past the gap
    assert [seq for seq, _ in _read(history, 143, 153)] == [144, 145, 146, 147, 148, 149, 151, 152, 153]
    assert _read(history, 153, 160) == _stored(store, 153, 160)


def test_an_event_stored_after_a_read_ahead_is_seen(store):
    _write(store, [s for s in range(300) if s != GAP])
    history = StoreHistory(store)
    for after in range(-1, 140, 4):
        _read(history, after, after + 4)
    _write(store, [GAP])  # arrives late, after the texts around it were read
    assert [seq for seq, _ in _read(history, 143, 153)] == list(range(144, 154))
    assert _read(history, 143, 153) == _stored(store, 143, 153)


def test_a_single_lookup_reads_exactly_its_range(store):
    _write(store, range(300))
    counting = CountingStore(store)
    history = StoreHistory(counting)
    assert _read(history, 9, 20) == _stored(store, 9, 20)
    assert _read(history, 99, 100) == _stored(store, 99, 100)  # not where the last read ended: no read-ahead
    assert counting.reads == 2
    _read(history, 100, 101)  # had the lookup read past 100, this would come from its texts
    assert counting.reads == 3
