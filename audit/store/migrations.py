"""Versioned schema migrations, applied at start and recorded in ``schema_migrations``.

Each migration is a list of idempotent statements (``IF NOT EXISTS``; rollup backfills are
duplicate-tolerant because rollups hold sets of decision hashes), so a migration interrupted
half-way is simply run again. A store whose recorded version is newer than this code knows is
refused: an older binary must not write rows into a schema it does not understand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from audit.store import podschema, schema
from audit.store.connection import StoreError
from audit.store.schema import Retention


class SchemaTooNewError(StoreError):
    """The store was migrated by a newer ClaimTrail than this one."""


@dataclass(frozen=True)
class Migration:
    version: int
    description: str
    statements: Callable[[str, Retention, str | None], list[str]]  # (database, retention, cluster)


def _tables(*names: str) -> Callable[[str, Retention, str | None], list[str]]:
    def build(database: str, retention: Retention, cluster: str | None) -> list[str]:
        out: list[str] = []
        for name in names:
            out.extend(schema.create_table(schema.TABLES[name], database, retention, cluster))
        return out

    return build


def _filled_by_views(tables: tuple[str, ...], views: tuple[schema.View, ...]
                     ) -> Callable[[str, Retention, str | None], list[str]]:
    """Tables, the views that fill them on every insert, and a backfill of what is stored already."""
    def build(database: str, retention: Retention, cluster: str | None) -> list[str]:
        out = _tables(*tables)(database, retention, cluster)
        for view in views:
            out.append(schema.create_view(view, database, cluster))
            if not cluster:  # on a cluster the operator backfills per shard, after the DDL has spread
                out.append(schema.backfill_view(view, database))
        return out

    return build


def _json_ingest(database: str, retention: Retention, cluster: str | None) -> list[str]:
    out = _tables("decisions_in")(database, retention, cluster)
    out.extend(schema.create_view(view, database, cluster) for view in schema.INGEST_VIEWS)
    return out


def _ingest_views_parse_once(database: str, retention: Retention, cluster: str | None) -> list[str]:
    return [schema.replace_view_query(view, database, cluster) for view in schema.INGEST_VIEWS]


def _record_codec(database: str, retention: Retention, cluster: str | None) -> list[str]:
    table = f"{database}.decisions_local" if cluster else f"{database}.decisions"
    on_cluster = f" ON CLUSTER {cluster}" if cluster else ""
    return [f"ALTER TABLE {table}{on_cluster} MODIFY COLUMN record String CODEC({schema.RECORD_CODEC})"]


def _replay_jobs(database: str, retention: Retention, cluster: str | None) -> list[str]:
    out = _tables("replay_jobs")(database, retention, cluster)

    def added(columns: Iterable[str]) -> str:
        return ", ".join(f"ADD COLUMN IF NOT EXISTS {column}" for column in columns)

    index = schema.REPLAY_RUN_JOB_INDEX.removeprefix("INDEX ")
    if not cluster:
        return [*out, f"ALTER TABLE {database}.replay_runs {added(schema.REPLAY_RUN_ADDED_COLUMNS)}",
                f"ALTER TABLE {database}.replay_runs ADD INDEX IF NOT EXISTS {index}"]
    # the replicated table and the Distributed table in front of it both need the columns; the
    # Distributed one stores nothing, so it takes them without a codec, and no index
    plain = [column.split(" CODEC(")[0] for column in schema.REPLAY_RUN_ADDED_COLUMNS]
    local = f"{database}.replay_runs_local ON CLUSTER {cluster}"
    return [*out, f"ALTER TABLE {local} {added(schema.REPLAY_RUN_ADDED_COLUMNS)}",
            f"ALTER TABLE {local} ADD INDEX IF NOT EXISTS {index}",
            f"ALTER TABLE {database}.replay_runs ON CLUSTER {cluster} {added(plain)}"]


def _pod_tables(database: str, retention: Retention, cluster: str | None) -> list[str]:
    out: list[str] = []
    for table in podschema.POD_TABLES.values():
        out.extend(schema.create_table(table, database, retention, cluster))
    return out


def _pod_folds(database: str, retention: Retention, cluster: str | None) -> list[str]:
    out = schema.create_table(podschema.POD_FOLDS, database, retention, cluster)
    added = ", ".join(f"ADD COLUMN IF NOT EXISTS {column}" for column in podschema.POD_ADDED_COLUMNS)
    if not cluster:
        return [*out, f"ALTER TABLE {database}.pods {added}"]
    return [*out, f"ALTER TABLE {database}.pods_local ON CLUSTER {cluster} {added}",
            f"ALTER TABLE {database}.pods ON CLUSTER {cluster} {added}"]


def _drop_unused(database: str, retention: Retention, cluster: str | None) -> list[str]:
    out: list[str] = []
    for view in schema.DROPPED_VIEWS:  # first the view, so no insert writes into a dropped table
        out.extend(schema.drop("VIEW", view, database, cluster))
    for table in schema.DROPPED_TABLES:
        out.extend(schema.drop("TABLE", table, database, cluster))
    return out


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "world events, checkpoints, decisions, tier evidence, policies, quarantine",
              _tables("events", "checkpoints", "decisions", "decision_tiers", "policies", "quarantine")),
    Migration(2, "replay runs", _tables("replay_runs")),
    Migration(3, "duplicate-tolerant rollups for fallback rate and tenant usage, backfilled",
              _filled_by_views(("fallback_1h", "tenant_usage_1h"), schema.ROLLUP_VIEWS)),
    Migration(4, "record ingest as JSON lines, columns and tier rows extracted by the engine", _json_ingest),
    Migration(5, "ingest views parse each record once per view", _ingest_views_parse_once),
    Migration(6, "record text compressed with ZSTD(1)", _record_codec),
    Migration(7, "replay jobs any API server can report on; replay runs carry their job, observed flag and diff lines",
              _replay_jobs),
    Migration(8, "stored decision ids and event seqs in key order with the sha256 of their text, backfilled",
              _filled_by_views(("decision_keys", "event_keys"), schema.KEY_VIEWS)),
    Migration(9, "drop the tenant usage rollup and its view, which nothing read, and the policies table, which "
                 "nothing wrote", _drop_unused),
    Migration(10, "the pod lifecycle as tables: pods, and the policy, capacity and unhealthy-device series",
              _pod_tables),
    Migration(11, "how far the pod tables are written (pod_folds), and what device-plugin pods asked for",
              _pod_folds),
    Migration(12, "the record of each decision in id order, for lookups by id, backfilled",
              _filled_by_views(("decisions_by_id",), schema.BY_ID_VIEWS)),
    Migration(13, "the record of each decision in time order per tenant, for the newest pages, backfilled",
              _filled_by_views(("decisions_by_time",), schema.BY_TIME_VIEWS)),
)
LATEST = MIGRATIONS[-1].version


def applied_version(client: Any, database: str) -> int:
    exists = client.query(
        "SELECT count() FROM system.tables WHERE database = {db:String} AND name = 'schema_migrations'",
        parameters={"db": database},
    ).result_rows[0][0]
    if not exists:
        return 0
    rows = client.query(f"SELECT max(version) FROM {database}.schema_migrations").result_rows
    return int(rows[0][0] or 0)


def migrate(client: Any, database: str, retention: Retention = schema.DEFAULT_RETENTION,
            upto: int = LATEST) -> list[int]:
    """Apply every migration newer than the store's version up to ``upto``; return those applied."""
    for stmt in schema.create_table(schema.SCHEMA_MIGRATIONS, database, retention):
        client.command(stmt)
    current = applied_version(client, database)
    if current > LATEST:
        raise SchemaTooNewError(
            f"store database {database}: schema version {current} is newer than this ClaimTrail "
            f"understands ({LATEST}); upgrade ClaimTrail before using this store"
        )
    applied: list[int] = []
    for migration in MIGRATIONS:
        if migration.version <= current or migration.version > upto:
            continue
        for stmt in migration.statements(database, retention, None):
            client.command(stmt)
        client.insert(f"{database}.schema_migrations", [[migration.version, migration.description]],
                      column_names=["version", "description"])
        applied.append(migration.version)
    return applied


