"""Where producers (simulator, Kubernetes watcher, importers) send records and events.

``open_sink(target)`` picks the transport from the target:

- ``path.jsonl``: canonical JSON lines of records, events in ``--events`` or ``path.events.jsonl``;
- ``http(s)://host:port``: the audit API (``/v1/ingest/records`` and ``/v1/ingest/events``), gzip
  JSONL batches with the bearer token from ``CLAIMTRAIL_TOKEN``. Batches are spooled on disk
  first, so a server that is down or restarting loses nothing: delivery retries with exponential
  backoff and drains the spool in order once the server answers. This is how every process but
  the owner reaches an embedded store (chDB locks its directory to one process);
- ``chdb://dir`` or ``clickhouse://user:pass@host:8123/db``: the store's spooled writer directly.

Every sink also reads back what it holds of a cluster (``stored_world``): the objects alive at the
end of the cluster's event log, folded with ``audit.world.fold_object``, and the decisions stored
about the pods among them and the pods the alive claims' allocations served, so a restarted
Kubernetes watcher goes on from that world instead of an empty one. The store's sinks (direct
and over the API) start from the newest world checkpoint the store keeps at or before the log's
end and fold only the events after it (``read_stored``), which gives what folding the whole log
gives; the file sink has no checkpoints and folds its whole events file.
"""

from __future__ import annotations

import gzip
import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import httpx

from audit.errors import UserError
from audit.events import EventError, EventType, WorldEvent, event_problem, loads_json
from audit.records import DecisionRecord, RecordError, escaped_record_text, record_problem, record_text
from audit.replay.checkpoints import CheckpointCorrupt, checkpoint_snapshot
from audit.store.connection import data_dir
from audit.store.ports import PodDecision
from audit.store.rows import escaped_event_text, event_json
from audit.store.spool import Frame, Spool
from audit.world import Objects, fold_object, obj_key, policy_in_force
from ingest.claims import follow_reservations, reserved_since_allocated
from ingest.files import FileFormatError, ImportResult, JsonlAppender, import_file

log = logging.getLogger(__name__)

LAST_SEQ = 2**63 - 1  # the highest seq a read of the events can bind (its bounds are Int64)


def record_line(record: DecisionRecord) -> str:
    """The record's JSON line for a file or the API: its canonical text, or, for a record that has
    none (a text UTF-8 cannot hold), its JSON with that text escaped, which the reader of the file
    or the API refuses into its quarantine. Either way nothing is dropped and the batch goes on; a
    warning names the decision and the field here."""
    return _line(record, record_text, escaped_record_text, record_problem)


def event_line(event: WorldEvent) -> str:
    """``record_line`` for a world event (its stored text, ``event_json``); the API quarantines
    one sent escaped."""
    return _line(event, event_json, escaped_event_text, event_problem)


def _line(item: Any, text: Callable[[Any], str], escaped: Callable[[Any], str],
          problem: Callable[[Any, Any], str]) -> str:
    try:
        return text(item)
    except (RecordError, EventError) as exc:
        log.warning("%s; written with that text escaped, so that nothing is lost", problem(item, exc))
        return escaped(item)


class SinkError(UserError, ValueError):
    """The target cannot be used as a sink; the message names it."""


class Sink(Protocol):
    def write_records(self, records: Iterable[DecisionRecord]) -> None: ...
    def write_events(self, events: Iterable[WorldEvent]) -> None: ...
    def flush(self) -> bool: ...
    def close(self) -> None: ...
    def stats(self) -> dict[str, int]: ...
    def stored_world(self, cluster: str) -> StoredWorld | None: ...


