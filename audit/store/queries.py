"""The read side of the store, and its owner object ``AuditStore`` (what the API uses).

``AuditStore.open`` resolves the DSN, applies migrations and owns the client. Reads never see
duplicates that ReplacingMergeTree has not merged away yet: point lookups take one row of
identical copies, listings use ``LIMIT 1 BY decision_id`` and aggregates read ``FINAL`` or the
duplicate-tolerant rollups. ``tenant=None`` is the admin view; a tenant string scopes every
query, so another tenant's decision is simply not found. Aggregates accept ``scope_tenant``,
which keeps the caller's tenant and folds every other tenant into ``"(others)"``.
"""

from __future__ import annotations

import json
import logging
import threading
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from audit.cli import UserError
from audit.events import EventError, WorldEvent, validate_event
from audit.records import DecisionRecord, RecordError, digest, validate_record
from audit.store import migrations
from audit.store import quarantine as q
from audit.store.connection import Target, connect, data_dir, resolve_dsn
from audit.store.filters import (
    DecisionFilter,
    conditions,
    decode_cursor,
    encode_cursor,
    rollup_can_answer,
    where_sql,
)
from audit.store.rows import RowError, check_event, check_record
from audit.store.schema import DEFAULT_RETENTION, Retention
from audit.store.writer import RecordWriter

log = logging.getLogger(__name__)

OTHERS = "(others)"
MAX_LIMIT = 10_000
MAX_BODY_BYTES = 256 * 2**20  # decompressed ingest body; larger bodies are refused, not truncated
HOUR_FMT = "formatDateTime({col}, '%Y-%m-%dT%H:00:00Z', 'UTC')"
# group-by name -> (decisions column expression, rollup column)
GROUPS = {
    "tenant": ("tenant", "tenant"),
    "model": ("allocated_model", "allocated_model"),
    "allocated": ("allocated_model", "allocated_model"),
    "preferred": ("preferred_model", "preferred_model"),
    "hour": (HOUR_FMT.format(col="toStartOfHour(time)"), HOUR_FMT.format(col="hour")),
    "cluster": ("cluster", "cluster"),
    "track": ("track", "track"),
    "policy_version": ("policy_version", "policy_version"),
    "outcome": ("outcome", "outcome"),
}
_FINAL = {"do_not_merge_across_partitions_select_final": 1}  # a record's partition never changes


@dataclass
class IngestResult:
    accepted: int = 0
    quarantined: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)  # first errors: line, path, error
    delivered: bool = True  # False: accepted into the durable spool, the store takes it on a retry

    def to_dict(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "quarantined": self.quarantined, "errors": self.errors,
                "delivered": self.delivered}


@dataclass
class ReplayRun:
    decision_id: str
    engine_version: str
    policy_digest: str
    match: bool
    cause: str = ""
    diff: str = ""
    time: str = ""  # ISO 8601; when the replay ran (given by the caller: the store reads no clock here)


def _tenant_expr(scope_tenant: str | None, column: str = "tenant") -> str:
    return f"if({column} = {{scope_tenant:String}}, {column}, '{OTHERS}')" if scope_tenant is not None else column


