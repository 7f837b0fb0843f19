"""The read side of the store, and its owner object ``AuditStore`` (what the API uses).

``AuditStore.open`` resolves the DSN, applies migrations and owns the client. Reads never see
duplicates that ReplacingMergeTree has not merged away yet: point lookups take one row of
identical copies, listings use ``LIMIT 1 BY decision_id`` and aggregates read ``FINAL`` or the
duplicate-tolerant rollups. ``tenant=None`` is the admin view; a tenant string scopes every
query, so another tenant's decision is simply not found. Aggregates accept ``scope_tenant``,
which keeps the caller's tenant and folds every other tenant into ``"(others)"``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

from audit.canonical import canonical_json
from audit.errors import UserError
from audit.events import WorldEvent, loads_json, stored_event
from audit.metrics.lifecycle import Lifecycle
from audit.records import DecisionRecord
from audit.replay.result import ReplayResult
from audit.store import aggregates, migrations
from audit.store.checkpoint_keeper import CheckpointKeeper
from audit.store.connection import (
    ID_INDEX_FILE,
    SPOOL_DIR,
    StoreError,
    Target,
    connect,
    data_dir,
    resolve_dsn,
)
from audit.store.filters import (
    DecisionFilter,
    conditions,
    decode_cursor,
    encode_cursor,
    where_sql,
)
from audit.store.generation import GENERATIONS
from audit.store.history import HistoryGuard, Screened
from audit.store.id_index import IdIndex, IdIndexKeeper
from audit.store.ingest import IngestResult, parse_jsonl
from audit.store.ingest_worker import ParserProcess
from audit.store.lifecycle import LifecycleCache
from audit.store.lookups import IdLookups
from audit.store.podtable import PodTable, PodTableKeeper
from audit.store.pool import ClientPool
from audit.store.ports import PodDecision
from audit.store.schema import DEFAULT_RETENTION, Retention
from audit.store.writer import RecordWriter

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_LIMIT = 10_000
ID_BATCH = 5_000  # decision ids bound into one IN (...) query
# A page of a listing read in key order touches a few granules: one engine thread each. Spreading
# such a read over every core gains nothing and, with many readers at once, each query's threads
# only contend with the other readers' queries.
POINT_READ = {"max_threads": 1}
MERGED_TENANTS = 32  # an admin's newest page reads each tenant's newest keys and merges them, up to this many
BY_TIME_FIELDS = {"tenant", "since", "until"}  # the filters decisions_by_time can answer: it holds no other column


@dataclass
class ReplayRun:
    decision_id: str
    engine_version: str
    policy_digest: str
    match: bool
    cause: str = ""
    diff: str = ""  # the diff as one text; left empty, it is written as ``diff_lines`` joined by newlines
    time: str = ""  # ISO 8601; when the replay ran (given by the caller: the store reads no clock here)
    job_id: str = ""  # the API replay job that ran it
    observed: bool = False
    diff_lines: tuple[str, ...] = ()

    @classmethod
    def of(cls, result: ReplayResult, time: str, job_id: str = "") -> ReplayRun:
        """The row that records one replay result, run at ``time`` (by job ``job_id``, if any)."""
        return cls(result.decision_id, result.engine_version, result.policy_digest, result.match, result.cause,
                   time=time, job_id=job_id, observed=result.observed, diff_lines=tuple(result.diff))


@dataclass(frozen=True)
class ReplayJob:
    """One state of an API replay job; ``revision`` orders the states (the highest is current)."""

    job_id: str
    revision: int
    tenant: str  # '' for a job only admins may see
    total: int
    state: str  # running, done, failed or interrupted
    error: str = ""
    started: str = ""  # ISO 8601, given by the caller
    updated: str = ""


class AuditStore:
    """Owner of one store connection: migrations, writers, ingest and every query the API runs."""

    def __init__(self, target: Target, client: Any, retention: Retention) -> None:
        self.target = target
        self.client = client
        self.retention = retention
        self._lock = threading.RLock()  # one statement at a time on the shared client (writes)
        self._reads = ClientPool(lambda: connect(target, create_database=False))  # reads run side by side
        self.id_lookups = IdLookups(lambda: self._reads.client(short=True), self._decision_text, self._decision_texts)
        self.id_index: IdIndexKeeper | None = None  # reads by id answered beside the engine (keep_id_index)
        self._ingest_writer: RecordWriter | None = None
        self._ingest_recovered = False
        self._ingest_lock = threading.Lock()  # the first requests after a start race to create the writer
        self._admit_lock = threading.Lock()  # screening against history and writing are one step
        self._history = HistoryGuard(self._query)
        self._writers: list[RecordWriter] = []
        self._lifecycles = LifecycleCache(PodTable(self._insert_columns))
        self._pod_keeper: PodTableKeeper | None = None  # started by the first events a writer delivers
        self._keeper_lock = threading.Lock()
        self.checkpoints: CheckpointKeeper | None = None  # checkpoints kept as events are stored (keep_checkpoints)
        self._parser: ParserProcess | None = None  # None: bodies are parsed in this process
        self._expire: bool | None = None  # the decisions table has a TTL; read on first need

    @classmethod
    def open(cls, dsn: str | None = None, retention: Retention | None = None, *, create: bool = True) -> AuditStore:
        """Connect, apply migrations, and set TTLs when ``retention`` (or ``CLAIMTRAIL_RETENTION``) is given.
        ``create=False`` refuses an embedded store that does not exist yet."""
        if retention is None and os.environ.get("CLAIMTRAIL_RETENTION") is not None:
            retention = Retention.parse(os.environ["CLAIMTRAIL_RETENTION"])
        target = resolve_dsn(dsn)
        client = connect(target, create_store=create)
        migrations.migrate(client, target.database, retention or DEFAULT_RETENTION)
        if retention is not None:
            migrations.apply_retention(client, target.database, retention)
        return cls(target, client, retention or DEFAULT_RETENTION)

    def close(self) -> None:
        for writer in self._writers:
            writer.close()
        self._writers.clear()
        if self.id_index is not None:
            self.id_index.close(self._id_blocks())
            self.id_index = None
        self._ingest_writer = None
        if self._pod_keeper is not None:
            self._pod_keeper.close()
            self._pod_keeper = None
        if self.checkpoints is not None:  # after the writers: their last deliveries may make one due
            self.checkpoints.close()
            self.checkpoints = None
        self._reads.close()
        if self._parser is not None:
            self._parser.close()
            self._parser = None
        self.client.close()

    def __enter__(self) -> AuditStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # writing ---------------------------------------------------------------------------------
    def spool_dir(self, name: str) -> Path:
        base = Path(self.target.embedded_path).parent if self.target.embedded_path else data_dir()
        return base / SPOOL_DIR / name

    def writer(self, *, name: str = "writer", keep_pods: bool = True, **opts: Any) -> RecordWriter:
        """A new spooled writer into this store (its own client; closed with the store). With
        ``keep_pods`` the events it delivers are folded into the ``pods`` table in the background."""
        target = self.target
        writer = RecordWriter(lambda: connect(target), str(self.spool_dir(name)), source=name,
                              on_events=self._events_stored if keep_pods else None,
                              on_records=self._records_stored, embedded_path=target.embedded_path,
                              destination=target.display, **opts)
        self._writers.append(writer)
        return writer

    def _ingest(self) -> RecordWriter:
        """The ingest writer, its spool from the last run delivered first: the append-only check
        looks in the store, so a batch spooled but undelivered when the process stopped must be
        there before a re-send (or a changed version) of it is judged. Until that delivery
        succeeds, ingest is refused as the store being unavailable (503), and the sender retries."""
        with self._ingest_lock:
            if self._ingest_writer is None:
                self._ingest_writer = self.writer(name="ingest")
            if not self._ingest_recovered:
                self._ingest_recovered = self._ingest_writer.drain()
                if not self._ingest_recovered:
                    raise StoreError("batches spooled before the last stop are not delivered yet: "
                                     f"{self._ingest_writer.last_error}")
            return self._ingest_writer

    def recover_ingest(self) -> bool:
        """Open the ingest writer and deliver what its spool kept from the last run, before the first
        request. True when the spool is empty."""
        try:
            self._ingest()
        except StoreError:
            return False
        return True

    def ingest_jsonl(self, body: bytes, kind: Literal["records", "events"], source: str,
                     compressed: bool | None = None) -> IngestResult:
        """Validate JSON lines (gzip allowed), quarantine bad lines, write and flush good ones.
        History is append-only (``audit.store.history``): identical re-sends are absorbed, items
        that differ from what is stored under their key are quarantined."""
        if kind == "records" and self._parser is not None:
            return self._ingest_encoded(body, source, compressed, self._parser)
        parsed = parse_jsonl(body, kind, source, compressed)
        writer = self._ingest()
        result = parsed.result
        records, events = self.append_history(writer, source, parsed.records, parsed.events, parsed.bad,
                                              parsed.record_lines, parsed.event_lines)
        self._report(result, records, events)
        result.delivered = writer.flush()
        return result

    def parse_in_child_process(self) -> None:
        """Parse ingested bodies of records in a child process from now on (``audit.store.ingest_worker``),
        so that a server's reads do not wait for the interpreter while a body is parsed."""
        if self._parser is None:
            self._parser = ParserProcess()
            self._parser.start()

    def _ingest_encoded(self, body: bytes, source: str, compressed: bool | None, parser: ParserProcess) -> IngestResult:
        parsed, encoded = parser.parse_records(body, source, compressed)
        writer = self._ingest()
        with self._admit_lock:  # as append_history: screening against history and writing are one step
            screened = self._history.screen_encoded(encoded, parsed.record_lines, source)
            writer.write_quarantine([*parsed.bad, *screened.conflicts])
            writer.write_record_texts([r.decision_id for r in screened.fresh], [r.text for r in screened.fresh])
            self._history.remember(screened.accepted)
        result = parsed.result
        self._report(result, screened, Screened())
        result.delivered = writer.flush()
        return result

    @staticmethod
    def _report(result: IngestResult, records: Screened[Any], events: Screened[Any]) -> None:
        result.accepted = len(records.fresh) + len(events.fresh)
        result.absorbed = records.absorbed + events.absorbed
        result.quarantined += len(records.conflicts) + len(events.conflicts)
        for error in records.conflict_errors + events.conflict_errors:
            if len(result.errors) < 20:
                result.errors.append(error)

    def append_history(self, writer: RecordWriter, source: str, records: list[DecisionRecord],
                       events: list[WorldEvent], bad: list[Any] | None = None, record_lines: list[int] | None = None,
                       event_lines: list[int] | None = None) -> tuple[Screened[DecisionRecord], Screened[WorldEvent]]:
        """Hand ``writer`` what history does not hold yet; identical re-sends are absorbed, conflicts
        quarantined (with ``bad``, rows already refused). Every producer path of the API goes
        through here, so the check and the write are one step for all of them."""
        with self._admit_lock:
            screened_r = self._history.screen_records(records, record_lines or list(range(1, len(records) + 1)),
                                                      source)
            screened_e = self._history.screen_events(events, event_lines or list(range(1, len(events) + 1)), source)
            writer.write_quarantine([*(bad or []), *screened_r.conflicts, *screened_e.conflicts])
            writer.write_records(screened_r.fresh, screened_r.fresh_texts)
            writer.write_events(screened_e.fresh, screened_e.fresh_texts)
            self._history.remember(screened_r.accepted + screened_e.accepted)
        return screened_r, screened_e

    def _keeper(self) -> PodTableKeeper:
        with self._keeper_lock:
            if self._pod_keeper is None:
                self._pod_keeper = PodTableKeeper(lambda cluster, known: self._lifecycles.current(self, cluster, known),
                                                  self._writers_busy, stale=self._stale_pod_clusters)
            return self._pod_keeper

    def _events_stored(self, clusters: list[str], lines: list[str]) -> None:
        self._keeper().poke(clusters, lines)
        if self.checkpoints is not None:
            self.checkpoints.poke(set(clusters))

    def keep_checkpoints(self, every: int) -> None:
        """Write each cluster's world checkpoints every ``every`` events from now on, in the
        background as its events are stored (``audit.store.checkpoint_keeper``), starting with
        what the logs already stored are due."""
        if self.checkpoints is None:
            self.checkpoints = CheckpointKeeper(self, every)
            self.checkpoints.poke(self.event_clusters())

    def wait_checkpoints(self, timeout: float | None = None) -> bool:
        """Wait until the checkpoints due for the events delivered so far are written (or their
        failure logged); False on timeout."""
        keeper = self.checkpoints
        return keeper is None or keeper.wait_idle(timeout)

    def keep_id_index(self) -> bool:
        """Answer reads by id from now on from an index file beside an embedded store
        (``audit.store.id_index``), filled in the background with what the store holds and kept
        current by this store's writers. Not for a store whose decisions expire (the index would
        outlive them) or a ClickHouse server (other processes write to it). True when in use."""
        path = self.target.embedded_path
        if path is None or self.id_index is not None:
            return self.id_index is not None
        file = Path(path).parent / ID_INDEX_FILE
        if self._decisions_expire():
            # a file kept from before the TTL was set would answer for records expiry removed,
            # should the TTL be lifted again
            IdIndex.remove(file)
            return False
        uuid = self._query("SELECT toString(uuid) FROM system.tables WHERE database = currentDatabase() "
                           "AND name = 'decisions_by_id'").result_rows[0][0]
        self.id_index = IdIndexKeeper(IdIndex(file, str(uuid), self._id_blocks()), self._id_page)
        return True

    def _id_blocks(self) -> int:
        """The highest insert block of ``decisions_by_id``'s parts: it only grows as records are stored."""
        return int(self._query("SELECT max(max_block_number) FROM system.parts WHERE database = currentDatabase() "
                               "AND table = 'decisions_by_id' AND active").result_rows[0][0])

    def _records_stored(self, payload: bytes) -> None:
        if self.id_index is not None:
            self.id_index.stored(payload.split(b"\n"))

    def _id_page(self, after: str, n: int) -> list[tuple[str, str, str]]:
        """Up to ``n`` stored (decision id, tenant, record text) in id order, after ``after``."""
        with self._reads.client() as client:
            rows_ = _run(client, "SELECT decision_id, tenant, record FROM decisions_by_id WHERE decision_id > "
                         "{after:String} ORDER BY decision_id LIMIT 1 BY decision_id LIMIT {n:UInt32}",
                         {"after": after, "n": n}, POINT_READ).result_rows
        return [(str(d), str(t), str(text)) for d, t, text in rows_]

    def keep_pod_tables(self) -> None:
        """Bring the pod tables current now in the background (events stored by another process or
        before this one started), and look for such events again from time to time."""
        self._keeper().poke_clusters(self._stale_pod_clusters())

    def _stale_pod_clusters(self) -> list[str]:
        rows_ = self._query("SELECT cluster, max(seq) FROM events GROUP BY cluster ORDER BY cluster").result_rows
        return [str(c) for c, top in rows_ if int(top) > self._lifecycles.folded_seq(str(c))]

    def _writers_busy(self) -> bool:
        """Some writer of this store holds records or events not yet delivered."""
        return not all(writer.idle() for writer in list(self._writers))

    def wait_pod_table(self, timeout: float | None = None) -> bool:
        """Wait until the events delivered so far are in the ``pods`` table; False on timeout."""
        keeper = self._pod_keeper
        return keeper is None or keeper.wait_idle(timeout)

    def _insert_columns(self, table: str, columns: dict[str, list[Any]]) -> None:
        with self._lock:
            self.client.insert(table, list(columns.values()), column_names=list(columns), column_oriented=True)

    def ingest_stats(self) -> dict[str, int]:
        """Counters of every writer of this store, summed (for Prometheus)."""
        total: dict[str, int] = {}
        for writer in self._writers:
            for key, value in writer.stats().items():
                total[key] = total.get(key, 0) + value
        return total

    def write_checkpoint(self, cluster: str, seq: int, body: dict[str, Any] | str) -> None:
        """Store ``body`` as its canonical JSON text, which replay verifies byte-wise before parsing
        (``audit.replay.checkpoints.load_checkpoint_text``); ``digest`` is that text's sha256. A
        text is stored as given (``checkpoint_text`` of a body, made in another process)."""
        text = body.encode() if isinstance(body, str) else canonical_json(body)
        self._insert("checkpoints", ["cluster", "seq", "digest", "body"],
                     [[cluster, seq, hashlib.sha256(text).hexdigest(), text.decode()]])

    def write_replay_runs(self, runs: list[ReplayRun]) -> None:
        from audit.store.rows import epoch_ms

        rows_ = [[epoch_ms(r.time), r.decision_id, r.engine_version, r.policy_digest, r.match, r.cause,
                  r.diff or "\n".join(r.diff_lines), r.job_id, r.observed, list(r.diff_lines)] for r in runs]
        if rows_:
            self._insert("replay_runs", ["time", "decision_id", "engine_version", "policy_digest", "match", "cause",
                                         "diff", "job_id", "observed", "diff_lines"], rows_)

    def write_replay_job(self, job: ReplayJob) -> None:
        from audit.store.rows import epoch_ms

        self._insert("replay_jobs", ["job_id", "revision", "tenant", "total", "state", "error", "started", "updated"],
                     [[job.job_id, job.revision, job.tenant, job.total, job.state, job.error,
                       epoch_ms(job.started, "started"), epoch_ms(job.updated, "updated")]])

    def replay_job(self, job_id: str) -> ReplayJob | None:
        """The job's current state (its highest revision), or None."""
        from audit.timestamps import format_time_ms

        rows_ = self._query(
            "SELECT max(revision), argMax(tenant, revision), argMax(total, revision), argMax(state, revision), "
            "argMax(error, revision), toUnixTimestamp64Milli(argMax(started, revision)), "
            "toUnixTimestamp64Milli(argMax(updated, revision)) FROM replay_jobs WHERE job_id = {j:String} "
            "GROUP BY job_id", {"j": job_id}).result_rows
        if not rows_:
            return None
        revision, tenant, total, state, error, started, updated = rows_[0]
        return ReplayJob(job_id, int(revision), tenant, int(total), state, error, format_time_ms(int(started)),
                         format_time_ms(int(updated)))

    def running_replay_jobs(self) -> list[ReplayJob]:
        """Every job whose current state is ``running``."""
        from audit.timestamps import format_time_ms

        rows_ = self._query(
            "SELECT job_id, max(revision), argMax(tenant, revision), argMax(total, revision), argMax(state, revision) "
            "AS current, argMax(error, revision), toUnixTimestamp64Milli(argMax(started, revision)), "
            "toUnixTimestamp64Milli(argMax(updated, revision)) FROM replay_jobs GROUP BY job_id "
            "HAVING current = 'running' ORDER BY job_id").result_rows
        return [ReplayJob(job_id, int(revision), tenant, int(total), state, error, format_time_ms(int(started)),
                          format_time_ms(int(updated)))
                for job_id, revision, tenant, total, state, error, started, updated in rows_]

    def replay_job_done(self, job_id: str) -> int:
        """How many distinct decisions the job has replayed so far."""
        rows_ = self._query("SELECT uniqExact(decision_id) FROM replay_runs WHERE job_id = {j:String}",
                            {"j": job_id}).result_rows
        return int(rows_[0][0]) if rows_ else 0

    def replay_job_runs(self, job_id: str) -> list[ReplayRun]:
        """The latest run of each decision the job has replayed so far, by decision id."""
        from audit.timestamps import format_time_ms

        rows_ = self._query(
            "SELECT decision_id, argMax(engine_version, time), argMax(policy_digest, time), argMax(match, time), "
            "argMax(cause, time), argMax(diff, time), toUnixTimestamp64Milli(max(time)), argMax(observed, time), "
            "argMax(diff_lines, time) FROM replay_runs WHERE job_id = {j:String} GROUP BY decision_id "
            "ORDER BY decision_id", {"j": job_id}).result_rows
        return [ReplayRun(decision, engine, policy, bool(match), cause, diff, format_time_ms(int(ms)), job_id,
                          bool(observed), tuple(lines))
                for decision, engine, policy, match, cause, diff, ms, observed, lines in rows_]

    def _insert(self, table: str, columns: list[str], data: list[list[Any]]) -> None:
        with self._lock:
            self.client.insert(table, data, column_names=columns)

    # reading: single decisions ---------------------------------------------------------------
    def _query(self, sql: str, params: dict[str, Any] | None = None, settings: dict[str, Any] | None = None,
               *, short: bool = False, **options: Any) -> Any:
        with self._reads.client(short) as client:  # short: a granule or two, served first (pool.py)
            return _run(client, sql, params, settings, **options)

    def insight(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn(query, *args)`` with this store's locked ``query(sql, parameters, settings)``: how a
        stats kind of the API runs the SQL its module owns (``audit.store.ports.AggregateReads``)."""
        return fn(self._query, *args, **kwargs)

    def get_decision(self, decision_id: str, tenant: str | None) -> DecisionRecord | None:
        text = self.get_decision_text(decision_id, tenant)
        return DecisionRecord.from_dict(json.loads(text)) if text is not None else None

    def get_decision_text(self, decision_id: str, tenant: str | None) -> str | None:
        """``get_decision``'s record as the canonical JSON text it is stored as, not built. Lookups
        made at the same moment are read together (``audit.store.lookups``)."""
        answered, text = self.indexed_decision_text(decision_id, tenant)
        return text if answered else self.engine_decision_text(decision_id, tenant)

    def indexed_decision_text(self, decision_id: str, tenant: str | None) -> tuple[bool, str | None]:
        """(True, ``get_decision_text``'s answer) if the id index gives it, else (False, None): no
        engine query, so cheap enough for a caller that must not wait."""
        conditions(DecisionFilter(tenant=tenant))  # refuses a tenant value before it waits for others
        index = self.id_index
        if index is not None and (found := index.get(decision_id)) is not None:
            return True, (found[1] if tenant is None or found[0] == tenant else None)
        return False, None

    def engine_decision_text(self, decision_id: str, tenant: str | None) -> str | None:
        """``get_decision_text``'s answer read from the engine (lookups made at the same moment are
        read together), handed to the id index if found."""
        index = self.id_index
        text = self.id_lookups.get(decision_id, tenant)
        if index is not None and text is not None:
            index.stored([text.encode()])  # stored before the index knew it (another process, or a lost hand-over)
        return text

    @staticmethod
    def _decision_text(client: Any, decision_id: str, tenant: str | None) -> str | None:
        clauses, params = conditions(DecisionFilter(tenant=tenant))
        clauses.append("decision_id = {id:String}")
        params["id"] = decision_id
        # decisions_by_id holds the same record in id order: the primary index finds its one short
        # granule, where the decisions table would walk a bloom filter per granule (schema.py)
        rows_ = _run(client, f"SELECT record FROM decisions_by_id {where_sql(clauses)} LIMIT 1", params,
                     POINT_READ).result_rows
        return str(rows_[0][0]) if rows_ else None

    @staticmethod
    def _decision_texts(client: Any, decision_ids: list[str]) -> dict[str, tuple[str, str]]:
        """(tenant, record text) by decision id, of those of ``decision_ids`` that are stored."""
        rows_ = _run(client, "SELECT decision_id, tenant, record FROM decisions_by_id "
                     "WHERE decision_id IN {ids:Array(String)} LIMIT 1 BY decision_id", {"ids": decision_ids},
                     POINT_READ).result_rows
        return {str(d): (str(t), str(text)) for d, t, text in rows_}

    def get_decisions(self, decision_ids: Sequence[str], tenant: str | None,
                      batch: int = ID_BATCH) -> dict[str, DecisionRecord]:
        """The decisions among ``decision_ids`` the caller may see, by id: one query per ``batch`` ids."""
        found: dict[str, DecisionRecord] = {}
        for i in range(0, len(decision_ids), batch):
            clauses, params = conditions(DecisionFilter(tenant=tenant))
            clauses.append("decision_id IN {ids:Array(String)}")
            params["ids"] = list(decision_ids[i:i + batch])
            for decision, text in self._query(f"SELECT decision_id, record FROM decisions {where_sql(clauses)} "
                                              "LIMIT 1 BY decision_id", params).result_rows:
                found[decision] = DecisionRecord.from_dict(json.loads(text))
        return found

    def decision_keys(self, f: DecisionFilter, limit: int) -> list[tuple[str, str, str, int]]:
        """(decision_id, time, cluster, seq) of up to ``limit`` decisions matching ``f``, in no
        particular order: the narrow columns a replay selection reads, without the records."""
        from audit.timestamps import format_time_ms

        clauses, params = conditions(f)
        params["limit"] = limit
        rows_ = self._query(
            f"SELECT decision_id, toUnixTimestamp64Milli(time), cluster, seq FROM decisions {where_sql(clauses)} "
            "LIMIT 1 BY decision_id LIMIT {limit:UInt64}", params).result_rows
        return [(d, format_time_ms(int(ms)), c, int(seq)) for d, ms, c, seq in rows_]

    def known_decision_ids(self, decision_ids: Sequence[str], tenant: str | None, batch: int = ID_BATCH) -> set[str]:
        """Which of ``decision_ids`` exist and the caller may see: one narrow query per ``batch`` ids."""
        known: set[str] = set()
        for i in range(0, len(decision_ids), batch):
            clauses, params = conditions(DecisionFilter(tenant=tenant))
            clauses.append("decision_id IN {ids:Array(String)}")
            params["ids"] = list(decision_ids[i:i + batch])
            known.update(row[0] for row in self._query(
                f"SELECT DISTINCT decision_id FROM decisions {where_sql(clauses)}", params).result_rows)
        return known

    def pod_decisions(self, cluster: str, pod_uids: Sequence[str]) -> list[PodDecision]:
        """The cluster's stored decisions about the pods of these uids (``pod_decisions``)."""
        return pod_decisions(lambda sql, p: self._query(sql, p).result_rows, cluster, pod_uids)

    def pod_clusters(self, namespace: str, pod: str, tenant: str | None, limit: int = 5) -> list[str]:
        """The clusters with decisions of a pod of that namespace and name, sorted, at most ``limit``:
        the name of a pod is unique within a cluster, not across them."""
        clauses, params = conditions(DecisionFilter(tenant=tenant, namespace=namespace, pod=pod))
        return sorted(row[0] for row in self._query(
            f"SELECT DISTINCT cluster FROM decisions {where_sql(clauses)} ORDER BY cluster LIMIT {int(limit)}", params,
            settings=POINT_READ).result_rows)

    def latest_for_pod(self, namespace: str, pod: str, tenant: str | None,
                       cluster: str | None = None) -> DecisionRecord | None:
        clauses, params = conditions(DecisionFilter(tenant=tenant, namespace=namespace, pod=pod, cluster=cluster))
        rows_ = self._query(
            f"SELECT record FROM decisions {where_sql(clauses)} ORDER BY time DESC, attempt DESC, decision_id DESC "
            "LIMIT 1", params, settings=POINT_READ).result_rows
        return DecisionRecord.from_dict(json.loads(rows_[0][0])) if rows_ else None

    def list_decisions(self, f: DecisionFilter, cursor: str | None, limit: int) -> tuple[list[DecisionRecord], str | None]:
        """Newest first; pass the returned cursor to get the next page (None: no more)."""
        texts, next_cursor = self.list_decision_texts(f, cursor, limit)
        return [DecisionRecord.from_dict(json.loads(text)) for text in texts], next_cursor

    def list_decision_texts(self, f: DecisionFilter, cursor: str | None, limit: int) -> tuple[list[str], str | None]:
        """``list_decisions``'s page with each record as the canonical JSON text it is stored as:
        a caller that passes records on unchanged need not build them."""
        if not 1 <= limit <= MAX_LIMIT:
            raise UserError(f"limit {limit}: must be between 1 and {MAX_LIMIT}")
        after = decode_cursor(cursor) if cursor else None
        if f.tenant is not None:
            rows_ = self._newest_rows(f, after, limit + 1)
            more = len(rows_) > limit
            return [text for _, _, text in rows_[:limit]], encode_cursor(rows_[limit - 1][0], rows_[limit - 1][1]) if more else None
        keys = self._newest_keys(f, after, limit + 1)
        page = keys[:limit]
        if not page:
            return [], None
        fetch, fetch_params = conditions(DecisionFilter(tenant=f.tenant))
        fetch.append("decision_id IN {ids:Array(String)}")
        fetch.append("time BETWEEN fromUnixTimestamp64Milli({lo:Int64}, 'UTC') AND fromUnixTimestamp64Milli({hi:Int64}, 'UTC')")
        fetch_params.update(ids=[k[1] for k in page], lo=page[-1][0], hi=page[0][0])
        by_key = {(ms, decision_id): text for ms, decision_id, text in self._query(
            f"SELECT toUnixTimestamp64Milli(time), decision_id, record FROM decisions {where_sql(fetch)} "
            "LIMIT 1 BY time, decision_id", fetch_params, settings=POINT_READ).result_rows}
        next_cursor = encode_cursor(page[-1][0], page[-1][1]) if len(keys) > limit else None
        return [str(by_key[(k[0], k[1])]) for k in page], next_cursor

    def _newest_keys(self, f: DecisionFilter, after: tuple[int, str] | None, count: int) -> list[tuple[int, str]]:
        """(time in ms, decision id) of the ``count`` newest decisions ``f`` selects older than
        the key ``after``, newest first. Only these narrow key columns are sorted; the caller reads the
        wide record JSON for one page. A tenant's keys come in the table's sorting key
        (tenant, toStartOfHour(time), ...), so with the hour first the engine reads the newest hours
        backwards in key order and stops once it has enough (optimize_read_in_order), instead of
        sorting every decision of the tenant. Across tenants, the same read per tenant merged here
        does what one sort over the whole table would, in a few milliseconds per tenant where that
        sort takes well over a hundred on a million decisions and every core; only past
        ``MERGED_TENANTS`` tenants does one sort become the cheaper way."""
        if f.tenant is None:
            conditions(f)  # checks every field of f, even with no tenant to read the keys of
            tenants = [t for (t,) in self._query("SELECT DISTINCT tenant FROM decisions", settings=POINT_READ).result_rows]
            if len(tenants) <= MERGED_TENANTS:
                newest: list[tuple[int, str]] = []
                seen: set[str] = set()  # one row per decision id, the newest, as LIMIT 1 BY keeps it
                for key in sorted((key for tenant in tenants for key in self._newest_keys(replace(f, tenant=tenant), after, count)),
                                  reverse=True):
                    if key[1] not in seen:
                        seen.add(key[1])
                        newest.append(key)
                return newest[:count]
        clauses, params = self._older_than(f, after)
        params["limit"] = count
        table, order = _newest_order(f)
        return [(int(ms), str(decision_id)) for ms, decision_id in self._query(
            f"SELECT toUnixTimestamp64Milli(time) AS ms, decision_id FROM {table} {where_sql(clauses)} "
            f"ORDER BY {order} LIMIT 1 BY decision_id "
            "LIMIT {limit:UInt32}", params, settings=POINT_READ if f.tenant is not None else None).result_rows]

    @staticmethod
    def _older_than(f: DecisionFilter, after: tuple[int, str] | None) -> tuple[list[str], dict[str, Any]]:
        """The conditions of ``f`` (each field checked), and of keys older than the key ``after``."""
        clauses, params = conditions(f)
        if after is not None:
            ms, last_id = after
            # the hour bound is implied by the tuple bound; said outright, it prunes by the sorting key
            clauses.append("toStartOfHour(time) <= toStartOfHour(fromUnixTimestamp64Milli({c_ms:Int64}, 'UTC'))")
            clauses.append("(time, decision_id) < (fromUnixTimestamp64Milli({c_ms:Int64}, 'UTC'), {c_id:String})")
            params.update(c_ms=ms, c_id=last_id)
        return clauses, params

    def _newest_rows(self, f: DecisionFilter, after: tuple[int, str] | None,
                     count: int) -> list[tuple[int, str, str]]:
        """(time in ms, decision id, record) of the ``count`` newest decisions of one tenant under
        ``f`` older than the key ``after``, newest first, each decision once: ``_newest_keys`` and
        the read of their records in one query. Sorted by the narrow key columns with a LIMIT and
        no LIMIT BY, the engine reads the record of the rows kept only (lazy materialization), not
        of every row of the granules it sorted: about half the engine time of the two queries.
        A page that filters on the tenant and time alone is read from ``decisions_by_time`` (schema.py),
        where the newest records are the last rows of the tenant's range rather than scattered over
        its newest hour. Copies of a decision not merged away yet are dropped here, keeping the
        first, as LIMIT 1 BY would; when they took places of the page, the query is asked again for
        more rows."""
        clauses, params = self._older_than(f, after)
        table, order = _newest_order(f)
        want = count
        while True:
            params["limit"] = want
            got = self._query(
                f"SELECT toUnixTimestamp64Milli(time) AS ms, decision_id, record FROM {table} {where_sql(clauses)} "
                f"ORDER BY {order} LIMIT {{limit:UInt32}}", params, settings=POINT_READ).result_rows
            seen: set[str] = set()
            rows_: list[tuple[int, str, str]] = []
            for ms, decision_id, text in got:
                if decision_id not in seen:
                    seen.add(decision_id)
                    rows_.append((int(ms), str(decision_id), text))
            if len(rows_) >= count or len(got) < want:
                return rows_[:count]
            want *= 2

    def decisions_version(self) -> tuple[Any, ...] | None:
        """A value that changes whenever the stored decisions may have changed, so an answer read
        at one version can be served again while the version stays; None when this store cannot
        tell. Only the embedded store answers: it alone sees every part of its tables (a cluster's
        shards keep theirs on other nodes), and only this process writes to it. Then, when its
        decisions never expire, only this process's inserts change them (merges keep one of
        identical copies, which every read already does), so the count of those inserts is the
        version (``audit.store.generation``), without a query. With a TTL, expiry removes rows in
        a background merge at a time of the engine's choosing: the version is then read from the
        parts, where every insert adds a part with a higher block number and merges, expiry and
        mutations change the parts' count, rows or data version."""
        path = self.target.embedded_path
        if path is None:
            return None
        if not self._decisions_expire():
            return ("inserts", *GENERATIONS.current(path))
        row = self._query("SELECT max(max_block_number), max(data_version), count(), sum(rows) FROM system.parts "
                          "WHERE database = currentDatabase() AND table = 'decisions' AND active").result_rows[0]
        return tuple(int(v) for v in row)

    def _decisions_expire(self) -> bool:
        """The decisions table has a TTL. Read once: a TTL is only set or removed by ``open``
        (``migrations.apply_retention``), before this object exists."""
        if self._expire is None:
            self._expire = bool(self._query(
                "SELECT count() FROM system.tables WHERE database = currentDatabase() AND name = 'decisions' "
                "AND position(create_table_query, ' TTL ') > 0").result_rows[0][0])
        return self._expire

    def all_decisions(self, f: DecisionFilter, page: int = MAX_LIMIT) -> list[DecisionRecord]:
        """Every decision under ``f``, newest first (``list_decisions`` page after page)."""
        out: list[DecisionRecord] = []
        cursor = None
        while True:
            records, cursor = self.list_decisions(f, cursor, page)
            out.extend(records)
            if cursor is None:
                return out

    # reading: aggregates ---------------------------------------------------------------------
    def fallback_stats(self, f: DecisionFilter, group_by: Sequence[str], scope_tenant: str | None = None) -> list[dict]:
        """Per group: decisions, allocated, fallback_decisions, fallback_rate (of allocated; None when
        nothing was allocated), unschedulable: decision records, not pods."""
        return aggregates.fallback_stats(self._query, f, group_by, scope_tenant)

    def health_stats(self, f: DecisionFilter) -> list[dict]:
        """Per hour: retries by retry_class, terminal failures, unhealthy/conflict/stale verdicts."""
        return aggregates.health_stats(self._query, f)

    def migration_stats(self, f: DecisionFilter) -> list[dict]:
        """Per track x template_version cohort: success and fallback rates, wait p50/p95."""
        return aggregates.migration_stats(self._query, f)

    # world events, checkpoints, replay, quarantine -------------------------------------------
    def events(self, cluster: str, after_seq: int, upto_seq: int, page: int = 10_000) -> Iterator[WorldEvent]:
        """Events with ``after_seq < seq <= upto_seq`` in seq order, each once."""
        for _, body in self.event_texts(cluster, after_seq, upto_seq, page):
            yield WorldEvent.from_dict(loads_json(body))

    def digested_events(self, cluster: str, after_seq: int, upto_seq: int,
                        page: int = 10_000) -> Iterator[tuple[WorldEvent, str]]:
        """As ``events``, each with the sha256 of its stored text (``audit.events.stored_event``)."""
        for _, body in self.event_texts(cluster, after_seq, upto_seq, page):
            yield stored_event(body)

    def event_texts(self, cluster: str, after_seq: int, upto_seq: int,
                    page: int = 10_000) -> Iterator[tuple[int, bytes]]:
        """(seq, stored body bytes) with ``after_seq < seq <= upto_seq`` in seq order, each seq once.

        The body is read as bytes: it is hashed as stored, and decoding it to text first would
        only be undone by the parser."""
        return event_pages(lambda sql, p: self._query(sql, p, column_formats={"body": "bytes"}).result_rows,
                           cluster, after_seq, upto_seq, page)

    def event_clusters(self) -> list[str]:
        return [str(r[0]) for r in self._query("SELECT DISTINCT cluster FROM events ORDER BY cluster").result_rows]

    def pod_lifecycle(self, cluster: str) -> Lifecycle:
        """The cluster's pod lifecycle, every stored event folded (``audit.store.lifecycle``)."""
        return self._lifecycles.current(self, cluster)

    def max_seq(self, cluster: str) -> int | None:
        """The highest event seq stored for ``cluster``; None when it has no events."""
        return max_seq(lambda sql, p: self._query(sql, p, short=True).result_rows, cluster)

    def nearest_checkpoint(self, cluster: str, seq: int) -> tuple[int, dict] | None:
        """The checkpoint with the largest seq <= ``seq``; a rewritten checkpoint reads as its last write."""
        found = self.nearest_checkpoint_text(cluster, seq)
        return (found[0], json.loads(found[1])) if found is not None else None

    def nearest_checkpoint_text(self, cluster: str, seq: int) -> tuple[int, str] | None:
        """As ``nearest_checkpoint``, with the body as the stored text, unparsed."""
        return nearest_checkpoint_text(lambda sql, p: self._query(sql, p).result_rows, cluster, seq)

    def object_events(self, cluster: str, kind: str, keys: Sequence[str], after_seq: int, upto_seq: int,
                      page: int = 10_000) -> Iterator[WorldEvent]:
        """The events about the objects of ``kind`` named by ``keys`` (``audit.world.obj_key``)
        with ``after_seq < seq <= upto_seq``, in seq order, each once."""
        for _, body in event_pages(lambda sql, p: self._query(sql, p, column_formats={"body": "bytes"}).result_rows,
                                   cluster, after_seq, upto_seq, page, objects=(kind, keys)):
            yield WorldEvent.from_dict(loads_json(body))

    def latest_checkpoint_seq(self, cluster: str, seq: int) -> int | None:
        """The largest checkpoint seq <= ``seq`` of ``cluster``; None when it has none."""
        rows_ = self._query("SELECT seq FROM checkpoints WHERE cluster = {c:String} AND seq <= {s:Int64} "
                            "ORDER BY seq DESC LIMIT 1", {"c": cluster, "s": seq}, short=True).result_rows
        return int(rows_[0][0]) if rows_ else None

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


def _run(client: Any, sql: str, params: dict[str, Any] | None = None, settings: dict[str, Any] | None = None,
         **options: Any) -> Any:
    # Pass only parameters the SQL binds: clickhouse-connect falls back to client-side
    # %-formatting when none of the given names has a {name:Type} placeholder, which would
    # both break on literal '%' (formatDateTime) and bypass server-side binding.
    bound = {k: v for k, v in (params or {}).items() if "{" + k + ":" in sql}
    return client.query(sql, parameters=bound, settings=settings, **options)


def _newest_order(f: DecisionFilter) -> tuple[str, str]:
    """The table a newest-first read of ``f`` runs on, and its ORDER BY. The decisions table's key
    has the hour before the id, so the hour leads its order (read in key order, backwards); the copy
    in (tenant, time, id) order serves the filters on tenant and time alone."""
    if f.active() <= BY_TIME_FIELDS:
        return "decisions_by_time", "time DESC, decision_id DESC"
    return "decisions", "toStartOfHour(time) DESC, time DESC, decision_id DESC"


# (sql, parameters) -> rows: a store's read, or its writer's (``RecordWriter.query``) for a
# producer that holds no store
Read = Callable[[str, dict[str, Any]], Sequence[tuple[Any, ...]]]


def event_pages(read: Read, cluster: str, after_seq: int, upto_seq: int, page: int = 10_000,
                objects: tuple[str, Sequence[str]] | None = None) -> Iterator[tuple[int, Any]]:
    """(seq, stored body) with ``after_seq < seq <= upto_seq`` in seq order, each seq once, read
    ``page`` events per query in the table's (cluster, seq) order; ``objects`` (kind, keys): only
    the events about those objects, named as ``audit.world.obj_key`` names them."""
    last = after_seq
    only, bound = "", {}
    if objects is not None:
        kind, keys = objects
        # the name alone first: a column read where the key is built only for the rows it matches
        only = ("AND object_kind = {k:String} AND name IN {names:Array(String)} "
                "AND if(namespace = '', name, concat(namespace, '/', name)) IN {keys:Array(String)} ")
        # (a key with a "/" names a namespaced object, or a cluster-scoped one whose name holds one)
        names = {part for key in keys for part in (key, key.partition("/")[2]) if part}
        bound = {"k": kind, "names": sorted(names), "keys": sorted(set(keys))}
    sql = ("SELECT seq, body FROM events WHERE cluster = {c:String} AND seq > {a:Int64} AND seq <= {u:Int64} "
           f"{only}ORDER BY seq LIMIT 1 BY seq LIMIT {{n:UInt32}}")
    while True:
        rows_ = read(sql, {"c": cluster, "a": last, "u": upto_seq, "n": page, **bound})
        yield from rows_
        if rows_:
            last = rows_[-1][0]
        if len(rows_) < page:
            return


def max_seq(read: Read, cluster: str) -> int | None:
    """The highest event seq stored for ``cluster``; None when it has no events."""
    # read in the table's (cluster, seq) order from the end: one granule, where max() reads the
    # whole log of the cluster (every stats answer asks this, to know whether to fold)
    rows_ = read("SELECT seq FROM events WHERE cluster = {c:String} ORDER BY seq DESC LIMIT 1", {"c": cluster})
    return int(rows_[0][0]) if rows_ else None


def nearest_checkpoint_text(read: Read, cluster: str, seq: int) -> tuple[int, str] | None:
    """The stored text of the checkpoint with the largest seq <= ``seq``, with that seq; a
    rewritten checkpoint reads as its last write."""
    rows_ = read("SELECT seq, body FROM checkpoints FINAL WHERE cluster = {c:String} AND seq <= {s:Int64} "
                 "ORDER BY seq DESC LIMIT 1", {"c": cluster, "s": seq})
    return (int(rows_[0][0]), rows_[0][1]) if rows_ else None


def pod_decisions(read: Read, cluster: str, pod_uids: Sequence[str], batch: int = ID_BATCH) -> list[PodDecision]:
    """The decisions of ``cluster`` about the pods of these uids, each once, by decision id."""
    out: list[PodDecision] = []
    wanted = sorted(set(pod_uids))
    for i in range(0, len(wanted), batch):
        rows_ = read("SELECT decision_id, namespace, pod_uid, attempt, outcome FROM decisions "
                     "WHERE cluster = {c:String} AND pod_uid IN {u:Array(String)} "
                     "ORDER BY decision_id LIMIT 1 BY decision_id", {"c": cluster, "u": wanted[i:i + batch]})
        out += [PodDecision(str(d), str(ns), str(uid), int(a), str(o)) for d, ns, uid, a, o in rows_]
    return sorted(out, key=lambda d: d.decision_id)


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
        spool_dir = str(base / SPOOL_DIR / name)
    return RecordWriter(connector, spool_dir, source=name, embedded_path=target.embedded_path,
                        destination=target.display, **opts)


__all__ = ["AuditStore", "DecisionFilter", "IngestResult", "PodDecision", "ReplayJob", "ReplayRun", "event_pages",
           "open_writer", "pod_decisions"]
