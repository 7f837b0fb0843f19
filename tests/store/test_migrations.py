"""Migrations run from an empty store and from every earlier version, idempotently."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.errors import UserError
from audit.store import connection, migrations, rows
from audit.store.migrations import LATEST, MIGRATIONS, SchemaTooNewError
from audit.store.queries import AuditStore, DecisionFilter
from audit.store.schema import Retention
from tests.store.factory import make_records

EXPECTED_TABLES = {
    1: {"schema_migrations", "events", "checkpoints", "decisions", "decision_tiers", "policies", "quarantine"},
    2: {"replay_runs"},
    3: {"fallback_1h", "tenant_usage_1h", "fallback_1h_mv", "tenant_usage_1h_mv"},
    4: {"decisions_in", "decisions_in_mv", "decision_tiers_in_mv"},
    5: set(),  # the ingest views' queries, replaced in place
    6: set(),  # the record column's codec
    7: {"replay_jobs"},  # and replay runs' job, observed and diff_lines columns
    8: {"decision_keys", "event_keys", "decision_keys_mv", "event_keys_mv"},
    9: set(),  # drops the usage rollup, its view and the policies table
    10: {"pods", "pod_policies", "pod_capacity", "unhealthy_spans"},
    11: {"pod_folds"},  # and the pods' asked column
    12: {"decisions_by_id", "decisions_by_id_mv"},
    13: {"decisions_by_time", "decisions_by_time_mv"},
}
DROPPED = {"tenant_usage_1h", "tenant_usage_1h_mv", "policies"}


def expected_tables(upto: int) -> set[str]:
    made = set().union(*(EXPECTED_TABLES[v] for v in range(1, upto + 1)))
    return made - DROPPED if upto >= 9 else made


def tables(client, database: str) -> set[str]:
    rows = client.query("SELECT name FROM system.tables WHERE database = {d:String}", parameters={"d": database})
    return {r[0] for r in rows.result_rows}


def test_migrations_from_empty_create_every_table_and_record_each_version(tmp_path: Path) -> None:
    target = connection.resolve_dsn(f"chdb://{tmp_path}/db")
    client = connection.connect(target)
    try:
        assert migrations.migrate(client, target.database) == [m.version for m in MIGRATIONS]
        assert tables(client, target.database) == expected_tables(LATEST)
        assert migrations.migrate(client, target.database) == []  # idempotent: nothing left to do
        versions = client.query("SELECT version FROM schema_migrations FINAL ORDER BY version").result_rows
        assert [v[0] for v in versions] == list(range(1, LATEST + 1))
    finally:
        client.close()


@pytest.mark.parametrize("start", [v for v in range(1, LATEST)], ids=lambda v: f"from-v{v}")
def test_migrating_from_an_earlier_version_keeps_data_and_backfills_rollups(tmp_path: Path, start: int) -> None:
    target = connection.resolve_dsn(f"chdb://{tmp_path}/db")
    client = connection.connect(target)
    records = make_records(90, seconds_apart=120)
    try:
        assert migrations.migrate(client, target.database, upto=start) == list(range(1, start + 1))
        assert tables(client, target.database) == expected_tables(start)
        # before version 4 rows were inserted column-wise; do the same here
        batch = rows.decision_batch(records)
        for table, columns in (("decisions", batch.decisions), ("decision_tiers", batch.tiers)):
            client.insert(table, list(columns.values()), column_names=list(columns), column_oriented=True)
    finally:
        client.close()
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:  # applies the rest
        assert migrations.applied_version(store.client, target.database) == LATEST
        assert store.client.query("SELECT count() FROM decisions").result_rows[0][0] == 90
        day = DecisionFilter(since="2026-11-01T00:00:00Z", until="2026-11-02T00:00:00Z")
        from_rollup = store.fallback_stats(day, ["tenant", "model"])
        from_rows = store.fallback_stats(DecisionFilter(until="2026-11-02T00:00:00.001Z"), ["tenant", "model"])
        assert from_rollup == from_rows
        assert sum(g["decisions"] for g in from_rollup) == 90
        assert tables(store.client, target.database) == expected_tables(LATEST)
        codec = store.client.query("SELECT compression_codec FROM system.columns WHERE database = {d:String} "
                                   "AND table = 'decisions' AND name = 'record'", parameters={"d": target.database})
        assert codec.result_rows == [("CODEC(ZSTD(1))",)]
        # the append-only check's key table holds every stored decision with its text's digest
        keys = store.client.query("SELECT count(), countIf(k.sha256 = SHA256(d.record)) FROM decision_keys AS k "
                                  "INNER JOIN decisions AS d USING decision_id").result_rows
        assert keys == [(90, 90)]
        # every decision stored before the by-id copy existed is found through it, record for record
        by_id = store.client.query("SELECT count(), countIf(b.record = d.record AND b.tenant = d.tenant) "
                                   "FROM decisions_by_id AS b INNER JOIN decisions AS d USING decision_id").result_rows
        assert by_id == [(90, 90)]
        assert [store.get_decision(r.decision_id, None) for r in records[:5]] == records[:5]
        # and the newest pages, read from the copy in time order, show every decision stored before it
        by_time = store.client.query("SELECT count(), countIf(b.record = d.record AND b.time = d.time) "
                                     "FROM decisions_by_time AS b INNER JOIN decisions AS d USING decision_id").result_rows
        assert by_time == [(90, 90)]
        tenant = records[0].tenant
        page, _ = store.list_decisions(DecisionFilter(tenant=tenant), None, 100)
        assert page == sorted((r for r in records if r.tenant == tenant), key=lambda r: (r.time, r.decision_id),
                              reverse=True)


def test_a_store_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        store.client.insert("schema_migrations", [[LATEST + 1, "from the future"]], column_names=["version", "description"])
    with pytest.raises(SchemaTooNewError, match=f"schema version {LATEST + 1} is newer"):
        AuditStore.open(f"chdb://{tmp_path}/db")


def test_retention_is_configurable_after_creation(tmp_path: Path) -> None:
    def ttl_of(store: AuditStore, table: str) -> str:
        query = store.client.query("SELECT create_table_query FROM system.tables WHERE database = 'claimtrail' "
                                   "AND name = {t:String}", parameters={"t": table}).result_rows[0][0]
        return query.split(" TTL ")[1].split(" SETTINGS")[0] if " TTL " in query else ""

    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        assert ttl_of(store, "decisions") == ""  # audit data is kept until an operator says otherwise
        assert ttl_of(store, "quarantine") == "toDate(time) + toIntervalDay(30)"
    with AuditStore.open(f"chdb://{tmp_path}/db", retention=Retention({"decisions": 400})) as store:
        assert ttl_of(store, "decisions") == "toDate(time) + toIntervalDay(400)"
        # the history check's keys live exactly as long as the decisions they name
        assert ttl_of(store, "decision_keys") == "toDate(time) + toIntervalDay(400)"
        assert ttl_of(store, "event_keys") == ""
        assert ttl_of(store, "quarantine") == ""
    with AuditStore.open(f"chdb://{tmp_path}/db", retention=Retention({})) as store:
        assert ttl_of(store, "decisions") == ""


@pytest.mark.parametrize(
    ("text", "message"),
    [("decisions=0", "days must be a whole number >= 1"), ("colours=3", "'colours' is not a table"),
     ("schema_migrations=5", "'schema_migrations' is not a table with a retention"),
     ("decision_keys=5", "'decision_keys' is not a table with a retention")],
    ids=["zero-days", "unknown-table", "table-without-time", "table-kept-as-long-as-another"],
)
def test_a_bad_retention_setting_names_the_table(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        Retention.parse(text)


def test_retention_from_the_environment_is_applied_at_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAIMTRAIL_RETENTION", "decisions=400, decision_tiers=90")
    assert Retention.parse("decisions=400, decision_tiers=90").days == {"decisions": 400, "decision_tiers": 90}
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        query = store.client.query("SELECT create_table_query FROM system.tables WHERE database = 'claimtrail' "
                                   "AND name = 'decision_tiers'").result_rows[0][0]
        assert "TTL toDate(time) + toIntervalDay(90)" in query