@dataclass
class StoredWorld:
    """What a sink holds of one cluster: the objects alive at the end of its event log (kind ->
    ``audit.world.obj_key`` -> payload; a kind with none alive is left out), the log's last seq
    (None: no events), for each claim allocated at the end the pods its allocation has been
    reserved for (``ingest.claims.follow_reservations``: claim uid -> pod uids, gone pods
    included), the decisions stored about the pods among those objects and those reserved pods,
    and the Policy object in force. All of these are what folding the whole log gives, whether
    the world was read from a checkpoint or not. ``checkpoint`` is the seq of the checkpoint it
    started from (None: the log's first event), and ``events`` how many events were read to build
    it: those after the checkpoint, and the claims' own events read back for their reservations
    (what restoring it cost, not the size of the log)."""

    last_seq: int | None = None
    objects: Objects = field(default_factory=dict)
    events: int = 0
    reservations: dict[str, list[str]] = field(default_factory=dict)
    decisions: list[PodDecision] = field(default_factory=list)
    # the ``obj_key`` of the Policy object in force at the end of the log ("": the default policy),
    # as ``audit.world.World`` reads the log: the policy that names the models of what it implies
    policy: str = ""
    checkpoint: int | None = None


class StoredLog(Protocol):
    """What a sink reads of one cluster's stored history to give its ``StoredWorld``."""

    def checkpoint(self) -> str | bytes | None:
        """The stored text of the newest checkpoint at or before the log's end (None: none)."""

    def events(self, after_seq: int) -> Iterable[WorldEvent]:
        """The events after ``after_seq`` through the log's end, in seq order."""

    def claim_events(self, keys: list[str], after_seq: int, upto_seq: int) -> Iterable[WorldEvent]:
        """The events about the ResourceClaims named by ``keys`` (``obj_key``) with
        ``after_seq < seq <= upto_seq``, in seq order."""

    def decisions(self, uids: list[str]) -> list[PodDecision]:
        """The decisions stored about the pods of these uids."""


# The first stretch of log read back for the reservations of the claims a checkpoint holds
# allocated: a checkpoint interval's worth (``audit.replay.checkpoints.DEFAULT_INTERVAL``) before
# it; each stretch further back is twice as long as the one before.
CLAIM_WINDOW = 10_000


def read_stored(cluster: str, log: StoredLog, window: int = CLAIM_WINDOW) -> StoredWorld:
    """``cluster``'s world as ``log`` leaves it: from its newest checkpoint, when it has one that
    checks out, and the events after it; else every event.

    A checkpoint holds the objects and the Policy in force, not the reservations, which remember
    pods that left a claim before the checkpoint: for the claims it holds allocated that are still
    so at the end, each one's own events are read back from the end, a stretch at a time, until
    the change that made its allocation is among them (``ingest.claims.reserved_since_allocated``),
    so a claim's read is bounded by how long it has been held, not by the log. That answer takes
    a claim's uid to be its own, as the API server makes it; were a claim alive at the checkpoint
    or at the end to have none, or one another claim has, the whole log is folded instead."""
    text = log.checkpoint()
    start = _checkpoint(cluster, text) if text is not None else None
    if start is None:
        return _decided(_fold(StoredWorld(), log.events(-1)), log)
    at = int(start["seq"])
    world = StoredWorld(last_seq=at, checkpoint=at, policy=str(start.get("policy") or ""),
                        objects={kind: dict(by_key) for kind, by_key in (start.get("objects") or {}).items()})
    claims = world.objects.get("ResourceClaim", {})
    if not _uids_own(claims.values()):
        return _decided(_fold(StoredWorld(), log.events(-1)), log)
    for claim in claims.values():
        # each allocated claim with the pods it names at the checkpoint; those it named before are read back below
        follow_reservations(world.reservations, None, claim)
    held_then = set(world.reservations)
    _fold(world, log.events(at))
    claims = world.objects.get("ResourceClaim", {})
    if not _uids_own(claims.values()):
        return _decided(_fold(StoredWorld(), log.events(-1)), log)
    held = {key: uid for key, claim in claims.items()
            if (uid := str((claim.get("metadata") or {}).get("uid") or "")) in held_then and uid in world.reservations}
    if held:
        found = _reserved_since_allocated(log, sorted(held), world.last_seq if world.last_seq is not None else at,
                                           at - window, world)
        world.reservations.update({held[key]: pods for key, pods in found.items()})
    return _decided(world, log)


