"""One schema definition that renders both the single-node DDL and the cluster DDL.

Tables are declared once as data (columns, engine family, key, partition, retention column,
sharding key). ``render`` turns them into ``CREATE TABLE`` statements for one server or chDB
(``*MergeTree`` with ``non_replicated_deduplication_window`` so insert tokens deduplicate there
too) or, with a cluster name, into ``Replicated*MergeTree … ON CLUSTER`` local tables plus
``Distributed`` tables. Decision tables shard by ``cityHash64(decision_id)`` so a decision, its
tier rows and its rollup contribution live on one shard.

Choices (following ClickHouse's own guidance on primary keys, ReplacingMergeTree and
materialized views in its documentation):
- ``decisions`` and ``decision_tiers`` share the key prefix ``(tenant, hour, decision_id)``: the
  API always scopes by tenant and time, and a decision's tier rows sit next to each other.
  A lookup by pod uses a bloom-filter skip index; a lookup by id reads ``decisions_by_id``, the
  record again in id order, since walking the id's bloom filter cost more than the rest of the answer;
  a tenant's newest page reads ``decisions_by_time``, the record again in time order.
- ReplacingMergeTree everywhere a row has a deterministic key, so a re-sent record that slipped
  past insert deduplication is removed at merge time; reads use ``FINAL`` or ``LIMIT 1 BY``.
- Rollups are AggregatingMergeTree over ``uniqExact``/``groupUniqArray`` states keyed by a hash of
  decision_id: a materialized view sees every inserted block, so plain sums would count a
  duplicate block twice, while a set of decision hashes absorbs it.
- Records arrive as their canonical JSON lines into ``decisions_in`` (Null engine); two views
  extract the decision columns and the tier rows in the engine. A retried block carries the same
  ``insert_deduplication_token``, which the views' target tables honour
  (``deduplicate_blocks_in_dependent_materialized_views``), so it is skipped in both.
- Digests and the message live only inside the ZSTD record JSON (ALIAS columns read them): they
  are random hex that does not compress, and storing them twice would double the bytes per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from audit.errors import UserError

DEDUP_WINDOW = 1000
RECORD_CODEC = "ZSTD(1)"


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[str, ...]
    engine: str  # MergeTree family name without the Replicated prefix
    order_by: str
    partition_by: str = ""
    retention_column: str = ""  # Date expression TTLs count from; "" = no TTL possible
    indexes: tuple[str, ...] = ()
    shard_key: str = "rand()"
    engine_args: str = ""
    retention_of: str = ""  # keep rows as long as this table keeps its rows (its retention applies)
    granularity: int = 8192  # rows per primary-index mark


@dataclass(frozen=True)
class View:
    """A materialized view feeding a rollup table; ``select`` reads ``{src}``."""

    name: str
    target: str
    source: str
    select: str


@dataclass(frozen=True)
class Retention:
    """Days to keep rows per table; None keeps them forever (the default: audit data)."""

    days: dict[str, int] = field(default_factory=dict)

    def for_table(self, name: str) -> int | None:
        return self.days.get(name)

    @classmethod
    def parse(cls, text: str) -> Retention:
        """``"decisions=400,decision_tiers=90,quarantine=30"`` (the ``CLAIMTRAIL_RETENTION`` format);
        tables not named keep their rows forever."""
        days: dict[str, int] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, _, value = item.partition("=")
            table = TABLES.get(name.strip())
            if table is None or not table.retention_column or table.retention_of:
                known = ", ".join(sorted(t.name for t in TABLES.values() if t.retention_column and not t.retention_of))
                raise UserError(f"CLAIMTRAIL_RETENTION: {name.strip()!r} is not a table with a retention (one of {known})")
            if not value.strip().isdigit() or int(value) < 1:
                raise UserError(f"CLAIMTRAIL_RETENTION: {name.strip()}: days must be a whole number >= 1, got {value!r}")
            days[table.name] = int(value)
        return cls(days)


DEFAULT_RETENTION = Retention({"quarantine": 30})

SCHEMA_MIGRATIONS = Table(
    name="schema_migrations",
    columns=("version UInt32", "description String", "applied_at DateTime64(3, 'UTC') DEFAULT now64(3)"),
    engine="ReplacingMergeTree",
    order_by="version",
    shard_key="version",
)

EVENTS = Table(
    name="events",
    columns=(
        "cluster LowCardinality(String)",
        "seq UInt64",
        "time DateTime64(3, 'UTC') CODEC(Delta(8), ZSTD(1))",
        "type LowCardinality(String)",
        "object_kind LowCardinality(String)",
        "namespace LowCardinality(String)",
        "name String",
        "resource_version String",
        "body String CODEC(ZSTD(3))",  # the full event, canonical JSON: read back byte for byte
    ),
    engine="ReplacingMergeTree",
    order_by="(cluster, seq)",
    partition_by="toYYYYMM(time)",
    retention_column="toDate(time)",
    shard_key="cityHash64(cluster)",  # one cluster's log on one shard keeps range reads local
)

CHECKPOINTS = Table(
    name="checkpoints",
    columns=(
        "cluster LowCardinality(String)",
        "seq UInt64",
        "digest String",
        "body String CODEC(ZSTD(3))",
        "written_at DateTime64(3, 'UTC') DEFAULT now64(3)",
    ),
    engine="ReplacingMergeTree",
    order_by="(cluster, seq)",
    shard_key="cityHash64(cluster)",
)

DECISIONS = Table(
    name="decisions",
    columns=(
        "time DateTime64(3, 'UTC') CODEC(Delta(8), ZSTD(1))",
        "decision_id String CODEC(ZSTD(1))",
        "cluster LowCardinality(String)",
        "seq UInt64 CODEC(T64, ZSTD(1))",
        "attempt UInt16",
        "tenant LowCardinality(String)",
        "namespace LowCardinality(String)",
        "pod String CODEC(ZSTD(1))",
        "pod_uid String CODEC(ZSTD(1))",
        "policy_version LowCardinality(String)",
        "policy_digest LowCardinality(String)",
        "outcome LowCardinality(String)",
        "node LowCardinality(String)",
        "n_devices UInt16",
        "tier_index Int16",
        "preferred_model LowCardinality(String)",
        "allocated_model LowCardinality(String)",
        "fallback Bool",
        "retry_class LowCardinality(String)",
        "backoff_ms UInt32 CODEC(T64, ZSTD(1))",
        "wait_ms UInt64 CODEC(T64, ZSTD(1))",
        "steps UInt32 CODEC(T64, ZSTD(1))",
        "duration_us UInt32 CODEC(T64, ZSTD(1))",
        "track LowCardinality(String)",
        "template_version LowCardinality(String)",
        "engine_version LowCardinality(String)",
        "schema_version UInt16",
        # the full record, canonical JSON: get_decision returns it. ZSTD(1) rather than (3): on
        # record text it compresses as well after merges (~170 against ~180 B per decision) for
        # about a tenth less of the insert's CPU
        f"record String CODEC({RECORD_CODEC})",
        "input_digest String ALIAS JSONExtractString(record, 'input_digest')",
        "output_digest String ALIAS JSONExtractString(record, 'output_digest')",
        "message String ALIAS JSONExtractString(record, 'message')",
    ),
    engine="ReplacingMergeTree",
    order_by="(tenant, toStartOfHour(time), decision_id)",
    partition_by="toYYYYMM(time)",
    retention_column="toDate(time)",
    indexes=(
        "INDEX idx_decision_id decision_id TYPE bloom_filter(0.001) GRANULARITY 1",
        "INDEX idx_pod pod TYPE bloom_filter(0.01) GRANULARITY 1",
    ),
    shard_key="cityHash64(decision_id)",
)

DECISION_TIERS = Table(
    name="decision_tiers",
    columns=(
        "time DateTime64(3, 'UTC') CODEC(Delta(8), ZSTD(1))",
        "tenant LowCardinality(String)",
        "decision_id String CODEC(ZSTD(1))",
        "tier UInt8",
        "request LowCardinality(String)",
        "model LowCardinality(String)",
        "considered UInt32 CODEC(T64, ZSTD(1))",
        "nodes_evaluated UInt32 CODEC(T64, ZSTD(1))",
        "reasons Map(LowCardinality(String), UInt32)",
    ),
    engine="ReplacingMergeTree",
    order_by="(tenant, toStartOfHour(time), decision_id, tier)",
    partition_by="toYYYYMM(time)",
    retention_column="toDate(time)",
    indexes=("INDEX idx_decision_id decision_id TYPE bloom_filter(0.001) GRANULARITY 1",),
    shard_key="cityHash64(decision_id)",
)

POLICIES = Table(
    name="policies",
    columns=(
        "version String",
        "digest String",
        "document String CODEC(ZSTD(3))",
        "written_at DateTime64(3, 'UTC') DEFAULT now64(3)",
    ),
    engine="ReplacingMergeTree",
    order_by="(version, digest)",
    shard_key="cityHash64(version)",
)

QUARANTINE = Table(
    name="quarantine",
    columns=(
        "time DateTime64(3, 'UTC')",
        "source LowCardinality(String)",
        "kind LowCardinality(String)",
        "error String",
        "path String",
        "raw String CODEC(ZSTD(3))",
        "raw_size UInt64",
        "raw_digest String",
    ),
    engine="ReplacingMergeTree",
    # one row per distinct bad payload per source: a re-sent bad batch is not counted twice
    order_by="(kind, source, raw_digest)",
    partition_by="toYYYYMM(time)",
    retention_column="toDate(time)",
    shard_key="cityHash64(raw_digest)",
)

# Columns replay runs gained after the table was first created (added by migration 7 to older stores).
REPLAY_RUN_ADDED_COLUMNS = (
    "job_id String DEFAULT ''",  # the API replay job that ran it; '' for runs outside a job
    "observed Bool DEFAULT false",  # an observed decision: match means our allocator agrees
    "diff_lines Array(String) DEFAULT [] CODEC(ZSTD(3))",  # the diff line by line (diff: joined by newlines)
)
# a job's runs are read by job id, which the sort key does not lead with
REPLAY_RUN_JOB_INDEX = "INDEX idx_job_id job_id TYPE bloom_filter(0.001) GRANULARITY 1"

REPLAY_RUNS = Table(
    name="replay_runs",
    columns=(
        "time DateTime64(3, 'UTC')",
        "decision_id String",
        "engine_version LowCardinality(String)",
        "policy_digest LowCardinality(String)",
        "match Bool",
        "cause LowCardinality(String)",
        "diff String CODEC(ZSTD(3))",
        *REPLAY_RUN_ADDED_COLUMNS,
    ),
    indexes=(REPLAY_RUN_JOB_INDEX,),
    engine="ReplacingMergeTree",
    order_by="(decision_id, engine_version, policy_digest, time)",
    partition_by="toYYYYMM(time)",
    retention_column="toDate(time)",
    shard_key="cityHash64(decision_id)",
)

# An API replay job, one row per change of state; the highest revision is the current one. Any API
# server can answer for a job this way, not only the one running it.
REPLAY_JOBS = Table(
    name="replay_jobs",
    columns=(
        "job_id String",
        "revision UInt32",
        "tenant String",  # who may see it besides admins; '' for a job an admin started (admins only)
        "total UInt32",
        "state LowCardinality(String)",
        "error String",
        "started DateTime64(3, 'UTC')",
        "updated DateTime64(3, 'UTC')",
    ),
    engine="ReplacingMergeTree",
    engine_args="revision",
    order_by="job_id",
    partition_by="toYYYYMM(started)",
    retention_column="toDate(started)",
    shard_key="cityHash64(job_id)",
)

FALLBACK_1H = Table(
    name="fallback_1h",
    columns=(
        "hour DateTime('UTC')",
        "cluster LowCardinality(String)",
        "tenant LowCardinality(String)",
        "preferred_model LowCardinality(String)",
        "allocated_model LowCardinality(String)",
        "outcome LowCardinality(String)",
        "fallback Bool",
        "track LowCardinality(String)",
        "policy_version LowCardinality(String)",
        "decisions AggregateFunction(uniqExact, UInt64)",
    ),
    engine="AggregatingMergeTree",
    order_by="(hour, cluster, tenant, preferred_model, allocated_model, outcome, fallback, track, policy_version)",
    partition_by="toYYYYMM(hour)",
    retention_column="toDate(hour)",
    shard_key="cityHash64(tenant)",
)

TENANT_USAGE_1H = Table(
    name="tenant_usage_1h",
    columns=(
        "hour DateTime('UTC')",
        "cluster LowCardinality(String)",
        "tenant LowCardinality(String)",
        "allocated_model LowCardinality(String)",
        "decisions AggregateFunction(uniqExact, UInt64)",
        # (decision hash, devices, wait_ms, first choice): a set, so a duplicate adds nothing
        "allocations AggregateFunction(groupUniqArray, Tuple(UInt64, UInt16, UInt64, UInt8))",
    ),
    engine="AggregatingMergeTree",
    order_by="(hour, cluster, tenant, allocated_model)",
    partition_by="toYYYYMM(hour)",
    retention_column="toDate(hour)",
    shard_key="cityHash64(tenant)",
)

FALLBACK_1H_MV = View(
    name="fallback_1h_mv",
    target="fallback_1h",
    source="decisions",
    select=(
        "SELECT toStartOfHour(time) AS hour, cluster, tenant, preferred_model, allocated_model, outcome, "
        "fallback, track, policy_version, uniqExactState(cityHash64(decision_id)) AS decisions "
        "FROM {src} GROUP BY hour, cluster, tenant, preferred_model, allocated_model, outcome, fallback, "
        "track, policy_version"
    ),
)

TENANT_USAGE_1H_MV = View(
    name="tenant_usage_1h_mv",
    target="tenant_usage_1h",
    source="decisions",
    select=(
        "SELECT toStartOfHour(time) AS hour, cluster, tenant, allocated_model, "
        "uniqExactState(cityHash64(decision_id)) AS decisions, "
        "groupUniqArrayStateIf((cityHash64(decision_id), n_devices, wait_ms, toUInt8(tier_index = 0)), "
        "outcome = 'allocated') AS allocations "
        "FROM {src} GROUP BY hour, cluster, tenant, allocated_model"
    ),
)

DECISIONS_IN = Table(
    name="decisions_in",
    columns=("record String",),
    engine="Null",
    order_by="",
    shard_key="cityHash64(JSONExtractString(record, 'decision_id'))",
)

# Extraction of the decision columns from the record JSON, done by the engine at insert time:
# one JSON parse per row and view in C++ instead of building thirty Python column lists. Each view
# reads everything it needs with a single typed ``JSONExtract`` (a second JSONExtract* call on the
# same row would parse the whole record again).
_DECISION_SHAPE = (
    "Tuple(time String, decision_id String, cluster String, seq UInt64, attempt UInt16, tenant String, "
    "namespace String, pod String, pod_uid String, policy_version String, policy_digest String, outcome String, "
    "node String, tier_index Int16, preferred_model String, allocated_model String, fallback Bool, "
    "retry_class String, backoff_ms UInt32, wait_ms UInt64, steps UInt32, duration_us UInt32, track String, "
    "template_version String, engine_version String, schema_version UInt16, devices Array(Tuple(device String)))"
)
_SCALARS = ("decision_id", "cluster", "seq", "attempt", "tenant", "namespace", "pod", "pod_uid", "policy_version",
            "policy_digest", "outcome", "node", "tier_index", "preferred_model", "allocated_model", "fallback",
            "retry_class", "backoff_ms", "wait_ms", "steps", "duration_us", "track", "template_version",
            "engine_version", "schema_version")

DECISIONS_IN_MV = View(
    name="decisions_in_mv",
    target="decisions",
    source="decisions_in",
    select=(
        "SELECT parseDateTime64BestEffort(j.time, 3, 'UTC') AS time, "
        + ", ".join(f"j.{name} AS {name}" for name in _SCALARS)
        + ", toUInt16(length(j.devices)) AS n_devices, record "
        f"FROM (SELECT record, JSONExtract(record, '{_DECISION_SHAPE}') AS j FROM {{src}})"
    ),
)

_TIER_SHAPE = (
    "Tuple(time String, tenant String, decision_id String, tiers Array(Tuple(index UInt8, request String, "
    "model String, considered UInt32, nodes_evaluated UInt32, reasons Map(String, UInt32))))"
)

DECISION_TIERS_IN_MV = View(
    name="decision_tiers_in_mv",
    target="decision_tiers",
    source="decisions_in",
    select=(
        "SELECT parseDateTime64BestEffort(j.time, 3, 'UTC') AS time, j.tenant AS tenant, j.decision_id AS decision_id, "
        "t.index AS tier, t.request AS request, t.model AS model, t.considered AS considered, "
        "t.nodes_evaluated AS nodes_evaluated, t.reasons AS reasons "
        f"FROM (SELECT JSONExtract(record, '{_TIER_SHAPE}') AS j FROM {{src}}) ARRAY JOIN j.tiers AS t"
    ),
)

# The append-only check (``audit.store.history``) looks every incoming key up before writing. The
# decisions table is sorted for the API's reads (tenant, hour), so a lookup by id there scans every
# id; these tables hold each stored key in key order with the sha256 of its stored text, filled by
# the engine from the same inserts, so the check reads a few granules by primary key and compares
# digests instead of reading and hashing stored text. A batch's ids are random, so each one lands
# in its own mark: small marks (128 rows) keep a lookup of a thousand ids to a small share of the
# table, for a primary index of about 8k entries per million keys.
KEY_GRANULARITY = 128

DECISION_KEYS = Table(
    name="decision_keys",
    columns=("decision_id String", "sha256 FixedString(32)", "time DateTime64(3, 'UTC') CODEC(Delta(8), ZSTD(1))"),
    engine="ReplacingMergeTree",
    order_by="decision_id",
    partition_by="toYYYYMM(time)",
    retention_column="toDate(time)",
    retention_of="decisions",
    shard_key="cityHash64(decision_id)",  # beside the decision it names
    granularity=KEY_GRANULARITY,
)

# A decision by id: the decisions table is sorted for listings (tenant, hour), so an id there is
# found through a bloom filter per granule of 8192 records, then the granule's ids and records are
# read: most of the cost of serving one decision. This copy of the id, tenant and record, in id
# order with small marks, answers from the primary index and one short granule, for about 65 B
# more per decision on disk; the engine fills it from the same inserts as the keys below.
DECISIONS_BY_ID = Table(
    name="decisions_by_id",
    columns=("decision_id String", "tenant LowCardinality(String)",
             "time DateTime64(3, 'UTC') CODEC(Delta(8), ZSTD(1))", f"record String CODEC({RECORD_CODEC})"),
    engine="ReplacingMergeTree",
    order_by="decision_id",
    partition_by="toYYYYMM(time)",
    retention_column="toDate(time)",
    retention_of="decisions",
    shard_key="cityHash64(decision_id)",  # beside the decision it copies
    granularity=KEY_GRANULARITY,
)

# A tenant's newest page: in the decisions table an hour's records are in id order, so the newest
# 50 of a tenant lie scattered over its newest hour (about 1,500 records on a million decisions, in
# granules of 8192 rows), and the engine sorts the hour's keys and decompresses most of its records
# to return them: about 13 ms of engine time per page. This copy in (tenant, time) order with small
# marks returns them from the end of one or two granules read in reverse (about 4 ms), for one more
# copy of the record on disk (about 70 B per decision); the engine fills it from the same inserts.
DECISIONS_BY_TIME = Table(
    name="decisions_by_time",
    columns=("tenant LowCardinality(String)", "time DateTime64(3, 'UTC') CODEC(Delta(8), ZSTD(1))",
             "decision_id String", f"record String CODEC({RECORD_CODEC})"),
    engine="ReplacingMergeTree",
    order_by="(tenant, time, decision_id)",
    partition_by="toYYYYMM(time)",
    retention_column="toDate(time)",
    retention_of="decisions",
    shard_key="cityHash64(decision_id)",  # beside the decision it copies
    granularity=KEY_GRANULARITY,
)

EVENT_KEYS = Table(
    name="event_keys",
    columns=("cluster LowCardinality(String)", "seq UInt64", "sha256 FixedString(32)",
             "time DateTime64(3, 'UTC') CODEC(Delta(8), ZSTD(1))"),
    engine="ReplacingMergeTree",
    order_by="(cluster, seq)",
    partition_by="toYYYYMM(time)",
    retention_column="toDate(time)",
    retention_of="events",
    shard_key="cityHash64(cluster)",
    granularity=KEY_GRANULARITY,
)

DECISION_KEYS_MV = View(
    name="decision_keys_mv",
    target="decision_keys",
    source="decisions",
    select="SELECT decision_id, SHA256(record) AS sha256, time FROM {src}",
)

DECISIONS_BY_ID_MV = View(
    name="decisions_by_id_mv",
    target="decisions_by_id",
    source="decisions",
    select="SELECT decision_id, tenant, time, record FROM {src}",
)

DECISIONS_BY_TIME_MV = View(
    name="decisions_by_time_mv",
    target="decisions_by_time",
    source="decisions",
    select="SELECT tenant, time, decision_id, record FROM {src}",
)

EVENT_KEYS_MV = View(
    name="event_keys_mv",
    target="event_keys",
    source="events",
    select="SELECT cluster, seq, SHA256(body) AS sha256, time FROM {src}",
)

TABLES = {t.name: t for t in (
    SCHEMA_MIGRATIONS, EVENTS, CHECKPOINTS, DECISIONS, DECISION_TIERS, POLICIES, QUARANTINE, REPLAY_RUNS, REPLAY_JOBS,
    FALLBACK_1H, TENANT_USAGE_1H, DECISIONS_IN, DECISION_KEYS, EVENT_KEYS, DECISIONS_BY_ID, DECISIONS_BY_TIME,
)}
ROLLUP_VIEWS = (FALLBACK_1H_MV, TENANT_USAGE_1H_MV)
INGEST_VIEWS = (DECISIONS_IN_MV, DECISION_TIERS_IN_MV)
KEY_VIEWS = (DECISION_KEYS_MV, EVENT_KEYS_MV)
BY_ID_VIEWS = (DECISIONS_BY_ID_MV,)
BY_TIME_VIEWS = (DECISIONS_BY_TIME_MV,)
VIEWS = {v.name: v for v in (*ROLLUP_VIEWS, *INGEST_VIEWS, *KEY_VIEWS, *BY_ID_VIEWS, *BY_TIME_VIEWS)}
# Created by early migrations and dropped by a later one (nothing read the usage rollup, whose view
# ran on every insert, and nothing but tests wrote policies): their definitions stay above so that
# the early migrations still run as they did; what the store holds today is CURRENT_TABLES.
DROPPED_VIEWS = (TENANT_USAGE_1H_MV.name,)
DROPPED_TABLES = (TENANT_USAGE_1H.name, POLICIES.name)
CURRENT_TABLES = {name: t for name, t in TABLES.items() if name not in DROPPED_TABLES}


def ttl_clause(table: Table, retention: Retention) -> str:
    days = retention.for_table(table.retention_of or table.name)
    if days is None or not table.retention_column:
        return ""
    return f"TTL {table.retention_column} + INTERVAL {int(days)} DAY"


def create_table(table: Table, database: str, retention: Retention, cluster: str | None = None) -> list[str]:
    """``CREATE TABLE`` for one node, or the replicated local table plus its Distributed table."""
    local = f"{table.name}_local" if cluster else table.name
    on_cluster = f" ON CLUSTER {cluster}" if cluster else ""
    if cluster:
        zk_path = f"'/clickhouse/tables/{{shard}}/{database}/{local}', '{{replica}}'"
        args = f"{zk_path}, {table.engine_args}" if table.engine_args else zk_path
        engine = f"Replicated{table.engine}({args})"
    else:
        engine = f"{table.engine}({table.engine_args})"
    body = ",\n  ".join(table.columns + table.indexes)
    if table.engine == "Null":  # stores nothing: rows only pass through to its views
        statements = [f"CREATE TABLE IF NOT EXISTS {database}.{local}{on_cluster} (\n  {body}\n) ENGINE = Null"]
        if cluster:
            statements.append(
                f"CREATE TABLE IF NOT EXISTS {database}.{table.name} ON CLUSTER {cluster} AS {database}.{local}\n"
                f"ENGINE = Distributed({cluster}, {database}, {local}, {table.shard_key})"
            )
        return statements
    lines = [f"CREATE TABLE IF NOT EXISTS {database}.{local}{on_cluster} (\n  {body}\n) ENGINE = {engine}"]
    if table.partition_by:
        lines.append(f"PARTITION BY {table.partition_by}")
    lines.append(f"ORDER BY {table.order_by}")
    ttl = ttl_clause(table, retention)
    if ttl:
        lines.append(ttl)
    settings = [f"index_granularity = {table.granularity}"]
    if ttl:
        settings.append("ttl_only_drop_parts = 1")
    if not cluster:
        # a single node or chDB deduplicates insert tokens only with a window (replicated: on by default)
        settings.append(f"non_replicated_deduplication_window = {DEDUP_WINDOW}")
    lines.append("SETTINGS " + ", ".join(settings))
    statements = ["\n".join(lines)]
    if cluster:
        statements.append(
            f"CREATE TABLE IF NOT EXISTS {database}.{table.name} ON CLUSTER {cluster} AS {database}.{local}\n"
            f"ENGINE = Distributed({cluster}, {database}, {local}, {table.shard_key})"
        )
    return statements


def create_view(view: View, database: str, cluster: str | None = None) -> str:
    """Views read and write the local tables: each shard rolls up the decisions it holds."""
    suffix = "_local" if cluster else ""
    on_cluster = f" ON CLUSTER {cluster}" if cluster else ""
    select = view.select.format(src=f"{database}.{view.source}{suffix}")
    return (
        f"CREATE MATERIALIZED VIEW IF NOT EXISTS {database}.{view.name}{on_cluster} "
        f"TO {database}.{view.target}{suffix}\nAS {select}"
    )


def replace_view_query(view: View, database: str, cluster: str | None = None) -> str:
    """Give an existing view its current query in place (no window in which inserts pass unseen)."""
    suffix = "_local" if cluster else ""
    on_cluster = f" ON CLUSTER {cluster}" if cluster else ""
    select = view.select.format(src=f"{database}.{view.source}{suffix}")
    return f"ALTER TABLE {database}.{view.name}{on_cluster} MODIFY QUERY {select}"


def drop(kind: str, name: str, database: str, cluster: str | None = None) -> list[str]:
    """``DROP VIEW`` or ``DROP TABLE`` of ``name``; on a cluster a table's local table as well."""
    if not cluster:
        return [f"DROP {kind} IF EXISTS {database}.{name}"]
    names = [name, f"{name}_local"] if kind == "TABLE" else [name]
    return [f"DROP {kind} IF EXISTS {database}.{n} ON CLUSTER {cluster}" for n in names]


def backfill_view(view: View, database: str) -> str:
    """Fill a new rollup from rows that existed before its view (views only see new inserts)."""
    return f"INSERT INTO {database}.{view.target} {view.select.format(src=f'{database}.{view.source} FINAL')}"
