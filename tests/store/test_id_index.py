"""The index of stored records by id answers exactly what the engine answers, holds only what the
engine stored, and starts again when the file is not a copy of this store's table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from audit.records import record_text
from audit.store.id_index import IdIndex, IdIndexKeeper
from audit.store.queries import AuditStore, open_writer
from audit.store.schema import Retention
from tests.store.conftest import asks_by_id, engine_text, write_all
from tests.store.factory import make_record

RECORDS = [make_record(i) for i in range(12)]  # tenants rotate: acme, globex, initech, umbrella


def _indexed(store: AuditStore) -> IdIndexKeeper:
    assert store.keep_id_index()
    index = store.id_index
    assert index is not None and index.wait_idle(60)
    return index


def test_a_read_by_id_after_the_backfill_is_the_engines_answer_without_an_engine_query(store: AuditStore) -> None:
    write_all(store, RECORDS)  # stored before the index existed: the backfill copies them
    index = _indexed(store)
    expected = [engine_text(store, *ask) for ask in asks_by_id(RECORDS)]
    assert [store.get_decision_text(*ask) for ask in asks_by_id(RECORDS)] == expected
    assert sum(text is not None for text in expected) == 24  # each record to the admin and its own tenant
    # 36 asks of stored ids answered by the index; the unknown id asked the engine
    assert (index.hits, index.misses, store.id_lookups.lookups) == (36, 1, 1)


def test_the_index_alone_answers_every_ask_of_a_stored_id_and_leaves_an_unknown_one_to_the_engine(
        store: AuditStore) -> None:
    write_all(store, RECORDS)
    index = _indexed(store)
    asks = asks_by_id(RECORDS)
    answers = [store.indexed_decision_text(*ask) for ask in asks]
    # answered: the admin and the own tenant get the record, another tenant None (not found)
    assert answers[:-1] == [(True, engine_text(store, *ask)) for ask in asks[:-1]]
    assert answers[-1] == (False, None)  # the unknown id: only the engine can say
    assert store.engine_decision_text(*asks[-1]) is None
    assert (index.hits, index.misses, store.id_lookups.lookups) == (36, 1, 1)


def test_records_a_writer_stores_once_the_index_runs_are_indexed_as_stored(store: AuditStore) -> None:
    index = _indexed(store)  # an empty store: nothing to copy
    write_all(store, RECORDS)
    assert index.wait_idle(60)
    for r in RECORDS:
        assert index.index.get(r.decision_id) == (r.tenant, record_text(r))
    assert index.index.count() == len(RECORDS)


def test_a_record_the_engine_found_after_a_miss_is_indexed(store: AuditStore, tmp_path: Path) -> None:
    index = _indexed(store)
    # written by a writer of no store object (as another process would): the index is not told
    writer = open_writer(store.target.dsn, name="other", background=False)
    writer.write_records(RECORDS[:1])
    assert writer.flush()
    writer.close()
    r = RECORDS[0]
    assert store.get_decision_text(r.decision_id, None) == record_text(r)
    assert (index.hits, index.misses) == (0, 1)
    assert index.wait_idle(60)
    assert store.get_decision_text(r.decision_id, r.tenant) == record_text(r)
    assert (index.hits, index.misses, store.id_lookups.lookups) == (1, 1, 1)


def test_the_backfill_goes_on_after_the_last_id_it_copied(store: AuditStore) -> None:
    write_all(store, RECORDS)
    uuid = store._query("SELECT toString(uuid) FROM system.tables WHERE database = currentDatabase() "
                        "AND name = 'decisions_by_id'").result_rows[0][0]
    path = Path(store.target.embedded_path or "").parent / "ids.sqlite"
    first = store._id_page("", 5)
    stopped = IdIndex(path, uuid, store._id_blocks())
    stopped.add(first, backfill_after=first[-1][0])  # five copied, then the process stopped
    stopped.close()
    asked: list[str] = []

    def page(after: str, n: int) -> list[tuple[str, str, str]]:
        asked.append(after)
        return store._id_page(after, n)

    keeper = IdIndexKeeper(IdIndex(path, uuid, store._id_blocks()), page, page=5)
    try:
        assert keeper.wait_idle(60)
        ids = sorted(r.decision_id for r in RECORDS)
        assert asked == [ids[4], ids[9]]  # pages of 5 after the fifth: 5 more, then the last 2
        assert keeper.index.count() == 12 and keeper.index.backfill_from() is None
    finally:
        keeper.close()


# (damage, table UUID and highest insert block of the store the file is opened for)
DAMAGES = [("another-table", "table-b", 10), ("an-earlier-state", "table-a", 9), ("another-layout", "table-a", 10),
           ("not-a-database", "table-a", 10)]


@pytest.mark.parametrize("damage, table, blocks", DAMAGES, ids=[d[0] for d in DAMAGES])
def test_a_file_that_is_not_a_copy_of_this_table_is_started_again(tmp_path: Path, damage: str, table: str,
                                                                   blocks: int) -> None:
    path = tmp_path / "ids.sqlite"
    index = IdIndex(path, "table-a", 10)
    index.add([("d1", "acme", "{}")], backfill_after="")
    index.close()
    if damage == "another-layout":
        index = IdIndex(path, "table-a", 10)
        index._writer.execute("UPDATE meta SET value = '0' WHERE key = 'format'")
        index.close()
    elif damage == "not-a-database":
        IdIndex.remove(path)
        path.write_bytes(b"this is not a SQLite file" * 100)
    again = IdIndex(path, table, blocks)
    try:
        assert (again.count(), again.get("d1"), again.backfill_from()) == (0, None, "")
    finally:
        again.close()


def test_a_file_of_the_same_table_and_a_later_or_equal_state_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "ids.sqlite"
    index = IdIndex(path, "table-a", 10)
    index.add([("d1", "acme", "{}")], backfill_after="")
    index.close()
    for blocks in (10, 12):
        again = IdIndex(path, "table-a", blocks)
        assert (again.get("d1"), again.backfill_from()) == (("acme", "{}"), None)
        again.close()


def test_a_store_put_back_from_a_backup_does_not_answer_what_it_lost(tmp_path: Path) -> None:
    with AuditStore.open(f"chdb://{tmp_path}/db") as first:
        write_all(first, RECORDS[:6])
    shutil.copytree(tmp_path / "db", tmp_path / "backup", symlinks=True)
    with AuditStore.open(f"chdb://{tmp_path}/db") as later:
        assert later.keep_id_index()
        write_all(later, RECORDS[6:])  # stored after the backup, and indexed
        assert later.id_index is not None and later.id_index.wait_idle(60)
        assert later.id_index.index.count() == 12
    shutil.rmtree(tmp_path / "db")
    shutil.copytree(tmp_path / "backup", tmp_path / "db", symlinks=True)
    with AuditStore.open(f"chdb://{tmp_path}/db") as restored:
        assert restored.keep_id_index()
        assert restored.id_index is not None and restored.id_index.wait_idle(60)
        assert [restored.get_decision_text(r.decision_id, None) for r in RECORDS] == \
            [record_text(r) for r in RECORDS[:6]] + [None] * 6
        assert restored.id_index.index.count() == 6


def test_a_batch_beyond_the_hand_over_bound_is_skipped_and_counted(tmp_path: Path) -> None:
    keeper = IdIndexKeeper(IdIndex(tmp_path / "ids.sqlite", "t", 0), lambda after, n: [], max_pending_bytes=100)
    try:
        line = record_text(RECORDS[0]).encode()  # over 100 bytes
        keeper.stored([line])
        assert keeper.wait_idle(60)
        assert (keeper.skipped, keeper.index.count()) == (1, 0)
    finally:
        keeper.close()


def test_a_store_whose_decisions_expire_keeps_no_index_and_drops_the_one_it_had(tmp_path: Path) -> None:
    with AuditStore.open(f"chdb://{tmp_path}/db") as kept:
        assert kept.keep_id_index()  # kept forever: indexed
        write_all(kept, RECORDS)
        assert kept.id_index is not None and kept.id_index.wait_idle(60)
    assert (tmp_path / "ids.sqlite").exists()
    with AuditStore.open(f"chdb://{tmp_path}/db", Retention({"decisions": 400})) as expiring:
        assert not expiring.keep_id_index()
        assert expiring.id_index is None
        assert expiring.get_decision_text(RECORDS[0].decision_id, None) == record_text(RECORDS[0])
    assert not (tmp_path / "ids.sqlite").exists()