def _checkpoint(cluster: str, text: str | bytes) -> dict[str, Any] | None:
    """The snapshot ``text`` holds; None (logged) when it fails its own digest."""
    try:
        return checkpoint_snapshot(cluster, None, text)
    except CheckpointCorrupt as exc:
        log.warning("stored world read from the whole log", extra={"error": str(exc)[:500]})
        return None


def _uids_own(claims: Iterable[dict[str, Any]]) -> bool:
    """Whether each of ``claims`` has a uid of its own (see ``read_stored``)."""
    uids = [str((claim.get("metadata") or {}).get("uid") or "") for claim in claims]
    return "" not in uids and len(set(uids)) == len(uids)


def _fold(world: StoredWorld, events: Iterable[WorldEvent]) -> StoredWorld:
    """Fold ``events`` (in seq order, after ``world``'s last) into ``world``."""
    for event in events:
        old, new = fold_object(world.objects, event)
        if event.object_kind == "ResourceClaim":
            follow_reservations(world.reservations, old, new)
        elif event.object_kind == "Policy":
            world.policy = policy_in_force(world.policy, obj_key(event.namespace, event.name),
                                           deleted=new is None)
        world.last_seq = event.seq
        world.events += 1
    return world


def _reserved_since_allocated(log: StoredLog, keys: list[str], upto: int, lo: int,
                              world: StoredWorld) -> dict[str, list[str]]:
    """The reservations of the claims named by ``keys``, allocated at ``upto``, each from its own
    events read back from ``upto`` through ``lo`` and then stretches twice as long each (counted
    in ``world.events``), until the change that made its allocation is among them."""
    states: dict[str, list[dict[str, Any] | None]] = {key: [] for key in keys}
    found: dict[str, list[str]] = {}
    hi, span = upto, upto - lo
    while states:
        lo = max(-1, hi - span)
        read: dict[str, list[dict[str, Any] | None]] = {}
        for event in log.claim_events(sorted(states), lo, hi):
            world.events += 1
            read.setdefault(obj_key(event.namespace, event.name), []).append(
                None if event.type == EventType.DELETE.value else event.payload)
        for key in sorted(states):
            states[key] = read.get(key, []) + states[key]
            pods = reserved_since_allocated(states[key], whole=lo < 0)
            if pods is not None:
                found[key] = pods
                del states[key]
        hi, span = lo, span * 2
    return found


def _decided(world: StoredWorld, log: StoredLog) -> StoredWorld:
    """``world`` with the decisions stored about the pods alive at its end and the pods its claims'
    allocations served (by uid): a standalone claim's allocation may be recorded for a pod deleted
    since. A kind none of whose objects is alive is left out, as a checkpoint leaves it out."""
    world.objects = {kind: by_key for kind, by_key in world.objects.items() if by_key}
    uids = sorted(({str((pod.get("metadata") or {}).get("uid") or "") for pod in world.objects.get("Pod", {}).values()}
                   | {pod for pods in world.reservations.values() for pod in pods}) - {""})
    world.decisions = log.decisions(uids) if uids else []
    return world


