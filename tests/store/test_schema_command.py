"""`claimtrail schema` prints the DDL (single node or cluster) and the record JSON schema;
a store held by another process is explained in one line."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from audit.cli.main import main
from audit.store.connection import StoreLockedError
from audit.store.queries import AuditStore


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_single_node_ddl_has_every_table_with_dedup_window(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "schema", "--dsn", "http://u:p@ch.example:8123/audit")
    assert code == 0
    created = re.findall(r"CREATE TABLE IF NOT EXISTS audit\.(\w+) \(", out)
    assert created == ["schema_migrations", "events", "checkpoints", "decisions", "decision_tiers", "policies",
                       "quarantine", "replay_runs", "fallback_1h", "tenant_usage_1h", "decisions_in", "replay_jobs",
                       "decision_keys", "event_keys", "pods", "pod_policies", "pod_capacity", "unhealthy_spans",
                       "pod_folds", "decisions_by_id", "decisions_by_time"]
    assert out.count("non_replicated_deduplication_window = 1000") == len(created) - 1  # decisions_in: Null
    assert "CREATE TABLE IF NOT EXISTS audit.decisions_in (\n  record String\n) ENGINE = Null" in out
    # the history check's key tables and the decisions in id and in time order: small marks, filled by the engine
    assert out.count("index_granularity = 128,") == 4
    assert ("TO audit.decisions_by_id\nAS SELECT decision_id, tenant, time, record FROM audit.decisions;\n\n"
            "INSERT INTO audit.decisions_by_id SELECT decision_id, tenant, time, record FROM audit.decisions FINAL") in out
    assert ("CREATE TABLE IF NOT EXISTS audit.decisions_by_time (\n  tenant LowCardinality(String),") in out
    assert "ORDER BY (tenant, time, decision_id)\nSETTINGS index_granularity = 128," in out
    assert ("TO audit.decisions_by_time\nAS SELECT tenant, time, decision_id, record FROM audit.decisions;\n\n"
            "INSERT INTO audit.decisions_by_time SELECT tenant, time, decision_id, record FROM audit.decisions FINAL") in out
    assert "TO audit.decision_keys\nAS SELECT decision_id, SHA256(record) AS sha256, time FROM audit.decisions" in out
    assert "ON CLUSTER" not in out and "Replicated" not in out
    # what nothing reads or writes any more is dropped after the early migrations created it
    assert re.findall(r"DROP (\w+) IF EXISTS audit\.(\w+)", out) == [
        ("VIEW", "tenant_usage_1h_mv"), ("TABLE", "tenant_usage_1h"), ("TABLE", "policies")]


def test_cluster_ddl_replicates_and_shards_a_decision_with_its_tiers(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "schema", "--cluster", "prod")
    assert code == 0
    assert "ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/claimtrail/decisions_local', '{replica}')" in out
    assert "ReplicatedAggregatingMergeTree(" in out
    for table in ("decisions", "decision_tiers", "replay_runs", "decision_keys", "decisions_by_id", "decisions_by_time"):
        assert (f"CREATE TABLE IF NOT EXISTS claimtrail.{table} ON CLUSTER prod AS claimtrail.{table}_local\n"
                f"ENGINE = Distributed(prod, claimtrail, {table}_local, cityHash64(decision_id))") in out
    assert "TO claimtrail.fallback_1h_local\nAS SELECT" in out and "FROM claimtrail.decisions_local" in out
    assert "non_replicated_deduplication_window" not in out
    assert ("ENGINE = Distributed(prod, claimtrail, decisions_in_local, "
            "cityHash64(JSONExtractString(record, 'decision_id')))") in out
    assert "TO claimtrail.decision_tiers_local\nAS SELECT" in out
    assert "ALTER TABLE claimtrail.decision_tiers_in_mv ON CLUSTER prod MODIFY QUERY SELECT" in out
    assert "ALTER TABLE claimtrail.decisions_local ON CLUSTER prod MODIFY COLUMN record String CODEC(ZSTD(1))" in out
    assert ("ALTER TABLE claimtrail.replay_runs_local ON CLUSTER prod ADD COLUMN IF NOT EXISTS job_id String DEFAULT '', "
            "ADD COLUMN IF NOT EXISTS observed Bool DEFAULT false, "
            "ADD COLUMN IF NOT EXISTS diff_lines Array(String) DEFAULT [] CODEC(ZSTD(3))") in out
    assert ("ALTER TABLE claimtrail.replay_runs ON CLUSTER prod ADD COLUMN IF NOT EXISTS job_id String DEFAULT '', "
            "ADD COLUMN IF NOT EXISTS observed Bool DEFAULT false, ADD COLUMN IF NOT EXISTS diff_lines Array(String) "
            "DEFAULT [];") in out
    assert ("ALTER TABLE claimtrail.replay_runs_local ON CLUSTER prod ADD INDEX IF NOT EXISTS idx_job_id job_id "
            "TYPE bloom_filter(0.001) GRANULARITY 1;") in out
    assert "(7, 'replay jobs any API server can report on; replay runs carry their job, observed flag and diff lines')" in out
    assert "(8, 'stored decision ids and event seqs in key order with the sha256 of their text, backfilled')" in out
    assert ("DROP VIEW IF EXISTS claimtrail.tenant_usage_1h_mv ON CLUSTER prod;\n\n"
            "DROP TABLE IF EXISTS claimtrail.tenant_usage_1h ON CLUSTER prod;\n\n"
            "DROP TABLE IF EXISTS claimtrail.tenant_usage_1h_local ON CLUSTER prod;") in out
    assert ("(9, 'drop the tenant usage rollup and its view, which nothing read, and the policies "
            "table, which nothing wrote')") in out
    for table in ("pods", "pod_policies", "pod_capacity", "unhealthy_spans", "pod_folds"):  # a cluster's on one shard
        assert (f"CREATE TABLE IF NOT EXISTS claimtrail.{table} ON CLUSTER prod AS claimtrail.{table}_local\n"
                f"ENGINE = Distributed(prod, claimtrail, {table}_local, cityHash64(cluster))") in out
    assert "(10, 'the pod lifecycle as tables: pods, and the policy, capacity and unhealthy-device series')" in out
    assert ("ALTER TABLE claimtrail.pods_local ON CLUSTER prod ADD COLUMN IF NOT EXISTS asked LowCardinality(String) "
            "DEFAULT ''") in out
    assert "(11, 'how far the pod tables are written (pod_folds), and what device-plugin pods asked for')" in out
    assert ("TO claimtrail.decisions_by_id_local\nAS SELECT decision_id, tenant, time, record "
            "FROM claimtrail.decisions_local;") in out
    assert "(12, 'the record of each decision in id order, for lookups by id, backfilled')" in out
    assert ("TO claimtrail.decisions_by_time_local\nAS SELECT tenant, time, decision_id, record "
            "FROM claimtrail.decisions_local;") in out
    assert out.rstrip().endswith("(13, 'the record of each decision in time order per tenant, for the newest pages, "
                                 "backfilled');")


def test_record_schema_is_the_json_schema_of_a_decision_record(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "schema", "--record")
    schema = json.loads(out)
    assert code == 0 and schema["title"] == "DecisionRecord"
    assert {"decision_id", "tiers", "output_digest"} <= set(schema["properties"])


def test_a_bad_cluster_name_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "schema", "--cluster", "prod; DROP")
    assert (code, out) == (2, "")
    assert err == "claimtrail schema: --cluster 'prod; DROP': must be a plain identifier (letters, digits, _)\n"


def test_a_store_owned_by_another_process_is_explained_in_one_line(tmp_path: Path) -> None:
    hold = "import clickhouse_connect, sys; c = clickhouse_connect.get_client(dsn=sys.argv[1]); print('held', flush=True); sys.stdin.read()"
    holder = subprocess.Popen([sys.executable, "-c", hold, f"chdb://{tmp_path}/db"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with pytest.raises(StoreLockedError) as info:
            AuditStore.open(f"chdb://{tmp_path}/db")
        assert str(info.value) == (
            f"the embedded store at {tmp_path}/db is owned by another process (a running claimtrail serve or "
            "demo); use that server's API URL (such as http://127.0.0.1:8080) instead of the store's directory, "
            "or stop it first")
    finally:
        holder.communicate("")
    AuditStore.open(f"chdb://{tmp_path}/db").close()  # free again once the owner is gone


def test_every_cluster_statement_is_valid_clickhouse_syntax(store: AuditStore) -> None:
    """No cluster can run here; the engine's own parser checks each statement (formatQuery)."""
    from audit.store.migrations import cluster_ddl

    statements = cluster_ddl("claimtrail", "prod")
    # database, local+Distributed tables, views, the views' query update (v5), the codec (v6), the replay
    # runs' new columns on the local and the Distributed table and the job index (v7), the history key
    # tables' views (v8), the dropped view and the dropped tables' local and Distributed tables (v9),
    # the pod lifecycle's four tables, local and Distributed (v10), pod_folds local and Distributed and
    # the pods' new column on both (v11), decisions_by_id local and Distributed and its view (v12), the same for
    # decisions_by_time (v13), version row
    assert len(statements) == 1 + 14 * 2 + 4 + 2 + 1 + 3 + 2 + 1 + 2 * 2 + 4 * 2 + 2 + 2 + 2 + 1 + 2 + 1 + 1
    for statement in statements:
        formatted = store.client.query("SELECT formatQuery({q:String})", parameters={"q": statement}).result_rows[0][0]
        assert formatted.split()[0] in ("CREATE", "INSERT", "ALTER", "DROP")


@pytest.mark.parametrize("description", ["keep the pod's fold", "a backslash \\ and a quote '", "plain"])
def test_cluster_version_row_keeps_a_description_with_quotes_or_backslashes(
        store: AuditStore, monkeypatch: pytest.MonkeyPatch, description: str) -> None:
    """The version record is SQL text: each description must come back from the engine unchanged."""
    from audit.store import migrations

    extra = migrations.Migration(version=99, description=description, statements=lambda *_: [])
    monkeypatch.setattr(migrations, "MIGRATIONS", (*migrations.MIGRATIONS, extra))
    insert = migrations.cluster_ddl("claimtrail", "prod")[-1]
    values = insert.split(" VALUES ", 1)[1]
    rows = store.client.query(f"SELECT * FROM values('version UInt32, description String', {values})").result_rows
    assert rows[-1] == (99, description)
    assert [version for version, _ in rows] == [m.version for m in migrations.MIGRATIONS]
