"""The record writer: batch, spool durably, insert idempotently, count everything.

A batch is cut when ``batch_size`` records are buffered, when the oldest buffered item is
``max_delay`` seconds old, or on ``flush()``. Cutting a batch checks every record against the
columns it goes into (failures are quarantined with the field path), encodes the records'
canonical JSON, and appends it to the spool: from then on a crash of the process loses nothing.
It is fsync'ed by ``flush()`` and ``close()``, by the delivery thread when an insert fails (the
batch then waits for the store) and whenever it is idle, so a power cut loses nothing once a
flush has returned or a batch has had to wait; neither the producer nor the next insert waits for
the disk in between.

A delivery thread takes spooled batches strictly in order and inserts them column-wise with an
``insert_deduplication_token`` derived from the batch bytes, then acknowledges them in the spool.
A crash between insert and acknowledgement re-sends the same bytes with the same token, which
ClickHouse skips; a rebuilt batch holding records already stored is collapsed by
ReplacingMergeTree and read with ``FINAL``/``LIMIT 1 BY``. While the store is unreachable,
batches wait in the spool and the thread retries every ``retry_interval`` seconds; producers
block (then get ``SpoolFullError``) when the spool is full. Encoding in the producer and
inserting in the delivery thread overlap (the embedded engine releases the interpreter lock while
it inserts), so the engine parses and compresses one batch while Python encodes the next; the
producer's lock is only held to move records between lists, never while encoding.

Record batches are inserted as the spooled JSON lines themselves (``LineAsString`` into the
Null-engine ``decisions_in``), and the engine extracts the decision columns and tier rows in its
views. Measured alternatives per decision: building Python column lists for a native insert
cost more in Python than the insert itself, and an Arrow table plus ``insert_arrow`` was slower
still (about 21 µs against 8 µs for the native insert); the JSON path leaves Python one job,
encoding the canonical JSON, which the spool needs anyway.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import islice
from typing import Any

from audit.events import EventError, WorldEvent
from audit.records import DecisionRecord, RecordError, escaped_record_text, record_bytes
from audit.store import quarantine as q
from audit.store import rows
from audit.store.generation import GENERATIONS
from audit.store.spool import Frame, Spool

log = logging.getLogger(__name__)

MAX_READY_BATCHES = 4  # spooled payloads kept in memory for delivery; older ones are re-read from the spool
RECENT_IDS = 1_000_000  # decision ids remembered to count re-sent records


class RecordWriter:
    """Buffered, spooled, idempotent writer of decisions, tier evidence, events and quarantine rows.

    ``background=False`` delivers synchronously inside ``flush()`` (no thread; useful for tools
    that write once and exit)."""

    def __init__(self, connector: Callable[[], Any], spool_dir: str, *, source: str = "writer",
                 batch_size: int = 10_000, max_delay: float = 1.0, max_spool_bytes: int = 1 << 30,
                 spool_block_seconds: float = 30.0, retry_interval: float = 1.0, background: bool = True,
                 on_events: Callable[[list[str], list[str]], None] | None = None,
                 on_records: Callable[[bytes], None] | None = None,
                 embedded_path: str | None = None, destination: str | None = None) -> None:
        self._connector = connector
        # the embedded store's directory, whose inserts of decisions this process counts (generation.py)
        self._embedded_path = embedded_path
        # handed each events batch once it is stored: each event's cluster, and its JSON line
        self._on_events = on_events
        # handed each batch of records once it is stored: their JSON lines, joined by newlines
        self._on_records = on_records
        self._client: Any = None
        self.source = source
        self.batch_size = batch_size
        self.max_delay = max_delay
        self.retry_interval = retry_interval
        # the store's DSN (no password): the spool refuses to hand another store's batches to this one
        self.spool = Spool(spool_dir, max_spool_bytes, spool_block_seconds, destination=destination)
        self._lock = threading.RLock()  # buffers and counters; held only for moments
        # one batch is encoded and spooled at a time, in the order batches were cut; producers and
        # the delivery thread never wait on it for counters, so inserting overlaps encoding
        self._cut_lock = threading.Lock()
        self._deliver_lock = threading.Lock()  # one delivery at a time, in spool order
        # buffered items, each with its canonical text when the caller already made it
        self._records: list[tuple[DecisionRecord, str | None]] = []
        self._events: list[tuple[WorldEvent, str | None]] = []
        self._oldest = 0.0
        # payloads of recently spooled batches, so delivery need not read them back from disk
        self._ready: dict[tuple[int, int], Prepared] = {}
        self._recent: set[str] = set()  # ids taken lately, and the order they came in
        self._recent_order: deque[str] = deque()
        self._counters = {"received": 0, "written": 0, "quarantined": 0, "spooled": 0, "duplicates": 0,
                          "events_received": 0, "events_written": 0, "delivery_errors": 0}
        self.last_error = ""
        self.first_quarantined = ""  # why the first row this writer quarantined was refused
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        if background:
            for target, name in ((self._deliver_loop, "claimtrail-deliver"), (self._timer_loop, "claimtrail-batch")):
                thread = threading.Thread(target=target, name=name, daemon=True)
                thread.start()
                self._threads.append(thread)
        self._background = background

    # producers ---------------------------------------------------------------------------
    def write_records(self, records: Iterable[DecisionRecord], texts: Iterable[str] | None = None) -> None:
        """Buffer ``records``. ``texts``: their canonical texts (``audit.records.record_text``),
        when the caller made them already (to screen them against history), spooled as they are
        instead of being encoded again."""
        self._take(_paired(records, texts), "_records", "received")

    def write_record_texts(self, ids: list[str], texts: list[str]) -> None:
        """Spool records given as their canonical JSON texts (``audit.records.record_text``), already checked
        against their columns (``rows.check_record``), in batches of their own of at most
        ``batch_size``: the caller made the texts elsewhere (``audit.store.ingest_worker``) and
        flushes soon after."""
        if len(ids) != len(texts):
            raise ValueError(f"{len(ids)} decision ids for {len(texts)} record texts")
        with self._lock:
            self._counters["received"] += len(texts)
        for start in range(0, len(texts), self.batch_size):
            with self._cut_lock:
                batch = texts[start:start + self.batch_size]
                self._spool_lines(ids[start:start + self.batch_size], "\n".join(batch).encode(), len(batch))

    def write_events(self, events: Iterable[WorldEvent], texts: Iterable[str] | None = None) -> None:
        """Buffer ``events``; ``texts`` as for ``write_records`` (``rows.event_json``)."""
        self._take(_paired(events, texts), "_events", "events_received")

    def _take(self, items: Iterable[Any], buffer_name: str, counter: str) -> None:
        """Buffer ``items`` in slices that fill the current batch, cutting each full batch. The
        slices are drawn outside the lock: a slow producer never holds up the timer or delivery."""
        source = iter(items)
        while True:
            with self._lock:
                room = max(1, self.batch_size - len(getattr(self, buffer_name)))
            chunk = list(islice(source, room))
            if not chunk:
                return
            with self._lock:
                if not self._records and not self._events:
                    self._oldest = time.monotonic()
                buffer: list[Any] = getattr(self, buffer_name)  # _cut swaps in a new list
                buffer.extend(chunk)
                self._counters[counter] += len(chunk)
                full = len(buffer) >= self.batch_size
            if full:
                self._cut()

    def write_quarantine(self, rows_: list[q.QuarantineRow]) -> None:
        if not rows_:
            return
        payload = "\n".join(json.dumps(r.to_dict(), ensure_ascii=False) for r in rows_).encode()
        self.spool.append("quarantine", payload)
        with self._lock:
            self._counters["quarantined"] += len(rows_)
            if not self.first_quarantined:
                self.first_quarantined = f"{rows_[0].kind}: {rows_[0].error}"

    def flush(self, timeout: float = 60.0) -> bool:
        """Spool everything buffered (durable from here on), then wait up to ``timeout`` seconds for
        delivery. Returns True when the store has it all, False when it is still in the spool."""
        self._cut()
        self.spool.sync()
        if not self._background:
            return self._deliver_all()
        errors = self._counters["delivery_errors"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.spool.wait_empty(min(0.2, max(0.0, deadline - time.monotonic()))):
                return True
            if self._counters["delivery_errors"] != errors:
                return False  # the store is down: the data is safe in the spool, retries continue
        return self.spool.pending_frames() == 0

    def drain(self) -> bool:
        """Deliver every spooled batch now; True when the spool is empty."""
        return self._deliver_all()

    def close(self) -> None:
        """Flush, stop the threads, make a last delivery attempt; what is left stays spooled."""
        if self._closed.is_set() and self.spool.closed:
            return
        self._cut()
        self._closed.set()
        for thread in self._threads:
            thread.join()
        self._deliver_all()
        self.spool.close()
        if self._client is not None:
            self._client.close()
            self._client = None

    def query(self, sql: str, parameters: dict[str, Any]) -> list[tuple]:
        """Run a read on the writer's own connection (for callers that hold no store)."""
        with self._deliver_lock:
            if self._client is None:
                self._client = self._connector()
            return list(self._client.query(sql, parameters=parameters).result_rows)

    def idle(self) -> bool:
        """Nothing buffered, being encoded or waiting in the spool."""
        with self._lock:
            if self._records or self._events:
                return False
        return not self._cut_lock.locked() and self.spool.pending_frames() == 0

    def stats(self) -> dict[str, int]:
        with self._lock:
            out = dict(self._counters)
            out["buffered"] = len(self._records) + len(self._events)
        out["spool_bytes"] = self.spool.pending_bytes()
        out["spool_batches"] = self.spool.pending_frames()
        return out

    # batching ----------------------------------------------------------------------------
    def _timer_loop(self) -> None:
        while not self._closed.wait(self.max_delay / 4):
            with self._lock:
                due = bool(self._records or self._events) and time.monotonic() - self._oldest >= self.max_delay
            if due:
                self._cut()

    def _cut(self) -> None:
        """Append buffered records and events to the spool as one batch each."""
        with self._cut_lock:
            with self._lock:
                batch, self._records = self._records, []
                batch_e, self._events = self._events, []
            self._spool_records(batch)
            self._spool_events(batch_e)

    def _spool_records(self, batch: list[tuple[DecisionRecord, str | None]]) -> None:
        if batch:
            lines: list[bytes] = []
            ids: list[str] = []
            bad: list[q.QuarantineRow] = []
            # one pass: each record is checked and encoded while its objects are in the CPU's cache;
            # one the store cannot hold is quarantined, and the rest of the batch is written
            for record, text in batch:
                try:
                    rows.check_record(record)
                    line = record_bytes(record) if text is None else text.encode()
                except rows.RowError as exc:
                    bad.append(q.quarantine_row(self.source, "record", str(exc), exc.path, escaped_record_text(record)))
                    continue
                except RecordError as exc:
                    bad.append(q.unwritable_record(self.source, record, exc))
                    continue
                lines.append(line)
                ids.append(record.decision_id)
            self.write_quarantine(bad)
            self._spool_lines(ids, b"\n".join(lines), len(lines))

    def _spool_lines(self, ids: list[str], payload: bytes, n: int) -> None:
        """Spool ``n`` records' JSON lines, joined by newlines into ``payload``."""
        if n:
            self._count_duplicates(ids)
            # kept in memory with its row count, so delivery need not read it back from disk
            prepared = Prepared(payload, n)

            def keep(frame: Frame) -> None:  # before delivery can see the frame
                if len(self._ready) < MAX_READY_BATCHES:
                    self._ready[frame.position] = prepared

            self.spool.append("records", payload, keep, sync=False)  # delivery or flush() syncs it
            with self._lock:
                self._counters["spooled"] += n

    def _spool_events(self, batch_e: list[tuple[WorldEvent, str | None]]) -> None:
        if batch_e:
            lines: list[str] = []
            bad = []
            # as for records: an event the store cannot hold is quarantined, the rest of the batch written
            for event, text in batch_e:
                try:
                    line = rows.event_json(event) if text is None else text
                    rows.check_event(event)
                except EventError as exc:
                    bad.append(q.unwritable_event(self.source, event, exc))
                    continue
                except rows.RowError as exc:
                    bad.append(q.quarantine_row(self.source, "event", str(exc), exc.path, line))
                    continue
                lines.append(line)
            self.write_quarantine(bad)
            if lines:
                self.spool.append("events", "\n".join(lines).encode(), sync=False)

    def _count_duplicates(self, decision_ids: list[str]) -> None:
        """Count records whose decision_id is among the last ``RECENT_IDS`` this writer took (the
        store keeps one copy of each)."""
        recent, order = self._recent, self._recent_order
        seen = 0
        for decision_id in decision_ids:
            if decision_id in recent:
                seen += 1
            else:
                recent.add(decision_id)
                order.append(decision_id)
        while len(order) > RECENT_IDS:
            recent.discard(order.popleft())
        with self._lock:
            self._counters["duplicates"] += seen

    # delivery ----------------------------------------------------------------------------
    def _deliver_loop(self) -> None:
        with self._deliver_lock:  # connect before the first batch is due, not when it is waiting
            try:
                self._client = self._client or self._connector()
            except Exception:  # the store is down at start: the first delivery retries and reports it
                log.debug("store not reachable at writer start", exc_info=True)
        while not self._closed.is_set():
            frame = self.spool.wait_for_frame(0.2)
            if frame is None:
                self.spool.sync()  # idle: what producers appended meanwhile goes to disk
                continue
            if not self._deliver_one(frame):
                self._closed.wait(self.retry_interval)

    def _deliver_all(self) -> bool:
        while (frame := self.spool.peek()) is not None:
            if not self._deliver_one(frame):
                return False
        return True

    def _deliver_one(self, frame: Frame) -> bool:
        with self._deliver_lock:
            if self.spool.peek() != frame:  # delivered meanwhile by the other path
                return True
            try:
                if self._client is None:
                    self._client = self._connector()
                self._insert(self._client, frame)
            except Exception as exc:  # the store is down or refused: keep the frame, retry later
                text = str(exc).strip()
                self.last_error = text.splitlines()[0][:300] if text else type(exc).__name__
                log.warning("store delivery failed; the batch stays in the spool", extra={"error": self.last_error})
                self._counters["delivery_errors"] += 1
                self._drop_client()
                self.spool.sync()  # the batch waits in the spool for the store: on disk from here
                return False
            self.spool.ack(frame)
            # a payload kept after its frame was already read back from disk would never be used
            for position in [p for p in self._ready if p <= frame.position]:
                self._ready.pop(position, None)
            return True

    def _drop_client(self) -> None:
        if self._client is not None:
            try:
                self._client.close()
            except Exception:  # closing a broken connection may fail too; it is discarded either way
                log.debug("closing a failed store client raised", exc_info=True)
        self._client = None

    def _insert(self, client: Any, frame: Frame) -> None:
        prepared = self._ready.get(frame.position) or Prepared.of(self.spool.read(frame))
        # hashed here rather than by the producer: delivery waits for the producer, not the reverse
        payload, token = prepared.payload, batch_token(prepared.payload)
        if frame.kind == "records":
            # the spooled lines are the rows: the engine extracts columns and tier rows (schema.DECISIONS_IN_MV)
            with GENERATIONS.writing(self._embedded_path):
                client.raw_insert("decisions_in", ["record"], insert_block=payload, fmt="LineAsString",
                                  settings=_dedup_settings(token, "decisions"))
            n = prepared.rows
            with self._lock:
                self._counters["written"] += n
                self._counters["spooled"] = max(0, self._counters["spooled"] - n)
            if self._on_records is not None:
                self._on_records(payload)
            return
        lines = payload.decode().split("\n")
        if frame.kind == "events":
            columns = rows.event_line_columns(lines)
            _insert_columns(client, "events", columns, token)
            with self._lock:
                self._counters["events_written"] += len(lines)
            if self._on_events is not None:
                self._on_events(columns["cluster"], lines)
        else:
            qrows = [q.QuarantineRow(**json.loads(line)) for line in lines]
            _insert_columns(client, "quarantine", dict(zip(q.COLUMNS, q.columns(qrows), strict=True)), token)


def _paired(items: Iterable[Any], texts: Iterable[str] | None) -> Iterable[tuple[Any, str | None]]:
    return ((item, None) for item in items) if texts is None else zip(items, texts, strict=True)


@dataclass(frozen=True)
class Prepared:
    """A spooled batch ready to insert: its bytes and number of lines."""

    payload: bytes
    rows: int

    @classmethod
    def of(cls, payload: bytes) -> Prepared:
        return cls(payload, payload.count(b"\n") + 1)


def batch_token(payload: bytes) -> str:
    """The insert deduplication token of a batch: the same bytes always get the same token."""
    return hashlib.sha256(payload).hexdigest()[:32]


def _dedup_settings(token: str, table: str) -> dict[str, Any]:
    return {"insert_deduplication_token": f"{token}:{table}",
            # a retried block must be skipped by every view's target table too (tiers, rollups)
            "deduplicate_blocks_in_dependent_materialized_views": 1,
            # the decision and tier views of one block run side by side (about a third less wall time)
            "parallel_view_processing": 1}


def _insert_columns(client: Any, table: str, columns: dict[str, list[Any]], token: str) -> Any:
    return client.insert(table, list(columns.values()), column_names=list(columns), column_oriented=True,
                         settings=_dedup_settings(token, table))