def apply_retention(client: Any, database: str, retention: Retention) -> None:
    """Make each table's TTL match ``retention`` (configurable after creation, not only at it)."""
    for table in schema.CURRENT_TABLES.values():
        if not table.retention_column:
            continue
        ttl = schema.ttl_clause(table, retention)
        if ttl:
            client.command(f"ALTER TABLE {database}.{table.name} MODIFY {ttl}")
        else:
            has_ttl = client.query(
                "SELECT count() FROM system.tables WHERE database = {db:String} AND name = {t:String} "
                "AND position(create_table_query, ' TTL ') > 0",
                parameters={"db": database, "t": table.name},
            ).result_rows[0][0]
            if has_ttl:
                client.command(f"ALTER TABLE {database}.{table.name} REMOVE TTL")


def cluster_ddl(database: str, cluster: str, retention: Retention = schema.DEFAULT_RETENTION) -> list[str]:
    """Every statement of every migration rendered for a cluster, ending with the version record."""
    out = [f"CREATE DATABASE IF NOT EXISTS {database} ON CLUSTER {cluster}"]
    out.extend(schema.create_table(schema.SCHEMA_MIGRATIONS, database, retention, cluster))
    for migration in MIGRATIONS:
        out.extend(migration.statements(database, retention, cluster))
    values = ", ".join(f"({m.version}, {_string_literal(m.description)})" for m in MIGRATIONS)
    out.append(f"INSERT INTO {database}.schema_migrations (version, description) VALUES {values}")
    return out


def _string_literal(text: str) -> str:
    """``text`` as a ClickHouse string literal: a description may hold an apostrophe or a backslash."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def single_node_ddl(database: str, retention: Retention = schema.DEFAULT_RETENTION) -> list[str]:
    out = [f"CREATE DATABASE IF NOT EXISTS {database}"]
    out.extend(schema.create_table(schema.SCHEMA_MIGRATIONS, database, retention))
    for migration in MIGRATIONS:
        out.extend(migration.statements(database, retention, None))
    return out