class FileSink:
    """Records and events as canonical JSON lines in two files (fsync'ed on flush). The files are
    appended to, never truncated: what an earlier run wrote stays, and is what ``stored_world``
    reads back."""

    def __init__(self, path: str, events_path: str | None = None) -> None:
        records = Path(path)
        events = Path(events_path) if events_path else records.with_name(records.stem + ".events.jsonl")
        self._paths = {"records": records, "events": events}
        try:
            self._records = JsonlAppender(records)
            self._events = JsonlAppender(events)
        except FileFormatError as exc:
            raise SinkError(str(exc)) from None
        for appender in (self._records, self._events):
            if appender.repaired:  # a run killed mid-line: what it lost, the next one derives again
                log.warning(appender.repaired)
        self._counts = {"received": 0, "written": 0, "events_received": 0, "events_written": 0}

    def write_records(self, records: Iterable[DecisionRecord]) -> None:
        n = self._records.write_lines(record_line(r) for r in records)
        self._counts["received"] += n
        self._counts["written"] += n

    def write_events(self, events: Iterable[WorldEvent]) -> None:
        n = self._events.write_lines(event_line(e) for e in events)
        self._counts["events_received"] += n
        self._counts["events_written"] += n

    def flush(self) -> bool:
        self._records.flush()
        self._events.flush()
        return True

    def close(self) -> None:
        self._records.close()
        self._events.close()

    def stats(self) -> dict[str, int]:
        return dict(self._counts)

    def stored_world(self, cluster: str) -> StoredWorld:
        """The cluster's world as the events file leaves it, with the records file's decisions
        about its pods: the whole file is folded (it keeps no checkpoints). A line these files
        hold that ingest would refuse is a ``SinkError``."""
        return read_stored(cluster, _FileLog(self, cluster))

    def _read(self, kind: str) -> ImportResult:
        path = self._paths[kind]
        self.flush()
        if path.stat().st_size == 0:
            return ImportResult()
        try:
            result = import_file(path, kind)  # type: ignore[arg-type]
        except FileFormatError as exc:
            raise SinkError(str(exc)) from None
        if result.errors:
            first = result.errors[0]
            where = f" at {first.path}" if first.path else ""
            raise SinkError(f"{first.location}{where}: {first.error} ({len(result.errors)} invalid line(s): a "
                            "restarted producer reads back what this file holds; fix or remove them first)")
        return result


class _FileLog:
    """A ``FileSink``'s files as a ``StoredLog``: no checkpoints."""

    def __init__(self, sink: FileSink, cluster: str) -> None:
        self._sink = sink
        self._cluster = cluster

    def checkpoint(self) -> None:
        return None

    def events(self, after_seq: int) -> list[WorldEvent]:
        return sorted((e for e in self._sink._read("events").events if e.cluster == self._cluster and e.seq > after_seq),
                      key=lambda e: e.seq)

    def claim_events(self, keys: list[str], after_seq: int, upto_seq: int) -> list[WorldEvent]:
        wanted = set(keys)
        return [e for e in self.events(after_seq) if e.seq <= upto_seq and e.object_kind == "ResourceClaim"
                and obj_key(e.namespace, e.name) in wanted]

    def decisions(self, uids: list[str]) -> list[PodDecision]:
        wanted = set(uids)
        found = {r.decision_id: PodDecision(r.decision_id, r.namespace, r.pod_uid, r.attempt, r.outcome)
                 for r in self._sink._read("records").records if r.cluster == self._cluster and r.pod_uid in wanted}
        return [found[d] for d in sorted(found)]


class StoreSink:
    """The store's spooled writer, for a ``chdb://`` or ClickHouse server DSN.

    History stays append-only as it does through the API (``audit.store.history``): an identical
    re-send is absorbed, and a record or event that differs from the one stored under its key (a
    second simulated run into a store under the same cluster name, say) is quarantined, never
    written over it. ``quarantined`` counts them with the rows the store refuses (times outside
    its columns' range), and ``first_quarantined`` names the first."""

    def __init__(self, dsn: str, spool_dir: str | None = None, name: str = "sink", **opts: Any) -> None:
        from audit.store.connection import refuse_if_held_elsewhere, resolve_dsn
        from audit.store.history import HistoryGuard
        from audit.store.queries import open_writer

        refuse_if_held_elsewhere(resolve_dsn(dsn))
        self.writer = open_writer(dsn, name=name, spool_dir=spool_dir, **opts)
        self._source = name
        self._guard = HistoryGuard(self._query)
        self._lock = threading.Lock()  # screening and writing are one step, as in the API

    def _query(self, sql: str, parameters: dict[str, Any]) -> Any:
        return _Rows(self.writer.query(sql, parameters))

    def write_records(self, records: Iterable[DecisionRecord]) -> None:
        self._write(list(records), self._guard.screen_records, self.writer.write_records)

    def write_events(self, events: Iterable[WorldEvent]) -> None:
        self._write(list(events), self._guard.screen_events, self.writer.write_events)

    def _write(self, batch: list[Any], screen: Any, write: Any) -> None:
        """Screen ``batch`` against history, quarantine its conflicts (the writer counts them with
        every row it quarantines) and ``write`` the rest."""
        with self._lock:
            screened = screen(batch, range(1, len(batch) + 1), self._source)
            if screened.conflicts:
                self.writer.write_quarantine(screened.conflicts)
            write(screened.fresh, screened.fresh_texts)  # spooled as screened, not encoded again
            self._guard.remember(screened.accepted)

    def flush(self) -> bool:
        return self.writer.flush()

    def close(self) -> None:
        self.writer.close()

    def stats(self) -> dict[str, int]:
        return self.writer.stats()

    @property
    def quarantined(self) -> int:
        """Records and events the store took into its quarantine instead of history."""
        return self.writer.stats()["quarantined"]

    @property
    def first_quarantined(self) -> str:
        return str(self.writer.first_quarantined)

    def stored_world(self, cluster: str, window: int = CLAIM_WINDOW) -> StoredWorld:
        """The cluster's world as the store's event log leaves it (after delivering what is
        spooled): from its newest checkpoint and the events after it (``read_stored``), read a page
        of events at a time, with the decisions stored about its pods."""
        self.writer.flush()
        return read_stored(cluster, _StoreLog(self.writer.query, cluster), window)


