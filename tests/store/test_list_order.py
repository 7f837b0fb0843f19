"""A listing's pages are newest first by (time, decision_id) across hours, parts and duplicates.

The tenant's pages are read in the table's key order (hour, then time within it); these cases put
decisions in several hours, several at the same millisecond, in several inserts (so several
parts) and again as duplicates, and check every page against a plain sort of what was written.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pytest

from audit.records import DecisionRecord
from audit.store.queries import AuditStore, DecisionFilter
from audit.store.schema import Retention
from tests.store.conftest import write_all
from tests.store.factory import BASE_TIME, iso, make_event, make_record


def _spread() -> list[DecisionRecord]:
    """60 decisions over five hours, in pairs that share a millisecond (ids break the tie)."""
    out = []
    for i in range(60):
        at = BASE_TIME + timedelta(minutes=(i // 2) * 9, milliseconds=7)  # 0 .. 4 h 21 min
        out.append(dataclasses.replace(make_record(i), time=iso(at), decision_id=f"d-{(i * 37) % 60:02d}"))
    return out


def _newest_first(records: list[DecisionRecord]) -> list[str]:
    return [r.decision_id for r in sorted(records, key=lambda r: (r.time, r.decision_id), reverse=True)]


def _pages(store: AuditStore, f: DecisionFilter, limit: int) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        page, cursor = store.list_decisions(f, cursor, limit)
        assert len(page) <= limit
        seen.extend(r.decision_id for r in page)
        if cursor is None:
            return seen


@pytest.mark.parametrize(
    ("f", "keep"),
    [
        (DecisionFilter(tenant="acme"), lambda r: r.tenant == "acme"),
        (DecisionFilter(tenant="globex", fallback=True), lambda r: r.tenant == "globex" and r.fallback),
        (DecisionFilter(tenant="initech", since="2026-11-01T01:00:00Z", until="2026-11-01T03:30:00Z"),
         lambda r: r.tenant == "initech" and "2026-11-01T01:00:00.000Z" <= r.time < "2026-11-01T03:30:00.000Z"),
        (DecisionFilter(), lambda r: True),
    ],
    ids=["tenant", "tenant-and-fallback", "tenant-in-a-window", "every-tenant"],
)
@pytest.mark.parametrize("limit", [1, 4, 50], ids=["page-1", "page-4", "page-50"])
def test_list_pages_are_newest_first_across_hours_and_parts(store: AuditStore, f: DecisionFilter, keep,
                                                             limit: int) -> None:
    records = _spread()
    for start in range(0, 60, 20):  # three inserts: three parts until merged
        write_all(store, records[start:start + 20])
    write_all(store, records[25:35])  # copies of stored decisions, not yet merged away
    expected = _newest_first([r for r in records if keep(r)])
    assert expected  # every case selects something
    assert _pages(store, f, limit) == expected


def test_the_first_page_is_the_newest_hour_of_the_tenant(store: AuditStore) -> None:
    records = _spread()
    write_all(store, records)
    page, cursor = store.list_decisions(DecisionFilter(tenant="umbrella"), None, 3)
    assert [r.decision_id for r in page] == _newest_first([r for r in records if r.tenant == "umbrella"])[:3]
    assert page[0].time.startswith("2026-11-01T04:")
    assert cursor is not None


def test_the_decisions_version_moves_with_every_insert_of_decisions_and_only_then(store: AuditStore) -> None:
    records = _spread()
    write_all(store, records[:10])
    first = store.decisions_version()
    assert first is not None and first == store.decisions_version()
    store.list_decisions(DecisionFilter(tenant="acme"), None, 5)  # reading changes nothing
    assert store.decisions_version() == first
    writer = store.writer(background=False)
    writer.write_events([make_event(1), make_event(2)])  # events are not decisions
    assert writer.flush()
    writer.close()
    assert store.decisions_version() == first
    write_all(store, records[:10])  # the same batch again, skipped by the engine: counted all the same
    second = store.decisions_version()
    assert second != first
    write_all(store, records[10:20])
    assert store.decisions_version() not in (first, second)


def test_without_expiry_the_version_is_this_processs_count_of_inserts_and_asks_the_engine_nothing(
        store: AuditStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.decisions_version()  # whether decisions expire is read once, on first need

    def no_query(*args: object, **kwargs: object) -> None:
        raise AssertionError("the version asked the engine")

    monkeypatch.setattr(store, "_query", no_query)
    first = store.decisions_version()
    write_all(store, _spread()[:5])
    assert first is not None and first[0] == "inserts"
    assert store.decisions_version() == ("inserts", first[1] + 1, first[2] + 1)


def test_with_expiry_the_version_is_read_from_the_parts_and_sees_changes_made_past_the_writers(tmp_path: Path) -> None:
    with AuditStore.open(f"chdb://{tmp_path}/db", retention=Retention({"decisions": 400})) as store:
        write_all(store, _spread()[:10])
        first = store.decisions_version()
        assert first is not None and first[0] != "inserts" and store.decisions_version() == first
        # what a TTL merge does at a time of the engine's choosing: rows go without a writer's insert
        store.client.command("ALTER TABLE decisions DELETE WHERE decision_id = 'd-00' SETTINGS mutations_sync = 1")
        assert store.decisions_version() != first


def test_copies_of_a_decision_filling_a_whole_page_do_not_hide_the_decisions_after_it(store: AuditStore) -> None:
    records = [r for r in _spread() if r.tenant == "acme"]
    newest = max(records, key=lambda r: (r.time, r.decision_id))
    others = [r for r in records if r is not newest]
    for n in range(4):  # the newest decision in four parts, each insert a batch of its own bytes
        write_all(store, [newest, others[n]])
    write_all(store, others)
    assert _pages(store, DecisionFilter(tenant="acme"), 2) == _newest_first(records)


@pytest.mark.parametrize("merged_tenants", [32, 1], ids=["merged-per-tenant", "one-sort"])
def test_an_admins_pages_are_the_same_whether_merged_per_tenant_or_sorted_at_once(
        store: AuditStore, merged_tenants: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("audit.store.queries.MERGED_TENANTS", merged_tenants)
    records = _spread()
    write_all(store, records[:30])
    write_all(store, records[30:])
    assert len({r.tenant for r in records}) > 1  # several tenants: the merge has work to do
    assert _pages(store, DecisionFilter(fallback=False), 7) == _newest_first([r for r in records if not r.fallback])


@pytest.mark.parametrize(
    ("f", "table", "window"),
    [
        (DecisionFilter(tenant="acme"), "decisions_by_time", ("", "9")),
        (DecisionFilter(tenant="acme", since="2026-11-01T01:00:00Z", until="2026-11-01T04:00:00Z"), "decisions_by_time",
         ("2026-11-01T01:00:00.000Z", "2026-11-01T04:00:00.000Z")),
        (DecisionFilter(tenant="acme", fallback=False), "decisions", ("", "9")),
        (DecisionFilter(tenant="acme", namespace="acme-ml"), "decisions", ("", "9")),
    ],
    ids=["tenant", "tenant-in-a-window", "tenant-and-fallback", "tenant-and-namespace"],
)
def test_a_page_filtered_on_tenant_and_time_alone_is_read_from_the_copy_in_time_order(
        store: AuditStore, f: DecisionFilter, table: str, window: tuple[str, str]) -> None:
    records = [r for r in _spread() if r.tenant == "acme" and not r.fallback and r.namespace == "acme-ml"]
    write_all(store, records)
    shown = _newest_first([r for r in records if window[0] <= r.time < window[1]])
    # which table answered shows in what a row missing from one of the two does to the page
    store.client.command(f"ALTER TABLE {table} DELETE WHERE decision_id = {{d:String}} SETTINGS mutations_sync = 1",
                         parameters={"d": shown[0]})
    page, _ = store.list_decisions(f, None, 50)
    assert [r.decision_id for r in page] == shown[1:]