class AuditStore:
    """Owner of one store connection: migrations, writers, ingest and every query the API runs."""

    def __init__(self, target: Target, client: Any, retention: Retention) -> None:
        self.target = target
        self.client = client
        self.retention = retention
        self._lock = threading.RLock()  # one query at a time on the shared client
        self._ingest_writer: RecordWriter | None = None
        self._writers: list[RecordWriter] = []

    @classmethod
    def open(cls, dsn: str | None = None, retention: Retention | None = None) -> AuditStore:
        """Connect, apply migrations (and ``retention`` TTLs when given)."""
        target = resolve_dsn(dsn)
        client = connect(target)
        migrations.migrate(client, target.database, retention or DEFAULT_RETENTION)
        if retention is not None:
            migrations.apply_retention(client, target.database, retention)
        return cls(target, client, retention or DEFAULT_RETENTION)

    def close(self) -> None:
        for writer in self._writers:
            writer.close()
        self._writers.clear()
        self._ingest_writer = None
        self.client.close()

    def __enter__(self) -> AuditStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # writing ---------------------------------------------------------------------------------
    def spool_dir(self, name: str) -> Path:
        base = Path(self.target.embedded_path).parent if self.target.embedded_path else data_dir()
        return base / "spool" / name

    def writer(self, *, name: str = "writer", **opts: Any) -> RecordWriter:
        """A new spooled writer into this store (its own client; closed with the store)."""
        target = self.target
        writer = RecordWriter(lambda: connect(target), str(self.spool_dir(name)), source=name, **opts)
        self._writers.append(writer)
        return writer

    def _ingest(self) -> RecordWriter:
        if self._ingest_writer is None:
            self._ingest_writer = self.writer(name="ingest")
        return self._ingest_writer

    def ingest_jsonl(self, body: bytes, kind: Literal["records", "events"], source: str) -> IngestResult:
        """Validate JSON lines (gzip allowed), quarantine bad lines, write and flush good ones."""
        if kind not in ("records", "events"):
            raise UserError(f"ingest kind {kind!r}: must be 'records' or 'events'")
        text = _decompress(body)
        result = IngestResult()
        good_records: list[DecisionRecord] = []
        good_events: list[WorldEvent] = []
        bad: list[q.QuarantineRow] = []
        for number, line in enumerate(text.split(b"\n"), start=1):
            if not line.strip():
                continue
            path, error = "", ""
            try:
                data = json.loads(line)
                if kind == "records":
                    record = validate_record(data)
                    check_record(record)  # values must also fit their columns
                    good_records.append(record)
                else:
                    event = validate_event(data)
                    check_event(event)
                    good_events.append(event)
                continue
            except (RecordError, EventError, RowError) as exc:
                path, error = exc.path, str(exc)
            except (ValueError, UnicodeDecodeError) as exc:  # not JSON at all
                error = f"line {number}: invalid JSON: {exc}"
            bad.append(q.quarantine_row(source, kind[:-1], error, path, line))
            if len(result.errors) < 20:
                result.errors.append({"line": number, "path": path, "error": error})
        writer = self._ingest()
        writer.write_quarantine(bad)
        writer.write_records(good_records)
        writer.write_events(good_events)
        result.delivered = writer.flush()
        result.accepted = len(good_records) + len(good_events)
        result.quarantined = len(bad)
        return result

    def ingest_stats(self) -> dict[str, int]:
        """Counters of every writer of this store, summed (for Prometheus)."""
        total: dict[str, int] = {}
        for writer in self._writers:
            for key, value in writer.stats().items():
                total[key] = total.get(key, 0) + value
        return total

    def write_checkpoint(self, cluster: str, seq: int, body: dict[str, Any]) -> None:
        self._insert("checkpoints", ["cluster", "seq", "digest", "body"],
                     [[cluster, seq, digest(body), json.dumps(body, sort_keys=True, separators=(",", ":"))]])

    def write_policy(self, version: str, digest_: str, document: dict[str, Any]) -> None:
        self._insert("policies", ["version", "digest", "document"],
                     [[version, digest_, json.dumps(document, sort_keys=True, separators=(",", ":"))]])

    def write_replay_runs(self, runs: list[ReplayRun]) -> None:
        from audit.store.rows import epoch_ms

        rows_ = [[epoch_ms(r.time), r.decision_id, r.engine_version, r.policy_digest, r.match, r.cause, r.diff]
                 for r in runs]
        if rows_:
            self._insert("replay_runs",
                         ["time", "decision_id", "engine_version", "policy_digest", "match", "cause", "diff"], rows_)

    def _insert(self, table: str, columns: list[str], data: list[list[Any]]) -> None:
        with self._lock:
            self.client.insert(table, data, column_names=columns)

    # reading: single decisions ---------------------------------------------------------------
    def _query(self, sql: str, params: dict[str, Any] | None = None, settings: dict[str, Any] | None = None) -> Any:
        with self._lock:
            return self.client.query(sql, parameters=params or {}, settings=settings)

    def get_decision(self, decision_id: str, tenant: str | None) -> DecisionRecord | None:
        clauses, params = conditions(DecisionFilter(tenant=tenant))
        clauses.append("decision_id = {id:String}")
        params["id"] = decision_id
        rows_ = self._query(f"SELECT record FROM decisions {where_sql(clauses)} LIMIT 1", params).result_rows
        return DecisionRecord.from_dict(json.loads(rows_[0][0])) if rows_ else None

    def latest_for_pod(self, namespace: str, pod: str, tenant: str | None) -> DecisionRecord | None:
        clauses, params = conditions(DecisionFilter(tenant=tenant, namespace=namespace, pod=pod))
        rows_ = self._query(
            f"SELECT record FROM decisions {where_sql(clauses)} ORDER BY time DESC, attempt DESC, decision_id DESC "
            "LIMIT 1", params).result_rows
        return DecisionRecord.from_dict(json.loads(rows_[0][0])) if rows_ else None

    def list_decisions(self, f: DecisionFilter, cursor: str | None, limit: int) -> tuple[list[DecisionRecord], str | None]:
        """Newest first; pass the returned cursor to get the next page (None: no more)."""
        if not 1 <= limit <= MAX_LIMIT:
            raise UserError(f"limit {limit}: must be between 1 and {MAX_LIMIT}")
        clauses, params = conditions(f)
        if cursor:
            ms, last_id = decode_cursor(cursor)
            clauses.append("(time, decision_id) < (fromUnixTimestamp64Milli({c_ms:Int64}, 'UTC'), {c_id:String})")
            params.update(c_ms=ms, c_id=last_id)
        params["limit"] = limit + 1
        rows_ = self._query(
            f"SELECT toUnixTimestamp64Milli(time), decision_id, record FROM decisions {where_sql(clauses)} "
            "ORDER BY time DESC, decision_id DESC LIMIT 1 BY decision_id LIMIT {limit:UInt32}", params).result_rows
        page = rows_[:limit]
        records = [DecisionRecord.from_dict(json.loads(r[2])) for r in page]
        next_cursor = encode_cursor(page[-1][0], page[-1][1]) if len(rows_) > limit else None
        return records, next_cursor

    # reading: aggregates ---------------------------------------------------------------------
    def fallback_stats(self, f: DecisionFilter, group_by: Sequence[str], scope_tenant: str | None = None) -> list[dict]:
        """Per group: decisions, allocated, fallbacks, fallback_rate (of allocated) and unschedulable."""
        for name in group_by:
            if name not in GROUPS:
                raise UserError(f"group_by {name!r}: must be one of {', '.join(sorted(GROUPS))}")
        names = list(dict.fromkeys(group_by))
        use_rollup = rollup_can_answer(f)
        exprs = []
        for name in names:
            expr = GROUPS[name][1 if use_rollup else 0]
            if name == "tenant":
                expr = _tenant_expr(scope_tenant)
            exprs.append(f"{expr} AS g_{name}")
        select = ", ".join([*exprs, "outcome AS o", "fallback AS fb"])
        group = ", ".join([*(f"g_{n}" for n in names), "o", "fb"])
        if use_rollup:
            clauses, params = conditions(f, time_column="hour")
            sql = (f"SELECT {select}, uniqExactMerge(decisions) AS n FROM fallback_1h {where_sql(clauses)} "
                   f"GROUP BY {group}")
            settings = None
        else:
            clauses, params = conditions(f)
            sql = f"SELECT {select}, count() AS n FROM decisions FINAL {where_sql(clauses)} GROUP BY {group}"
            settings = _FINAL
        if scope_tenant is not None:
            params["scope_tenant"] = scope_tenant
        out: dict[tuple, dict[str, Any]] = {}
        for row in self._query(sql, params, settings).result_rows:
            key = tuple(row[: len(names)])
            outcome, fallback, n = row[len(names)], bool(row[len(names) + 1]), int(row[len(names) + 2])
            acc = out.setdefault(key, {**dict(zip(names, key, strict=True)), "decisions": 0, "allocated": 0,
                                       "fallbacks": 0, "unschedulable": 0})
            acc["decisions"] += n
            if outcome == "allocated":
                acc["allocated"] += n
                acc["fallbacks"] += n if fallback else 0
            elif outcome == "unschedulable":
                acc["unschedulable"] += n
        result = [out[k] for k in sorted(out)]
        for acc in result:
            acc["fallback_rate"] = acc["fallbacks"] / acc["allocated"] if acc["allocated"] else 0.0
        return result

    def fairness_stats(self, f: DecisionFilter, scope_tenant: str | None = None) -> list[dict]:
        """Per tenant: decisions, allocated, devices_allocated (the device-seconds proxy: records carry
        no release time), wait p50/p95/p99 in ms, first_choice_rate among allocated decisions."""
        clauses, params = conditions(f)
        if scope_tenant is not None:
            params["scope_tenant"] = scope_tenant
        sql = (
            f"SELECT {_tenant_expr(scope_tenant)} AS t, count(), countIf(outcome = 'allocated'), "
            "sumIf(n_devices, outcome = 'allocated'), quantilesExact(0.5, 0.95, 0.99)(wait_ms), "
            "countIf(outcome = 'allocated' AND tier_index = 0) "
            f"FROM decisions FINAL {where_sql(clauses)} GROUP BY t ORDER BY t"
        )
        out = []
        for t, n, allocated, devices, waits, first in self._query(sql, params, _FINAL).result_rows:
            out.append({"tenant": t, "decisions": int(n), "allocated": int(allocated), "devices_allocated": int(devices),
                        "wait_p50_ms": float(waits[0]), "wait_p95_ms": float(waits[1]), "wait_p99_ms": float(waits[2]),
                        "first_choice_rate": first / allocated if allocated else 0.0})
        return out

    def health_stats(self, f: DecisionFilter) -> list[dict]:
        """Per hour: decisions, retries by retry_class, terminal failures, and device verdict counts
        for unhealthy / binding_conflict / stale_slice from the tier evidence."""
        clauses, params = conditions(f)
        hour = HOUR_FMT.format(col="toStartOfHour(time)")
        by_hour: dict[str, dict[str, Any]] = {}
        sql = (f"SELECT {hour} AS h, retry_class, outcome, count() FROM decisions FINAL {where_sql(clauses)} "
               "GROUP BY h, retry_class, outcome ORDER BY h")
        for h, retry_class, outcome, n in self._query(sql, params, _FINAL).result_rows:
            acc = by_hour.setdefault(h, {"hour": h, "decisions": 0, "retries": {}, "terminal_failures": 0,
                                         "unhealthy": 0, "binding_conflict": 0, "stale_slice": 0})
            acc["decisions"] += int(n)
            if retry_class == "terminal" or outcome == "error":
                acc["terminal_failures"] += int(n)
            elif retry_class:
                acc["retries"][retry_class] = acc["retries"].get(retry_class, 0) + int(n)
        tier_filter = DecisionFilter(tenant=f.tenant, since=f.since, until=f.until)
        t_clauses, t_params = conditions(tier_filter)
        if f.active() - {"tenant", "since", "until"}:
            d_clauses, d_params = conditions(f)
            t_clauses.append(f"decision_id IN (SELECT decision_id FROM decisions {where_sql(d_clauses)})")
            t_params.update(d_params)
        sql = (f"SELECT {hour} AS h, sum(reasons['unhealthy']), sum(reasons['binding_conflict']), "
               f"sum(reasons['stale_slice']) FROM decision_tiers FINAL {where_sql(t_clauses)} GROUP BY h")
        for h, unhealthy, conflict, stale in self._query(sql, t_params, _FINAL).result_rows:
            if h in by_hour:
                by_hour[h].update(unhealthy=int(unhealthy), binding_conflict=int(conflict), stale_slice=int(stale))
        return [by_hour[h] for h in sorted(by_hour)]

    def migration_stats(self, f: DecisionFilter) -> list[dict]:
        """Per track × template_version cohort: decisions, success rate, fallback rate, wait p50/p95."""
        clauses, params = conditions(f)
        sql = (
            "SELECT track, template_version, count(), countIf(outcome = 'allocated'), "
            "countIf(outcome = 'allocated' AND fallback), quantilesExact(0.5, 0.95)(wait_ms) "
            f"FROM decisions FINAL {where_sql(clauses)} GROUP BY track, template_version "
            "ORDER BY track, template_version"
        )
        out = []
        for track, template, n, allocated, fallbacks, waits in self._query(sql, params, _FINAL).result_rows:
            out.append({"track": track, "template_version": template, "decisions": int(n),
                        "allocated": int(allocated), "success_rate": allocated / n if n else 0.0,
                        "fallback_rate": fallbacks / allocated if allocated else 0.0,
                        "wait_p50_ms": float(waits[0]), "wait_p95_ms": float(waits[1])})
        return out

    def tenant_usage(self, f: DecisionFilter, scope_tenant: str | None = None) -> list[dict]:
        """Per tenant × allocated model from the hourly usage rollup (duplicate-tolerant)."""
        if f.active() - {"tenant", "since", "until", "cluster", "model"} or not rollup_can_answer(f):
            raise UserError("tenant_usage: filter only by tenant, cluster, model and whole-hour since/until")
        clauses, params = conditions(f, time_column="hour")
        if scope_tenant is not None:
            params["scope_tenant"] = scope_tenant
        sql = (
            f"SELECT {_tenant_expr(scope_tenant)} AS t, allocated_model, uniqExactMerge(decisions), "
            "groupUniqArrayMerge(allocations) FROM tenant_usage_1h "
            f"{where_sql(clauses)} GROUP BY t, allocated_model ORDER BY t, allocated_model"
        )
        out = []
        for t, model, n, allocations in self._query(sql, params).result_rows:
            out.append({"tenant": t, "model": model, "decisions": int(n), "allocated": len(allocations),
                        "devices_allocated": sum(a[1] for a in allocations),
                        "wait_ms_total": sum(a[2] for a in allocations),
                        "first_choice": sum(a[3] for a in allocations)})
        return out

    # world events, checkpoints, replay, policies, quarantine ---------------------------------
    def events(self, cluster: str, after_seq: int, upto_seq: int, page: int = 10_000) -> Iterator[WorldEvent]:
        """Events with ``after_seq < seq <= upto_seq`` in seq order, each once."""
        last = after_seq
        while True:
            rows_ = self._query(
                "SELECT seq, body FROM events WHERE cluster = {c:String} AND seq > {a:UInt64} AND seq <= {u:UInt64} "
                "ORDER BY seq LIMIT 1 BY seq LIMIT {n:UInt32}",
                {"c": cluster, "a": last, "u": upto_seq, "n": page}).result_rows
            for seq, body in rows_:
                yield WorldEvent.from_dict(json.loads(body))
                last = seq
            if len(rows_) < page:
                return

    def max_seq(self, cluster: str) -> int | None:
        rows_ = self._query("SELECT max(seq), count() FROM events WHERE cluster = {c:String}", {"c": cluster}).result_rows
        return int(rows_[0][0]) if rows_ and rows_[0][1] else None

    def nearest_checkpoint(self, cluster: str, seq: int) -> tuple[int, dict] | None:
        """The checkpoint with the largest seq <= ``seq``; a rewritten checkpoint reads as its last write."""
        rows_ = self._query(
            "SELECT seq, body FROM checkpoints FINAL WHERE cluster = {c:String} AND seq <= {s:UInt64} "
            "ORDER BY seq DESC LIMIT 1", {"c": cluster, "s": seq}).result_rows
        return (int(rows_[0][0]), json.loads(rows_[0][1])) if rows_ else None

    def checkpoint_seqs(self, cluster: str) -> list[int]:
        rows_ = self._query("SELECT DISTINCT seq FROM checkpoints WHERE cluster = {c:String} ORDER BY seq",
                            {"c": cluster}).result_rows
        return [int(r[0]) for r in rows_]

    def replay_summary(self, engine_version: str | None = None, policy_digest: str | None = None,
                       tenant: str | None = None) -> list[dict]:
        """Per engine version × policy digest: decisions replayed, matches, mismatches by cause
        (latest run per decision)."""
        clauses: list[str] = []
        params: dict[str, Any] = {}
        if engine_version is not None:
            clauses.append("engine_version = {ev:String}")
            params["ev"] = engine_version
        if policy_digest is not None:
            clauses.append("policy_digest = {pd:String}")
            params["pd"] = policy_digest
        if tenant is not None:
            clauses.append("decision_id IN (SELECT decision_id FROM decisions WHERE tenant = {tenant:String})")
            params["tenant"] = tenant
        sql = (
            "SELECT engine_version, policy_digest, count(), countIf(m), "
            "arraySort(groupArrayIf(c, NOT m)) FROM ("
            "SELECT decision_id, engine_version, policy_digest, argMax(match, time) AS m, argMax(cause, time) AS c "
            f"FROM replay_runs {where_sql(clauses)} GROUP BY decision_id, engine_version, policy_digest) "
            "GROUP BY engine_version, policy_digest ORDER BY engine_version, policy_digest"
        )
        out = []
        for ev, pd, n, matches, causes in self._query(sql, params).result_rows:
            by_cause: dict[str, int] = {}
            for cause in causes:
                by_cause[cause] = by_cause.get(cause, 0) + 1
            out.append({"engine_version": ev, "policy_digest": pd, "decisions": int(n), "matches": int(matches),
                        "mismatches": int(n) - int(matches), "mismatch_causes": by_cause})
        return out

    def get_policy(self, version: str, digest_: str | None = None) -> dict | None:
        clauses = ["version = {v:String}"]
        params: dict[str, Any] = {"v": version}
        if digest_ is not None:
            clauses.append("digest = {d:String}")
            params["d"] = digest_
        rows_ = self._query(f"SELECT document FROM policies {where_sql(clauses)} ORDER BY written_at DESC LIMIT 1",
                            params).result_rows
        return json.loads(rows_[0][0]) if rows_ else None

    def quarantined(self, limit: int) -> list[dict]:
        if not 1 <= limit <= MAX_LIMIT:
            raise UserError(f"limit {limit}: must be between 1 and {MAX_LIMIT}")
        rows_ = self._query(
            "SELECT formatDateTime(time, '%Y-%m-%dT%H:%i:%S.%fZ', 'UTC'), source, kind, error, path, raw, raw_size "
            "FROM quarantine FINAL ORDER BY time DESC, raw_digest LIMIT {n:UInt32}", {"n": limit}).result_rows
        keys = ("time", "source", "kind", "error", "path", "raw", "raw_size")
        return [dict(zip(keys, row, strict=True)) for row in rows_]

    def quarantine_count(self) -> int:
        return int(self._query("SELECT count() FROM quarantine FINAL").result_rows[0][0])