class _StoreLog:
    """The store's tables, read through a writer's connection, as a ``StoredLog``."""

    def __init__(self, query: Callable[[str, dict[str, Any]], list[tuple]], cluster: str) -> None:
        self._query = query
        self._cluster = cluster

    def checkpoint(self) -> str | None:
        from audit.store.queries import max_seq, nearest_checkpoint_text

        top = max_seq(self._query, self._cluster)
        found = nearest_checkpoint_text(self._query, self._cluster, top) if top is not None else None
        return str(found[1]) if found is not None else None

    def events(self, after_seq: int) -> Iterator[WorldEvent]:
        return self._events(after_seq, LAST_SEQ, None)

    def claim_events(self, keys: list[str], after_seq: int, upto_seq: int) -> Iterator[WorldEvent]:
        return self._events(after_seq, upto_seq, ("ResourceClaim", keys))

    def _events(self, after_seq: int, upto_seq: int, objects: tuple[str, list[str]] | None) -> Iterator[WorldEvent]:
        from audit.store.queries import event_pages

        return (WorldEvent.from_dict(loads_json(body.encode() if isinstance(body, str) else body))
                for _, body in event_pages(self._query, self._cluster, after_seq, upto_seq, objects=objects))

    def decisions(self, uids: list[str]) -> list[PodDecision]:
        from audit.store.queries import pod_decisions

        return pod_decisions(self._query, self._cluster, uids)


class _Rows:
    """A read's rows as the store's client answers them (``result_rows``)."""

    def __init__(self, rows: list[tuple]) -> None:
        self.result_rows = rows


class _Unanswered(Exception):
    """The server could not be asked, or did not answer as it should (already logged)."""


POD_UIDS_PER_REQUEST = 10_000  # within the API's limit of 20,000 per request


