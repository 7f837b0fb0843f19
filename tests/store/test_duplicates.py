"""Duplicate delivery leaves exactly one copy and rollups that count each decision once."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.store.queries import AuditStore, DecisionFilter
from audit.store.writer import RecordWriter
from tests.store.conftest import write_all
from tests.store.factory import make_records

DAY = DecisionFilter(since="2026-11-01T00:00:00Z", until="2026-11-02T00:00:00Z")


def stored(store: AuditStore) -> tuple[int, int, int]:
    """(rows, distinct decision ids, tier rows) as reads see them (FINAL)."""
    d = store.client.query("SELECT count(), uniqExact(decision_id) FROM decisions FINAL").result_rows[0]
    t = store.client.query("SELECT count() FROM decision_tiers FINAL").result_rows[0][0]
    return int(d[0]), int(d[1]), int(t)


def rollup_totals(store: AuditStore) -> dict:
    return {(g["tenant"], g["model"]): (g["decisions"], g["allocated"], g["fallback_decisions"])
            for g in store.fallback_stats(DAY, ["tenant", "model"])}


def test_the_same_batch_delivered_twice_is_stored_once(store: AuditStore) -> None:
    records = make_records(500)
    write_all(store, records)
    first = (stored(store), rollup_totals(store))
    raw_rows = store.client.query("SELECT count() FROM decisions").result_rows[0][0]
    stats = write_all(store, records)  # byte-identical batch: same insert token
    assert stats["duplicates"] == 0  # a fresh writer has not seen these ids itself
    assert store.client.query("SELECT count() FROM decisions").result_rows[0][0] == raw_rows  # skipped at insert
    assert (stored(store), rollup_totals(store)) == first
    tiers = sum(len(r.tiers) for r in records)
    assert first[0] == (500, 500, tiers)


def test_a_rebuilt_batch_with_the_same_records_is_stored_once(store: AuditStore) -> None:
    records = make_records(300)
    write_all(store, records, batch_size=100)
    expected = (stored(store), rollup_totals(store))
    rebuilt = list(reversed(records[50:250]))  # different batch boundaries and order: new tokens
    for table in ("decisions", "decision_tiers"):  # keep the copies unmerged so reads must cope with them
        store.client.command(f"SYSTEM STOP MERGES {table}")
    write_all(store, rebuilt, batch_size=70)
    raw_rows = store.client.query("SELECT count() FROM decisions").result_rows[0][0]
    assert raw_rows > 300  # the copies really reached the table ...
    assert (stored(store), rollup_totals(store)) == expected  # ... and reads ignore them
    store.client.command("SYSTEM START MERGES decisions")
    store.client.command("OPTIMIZE TABLE decisions FINAL")
    assert store.client.query("SELECT count() FROM decisions").result_rows[0][0] == 300


def test_the_writer_counts_records_it_already_took(store: AuditStore) -> None:
    writer: RecordWriter = store.writer(background=False)
    records = make_records(50)
    writer.write_records(records)
    writer.write_records(records[:20])
    assert writer.flush()
    stats = writer.stats()
    assert (stats["received"], stats["duplicates"], stats["written"]) == (70, 20, 70)


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 120))
def test_any_redelivery_pattern_gives_the_same_answers_as_one_clean_delivery(tmp_path_factory, seed: int,
                                                                             n: int) -> None:
    rng = random.Random(seed)
    records = make_records(n, seconds_apart=97)
    deliveries = [records]
    for _ in range(rng.randint(1, 3)):
        start = rng.randrange(n)
        deliveries.append(rng.sample(records[start:], k=len(records[start:])))
    with AuditStore.open(f"chdb://{tmp_path_factory.mktemp('clean')}/db") as clean:
        write_all(clean, records)
        expected = (stored(clean), rollup_totals(clean))
    with AuditStore.open(f"chdb://{tmp_path_factory.mktemp('messy')}/db") as messy:
        for batch in deliveries:
            write_all(messy, batch, batch_size=rng.randint(1, 50))
        assert (stored(messy), rollup_totals(messy)) == expected
