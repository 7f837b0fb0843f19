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
Kubernetes watcher goes on from that world instead of an empty one.
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
from audit.events import EventError, WorldEvent, event_problem, loads_json
from audit.records import DecisionRecord, RecordError, escaped_record_text, record_problem, record_text
from audit.store.connection import data_dir
from audit.store.ports import PodDecision
from audit.store.rows import escaped_event_text, event_json
from audit.store.spool import Frame, Spool
from audit.world import Objects, fold_object, obj_key, policy_in_force
from ingest.claims import follow_reservations
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
        log.warning("%s; sent with the text escaped, for the receiving end to quarantine", problem(item, exc))
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
    ``audit.world.obj_key`` -> payload), the log's last seq (None: no events), how many events
    were folded, for each claim allocated at the end the pods its allocation has been reserved for
    (``ingest.claims.follow_reservations``: claim uid -> pod uids, gone pods included), and the
    decisions stored about the pods among those objects and those reserved pods, and the Policy
    object in force."""

    last_seq: int | None = None
    objects: Objects = field(default_factory=dict)
    events: int = 0
    reservations: dict[str, list[str]] = field(default_factory=dict)
    decisions: list[PodDecision] = field(default_factory=list)
    # the ``obj_key`` of the Policy object in force at the end of the log ("": the default policy),
    # as ``audit.world.World`` reads the log: the policy that names the models of what it implies
    policy: str = ""


def fold_stored(events: Iterable[WorldEvent],
                decisions_of: Callable[[list[str]], list[PodDecision]]) -> StoredWorld:
    """Fold one cluster's ``events`` (in seq order) into its world, then ask ``decisions_of`` for
    the decisions stored about the pods alive at its end and the pods its claims' allocations
    served (by uid): a standalone claim's allocation may be recorded for a pod deleted since."""
    world = StoredWorld()
    for event in events:
        old, new = fold_object(world.objects, event)
        if event.object_kind == "ResourceClaim":
            follow_reservations(world.reservations, old, new)
        elif event.object_kind == "Policy":
            world.policy = policy_in_force(world.policy, obj_key(event.namespace, event.name),
                                           deleted=new is None)
        world.last_seq = event.seq
        world.events += 1
    uids = sorted(({str((pod.get("metadata") or {}).get("uid") or "") for pod in world.objects.get("Pod", {}).values()}
                   | {pod for pods in world.reservations.values() for pod in pods}) - {""})
    world.decisions = decisions_of(uids) if uids else []
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
        about its pods. A line these files hold that ingest would refuse is a ``SinkError``."""
        events = sorted((e for e in self._read("events").events if e.cluster == cluster), key=lambda e: e.seq)

        def decisions_of(uids: list[str]) -> list[PodDecision]:
            wanted = set(uids)
            found = {r.decision_id: PodDecision(r.decision_id, r.namespace, r.pod_uid, r.attempt, r.outcome)
                     for r in self._read("records").records if r.cluster == cluster and r.pod_uid in wanted}
            return [found[d] for d in sorted(found)]

        return fold_stored(events, decisions_of)

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

    def stored_world(self, cluster: str) -> StoredWorld:
        """The cluster's world as the store's event log leaves it (after delivering what is
        spooled), read a page of events at a time, with the decisions stored about its pods."""
        from audit.store.queries import event_pages, pod_decisions

        self.writer.flush()
        events = (WorldEvent.from_dict(loads_json(body.encode() if isinstance(body, str) else body))
                  for _, body in event_pages(self.writer.query, cluster, -1, LAST_SEQ))
        return fold_stored(events, lambda uids: pod_decisions(self.writer.query, cluster, uids))


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

    def stored_world(self, cluster: str, timeout: float = 15.0, page: int = 10_000) -> StoredWorld | None:
        """The cluster's world as the server's event log leaves it (``GET /v1/events``, a page of
        ``page`` events at a time, after delivering what the spool holds), with the decisions the
        server stores about its pods (``POST /v1/ingest/pod-decisions``). None when the server
        cannot be asked (the reason is logged): the caller then starts from an empty world."""
        what = "stored world"
        if not self._delivered(what, timeout):
            return None
        try:
            return fold_stored(self._stored_events(cluster, page), lambda uids: [
                PodDecision(**item) for start in range(0, len(uids), POD_UIDS_PER_REQUEST)
                for item in self._ask(what, "POST", "/v1/ingest/pod-decisions", json={
                    "cluster": cluster, "pod_uids": uids[start:start + POD_UIDS_PER_REQUEST]})["items"]])
        except _Unanswered:
            return None
        except (KeyError, TypeError, ValueError) as exc:
            self._unknown(what, f"{self.url}: unexpected answer ({exc})")
            return None

    def _stored_events(self, cluster: str, page: int) -> Iterator[WorldEvent]:
        after: int | None = -1
        while after is not None:
            answer = self._ask("stored world", "GET", "/v1/events",
                               params={"cluster": cluster, "after_seq": after, "limit": page})
            yield from (WorldEvent.from_dict(item) for item in answer["items"])
            after = answer["next_after_seq"]

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
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        try:
            response = self._client.request(method, self.url + path, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            self._unknown(what, f"{self.url}: {type(exc).__name__}: {exc}")
            raise _Unanswered from None
        if not response.is_success:
            self._unknown(what, f"{self.url}{path}: HTTP {response.status_code}: {response.text[:300]}")
            raise _Unanswered
        try:
            # orjson where it reads the same values: a page of events is megabytes of JSON
            return loads_json(response.content)
        except ValueError:
            self._unknown(what, f"{self.url}{path}: unexpected answer {response.text[:200]!r}")
            raise _Unanswered from None

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


__all__ = ["FileSink", "HttpSink", "Sink", "SinkError", "StoreSink", "open_sink"]