class HttpSink:
    """Spooled, retrying delivery of gzip JSONL batches to the audit API's ingest endpoints."""

    PATHS = {"records": "/v1/ingest/records", "events": "/v1/ingest/events"}

    def __init__(self, url: str, token: str | None = None, spool_dir: str | None = None, *, batch_size: int = 2000,
                 max_delay: float = 1.0, backoff_base: float = 0.2, backoff_cap: float = 10.0,
                 max_spool_bytes: int = 1 << 30, spool_block_seconds: float = 30.0, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.token = token if token is not None else os.environ.get("CLAIMTRAIL_TOKEN")
        if spool_dir is None:
            spool_dir = str(data_dir() / "spool" / ("http-" + hashlib.sha256(self.url.encode()).hexdigest()[:12]))
        self.spool = Spool(spool_dir, max_spool_bytes, spool_block_seconds, destination=self.url)
        self.batch_size = batch_size
        self.max_delay = max_delay
        self.backoff_base = backoff_base
        self.backoff_cap = backoff_cap
        self._client = httpx.Client(timeout=timeout)
        self._lock = threading.Lock()
        self._buffers: dict[str, list[str]] = {"records": [], "events": []}
        self._oldest = 0.0
        self._counts = {"received": 0, "events_received": 0, "sent": 0, "events_sent": 0, "quarantined": 0,
                        "delivery_errors": 0}
        self.last_error = ""
        self.spool_dir = spool_dir
        self.undelivered = 0  # batches left in the spool at close
        self.first_quarantined = ""  # the API's first error for a line it quarantined, as it said it
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._deliver_loop, name="claimtrail-http-sink", daemon=True)
        self._thread.start()

    def write_records(self, records: Iterable[DecisionRecord]) -> None:
        self._add("records", (record_line(r) for r in records))

    def write_events(self, events: Iterable[WorldEvent]) -> None:
        self._add("events", (event_line(e) for e in events))

    def _add(self, kind: str, lines: Iterable[str]) -> None:
        with self._lock:
            for line in lines:
                if not any(self._buffers.values()):
                    self._oldest = time.monotonic()
                buffer = self._buffers[kind]
                buffer.append(line)
                self._counts["received" if kind == "records" else "events_received"] += 1
                if len(buffer) >= self.batch_size:
                    self._cut(kind)

    def _cut(self, kind: str) -> None:
        buffer = self._buffers[kind]
        if buffer:
            self.spool.append(kind, gzip.compress(("\n".join(buffer) + "\n").encode(), compresslevel=5, mtime=0))
            self._buffers[kind] = []

    def flush(self, timeout: float = 60.0) -> bool:
        """Spool what is buffered (durable), then wait up to ``timeout`` s for the server to take it all."""
        with self._lock:
            self._cut("events")  # events first: decisions refer to the world they saw
            self._cut("records")
        return self.spool.wait_empty(timeout)

    def close(self) -> None:
        """Spool what is buffered, make a last attempt at delivering everything, and stop; what the
        server did not take stays in the spool for the next sink on it (``undelivered`` counts
        those batches, for a producer that must not end as if they had arrived)."""
        with self._lock:
            self._cut("events")
            self._cut("records")
        self._closed.set()
        self._thread.join()
        self.undelivered = self.spool.pending_frames()
        self.spool.close()
        self._client.close()

    @property
    def quarantined(self) -> int:
        """Lines the API took into its quarantine instead of history."""
        with self._lock:
            return self._counts["quarantined"]

    def stats(self) -> dict[str, int]:
        out = dict(self._counts)
        out["spool_bytes"] = self.spool.pending_bytes()
        out["spool_batches"] = self.spool.pending_frames()
        return out

    def stored_world(self, cluster: str, timeout: float = 15.0, page: int = 10_000,
                     window: int = CLAIM_WINDOW) -> StoredWorld | None:
        """The cluster's world as the server's event log leaves it (after delivering what the
        spool holds): from its newest checkpoint (``GET /v1/events/checkpoint``) and the events
        after it (``GET /v1/events``, a page of ``page`` events at a time), or every event when it
        keeps none (``read_stored``), with the decisions the server stores about its pods
        (``POST /v1/ingest/pod-decisions``). None when the server cannot be asked (the reason is
        logged): the caller then starts from an empty world."""
        what = "stored world"
        if not self._delivered(what, timeout):
            return None
        try:
            return read_stored(cluster, _HttpLog(self, cluster, page), window)
        except _Unanswered:
            return None
        except (KeyError, TypeError, ValueError) as exc:
            self._unknown(what, f"{self.url}: unexpected answer ({exc})")
            return None

    def _delivered(self, what: str, timeout: float) -> bool:
        """Whether the spool drained within ``timeout`` s: what an earlier run left is part of the
        answer a restarted producer asks for."""
        if self.flush(timeout):
            return True
        self._unknown(what, f"the spool did not drain: {self.last_error[:300]}")
        return False

    def _ask(self, what: str, method: str, path: str, **kwargs: Any) -> Any:
        """The JSON answer of the server to one request; ``_Unanswered`` (logged as ``what``
        unknown) when it cannot be asked or does not answer with JSON."""
        response = self._request(what, method, path, **kwargs)
        try:
            # orjson where it reads the same values: a page of events is megabytes of JSON
            return loads_json(response.content)
        except ValueError:
            self._unknown(what, f"{self.url}{path}: unexpected answer {response.text[:200]!r}")
            raise _Unanswered from None

    def _request(self, what: str, method: str, path: str, missing: bool = False, **kwargs: Any) -> httpx.Response:
        """The server's successful answer to one request (with ``missing``, a 404 too);
        ``_Unanswered`` (logged as ``what`` unknown) when it cannot be asked or answers otherwise."""
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            response = self._client.request(method, self.url + path, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            self._unknown(what, f"{self.url}: {type(exc).__name__}: {exc}")
            raise _Unanswered from None
        if not response.is_success and not (missing and response.status_code == 404):
            self._unknown(what, f"{self.url}{path}: HTTP {response.status_code}: {response.text[:300]}")
            raise _Unanswered
        return response

    @staticmethod
    def _unknown(what: str, error: str) -> None:
        log.warning("%s unknown", what, extra={"error": error[:500]})

    def _deliver_loop(self) -> None:
        failures = 0
        while not self._closed.is_set():
            with self._lock:
                if any(self._buffers.values()) and time.monotonic() - self._oldest >= self.max_delay:
                    self._cut("events")
                    self._cut("records")
            frame = self.spool.wait_for_frame(0.1)
            if frame is None:
                continue
            if self._post(frame):
                failures = 0
                continue
            failures += 1
            # exponential backoff, capped: a server that is down is not hammered, one that is back is found soon
            self._closed.wait(min(self.backoff_cap, self.backoff_base * 2 ** min(failures - 1, 16)))
        # a last attempt at close; whatever is left stays in the spool for the next run
        while (frame := self.spool.peek()) is not None and self._post(frame):
            pass

    def _post(self, frame: Frame) -> bool:
        """Deliver one spooled batch; False (the batch stays in the spool) when the server did not
        take all of it. A batch the server finds too large (413: its ``--max-body-mb`` is below
        what a batch of ``batch_size`` lines holds) is sent again in halves, down to single lines:
        re-sending it whole could never succeed, and every later batch waits behind it."""
        body = self.spool.read(frame)
        answers: list[Any] = []
        if not self._send(frame.kind, body, answers):
            return False
        quarantined = 0
        with self._lock:
            self._counts["sent" if frame.kind == "records" else "events_sent"] += gzip.decompress(body).count(b"\n")
            for answer in answers:
                count = int(answer.get("quarantined", 0)) if isinstance(answer, dict) else 0
                quarantined += count
                if count and not self.first_quarantined:
                    errors = answer.get("errors") or [{}]
                    first = errors[0] if isinstance(errors[0], dict) else {}
                    self.first_quarantined = (f"{self.PATHS[frame.kind]} line {first.get('line', '?')}: "
                                              f"{first.get('error', '')}")
            self._counts["quarantined"] += quarantined
        self.spool.ack(frame)
        return True

    def _send(self, kind: str, body: bytes, answers: list[Any]) -> bool:
        """POST the gzip JSON lines ``body`` as spooled, or its lines in halves while the server
        answers 413; each answer that came back is appended to ``answers``. An identical re-send is
        absorbed by the store, so halves delivered before a later one fails do no harm when the
        batch is retried."""
        headers = {"Content-Type": "application/x-ndjson", "Content-Encoding": "gzip"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            response = self._client.post(self.url + self.PATHS[kind], content=body, headers=headers)
        except httpx.HTTPError as exc:
            return self._failed(f"{self.url}: {type(exc).__name__}: {exc}")
        lines = gzip.decompress(body).splitlines(keepends=True) if response.status_code == 413 else []
        if len(lines) > 1:
            half = len(lines) // 2
            return all(self._send(kind, gzip.compress(b"".join(part), compresslevel=5, mtime=0), answers)
                       for part in (lines[:half], lines[half:]))
        if not response.is_success:
            too_long = (f" (one line of {len(lines[0]):,} bytes, larger than the server takes in a body: raise "
                        "its --max-body-mb)") if lines else ""
            return self._failed(f"{self.url}{self.PATHS[kind]}: HTTP {response.status_code}: "
                                f"{response.text[:300]}{too_long}")
        try:
            answers.append(response.json())
        except ValueError:
            answers.append({})
        return True

    def _failed(self, message: str) -> bool:
        self.last_error = message
        self._counts["delivery_errors"] += 1
        log.warning("ingest delivery failed; the batch stays in the spool", extra={"error": message[:300]})
        return False


class _HttpLog:
    """The audit API's event log and checkpoints of one cluster, as a ``StoredLog``."""

    WHAT = "stored world"
    CLAIMS_PER_REQUEST = 1_000  # the API's limit (``audit.api.routes_events.MAX_NAMES``)

    def __init__(self, sink: HttpSink, cluster: str, page: int) -> None:
        self._sink = sink
        self._cluster = cluster
        self._page = page

    def checkpoint(self) -> bytes | None:
        """The checkpoint's stored text; None when the server keeps none of the cluster's (404; a
        server of a release before the route says the same, and its whole log is read instead)."""
        response = self._sink._request(self.WHAT, "GET", "/v1/events/checkpoint", missing=True,
                                       params={"cluster": self._cluster})
        return None if response.status_code == 404 else response.content

    def events(self, after_seq: int) -> Iterator[WorldEvent]:
        after: int | None = after_seq
        while after is not None:
            answer = self._sink._ask(self.WHAT, "GET", "/v1/events",
                                     params={"cluster": self._cluster, "after_seq": after, "limit": self._page})
            yield from (WorldEvent.from_dict(item) for item in answer["items"])
            after = answer["next_after_seq"]

    def claim_events(self, keys: list[str], after_seq: int, upto_seq: int) -> Iterator[WorldEvent]:
        for start in range(0, len(keys), self.CLAIMS_PER_REQUEST):
            after: int | None = after_seq
            while after is not None:
                answer = self._sink._ask(self.WHAT, "POST", "/v1/events/objects", json={
                    "cluster": self._cluster, "kind": "ResourceClaim", "names": keys[start:start + self.CLAIMS_PER_REQUEST],
                    "after_seq": after, "upto_seq": upto_seq, "limit": self._page})
                yield from (WorldEvent.from_dict(item) for item in answer["items"])
                after = answer["next_after_seq"]

    def decisions(self, uids: list[str]) -> list[PodDecision]:
        return [PodDecision(**item) for start in range(0, len(uids), POD_UIDS_PER_REQUEST)
                for item in self._sink._ask(self.WHAT, "POST", "/v1/ingest/pod-decisions", json={
                    "cluster": self._cluster, "pod_uids": uids[start:start + POD_UIDS_PER_REQUEST]})["items"]]


def open_sink(target: str, *, events_path: str | None = None, token: str | None = None,
              spool_dir: str | None = None, **opts: Any) -> Any:
    """A sink for ``target`` (see the module docstring); bad targets raise ``SinkError``."""
    if target.startswith(("http://", "https://")):
        return HttpSink(target, token=token, spool_dir=spool_dir, **opts)
    if target.startswith(("chdb://", "clickhouse://", "clickhouses://")):
        return StoreSink(target, spool_dir=spool_dir, **opts)
    if target.endswith(".jsonl"):
        return FileSink(target, events_path)
    raise SinkError(f"target {target!r}: expected a .jsonl path, http(s)://host:port of the audit API, "
                    "or a chdb:// / clickhouse:// DSN")


__all__ = ["FileSink", "HttpSink", "Sink", "SinkError", "StoreSink", "StoredLog", "StoredWorld", "open_sink", "read_stored"]