def open_writer(dsn: str | None = None, name: str = "writer", spool_dir: str | None = None,
                **opts: Any) -> RecordWriter:
    """A spooled writer that needs no live store to start: it connects (and migrates) on first
    delivery and keeps retrying, so records are safe in the spool while the store is away."""
    target = resolve_dsn(dsn)

    def connector() -> Any:
        client = connect(target)
        try:
            migrations.migrate(client, target.database)
        except BaseException:
            client.close()
            raise
        return client

    if spool_dir is None:
        base = Path(target.embedded_path).parent if target.embedded_path else data_dir()
        spool_dir = str(base / "spool" / name)
    return RecordWriter(connector, spool_dir, source=name, **opts)


def _decompress(body: bytes) -> bytes:
    if body[:2] != b"\x1f\x8b":
        if len(body) > MAX_BODY_BYTES:
            raise UserError(f"ingest body: {len(body)} bytes exceeds the limit of {MAX_BODY_BYTES}")
        return body
    try:
        out = zlib.decompressobj(wbits=31).decompress(body, MAX_BODY_BYTES + 1)
    except zlib.error as exc:
        raise UserError(f"ingest body: not valid gzip ({exc})") from None
    if len(out) > MAX_BODY_BYTES:
        raise UserError(f"ingest body: more than {MAX_BODY_BYTES} bytes once decompressed")
    return out


__all__ = ["AuditStore", "DecisionFilter", "IngestResult", "ReplayRun", "open_writer"]
