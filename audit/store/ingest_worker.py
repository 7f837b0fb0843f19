"""Parsing ingest bodies of decision records in a separate process, so reads do not queue behind it.

Parsing, validating and encoding a body of records is pure Python: over 0.1 ms of interpreter
time per record (JSON parse, strict validation, the unknown-field walk, the canonical text and its
identity digest; 0.4 ms when this was written). In the server's process, every request thread
waits for the interpreter lock while a body is parsed, so a producer posting bodies of 1,000
records made every concurrent read wait its turn behind a few hundred milliseconds of parsing.
Here that work runs in a child process (started with ``spawn``: the server's process holds the
store engine's threads, which a fork would copy half-way), and what comes back is what the server
still has to do with each record: its id, its canonical text (the spooled and inserted row), its
identity digest (what the append-only check compares) and its output digest (what a conflict's
message names it by), plus the body's quarantine rows and report, exactly as ``parse_jsonl``
makes them.

The child runs at a lower scheduling priority (``NICENESS``): a body's parse is bulk work that
no one waits on interactively, while a read is, so on a busy server the reads get the cores first
and ingest takes what they leave; on an idle one it changes nothing. With 16 readers and a producer
posting bodies as fast as they were accepted on two cores, the reads' p99 fell by 16-20 % (two
alternated pairs of ``benchmarks.bench_concurrency`` runs).

A child that dies (killed, out of memory) fails the request as the store being unavailable (the
sender retries) and is replaced for the next one.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context

from audit.records import record_text
from audit.store.connection import StoreError
from audit.store.history import record_identity
from audit.store.ingest import ParsedBody, parse_jsonl

NICENESS = 10  # added to the server's niceness (nice(2)); 19 is the lowest priority


@dataclass(frozen=True)
class EncodedRecord:
    """A valid record as the store needs it: its key, canonical text, identity digest and output
    digest (what a conflict's message names it by)."""

    decision_id: str
    text: str
    identity: bytes  # ``audit.store.history.record_identity`` of ``text``
    output_digest: str


def parse_records(body: bytes, source: str, compressed: bool | None = None) -> tuple[ParsedBody, list[EncodedRecord]]:
    """``parse_jsonl`` of a body of records, each valid record encoded; the returned ``ParsedBody``
    holds the quarantine rows, line numbers and report, and no record objects (the encoded ones
    stand for them, in the same order)."""
    parsed = parse_jsonl(body, "records", source, compressed)
    encoded = []
    for record in parsed.records:
        text = record_text(record)
        encoded.append(EncodedRecord(record.decision_id, text, record_identity(text), record.output_digest))
    parsed.records = []
    return parsed, encoded


def _ready() -> bool:
    return True


def follow_parent(parent: int) -> None:
    """Runs in a child of the server (this parser, the checkpoint keeper's folder): lower its
    priority (``NICENESS``), and end it when the server's process is gone. A server killed
    outright (SIGKILL, out of memory) never shuts its pool down, and a child left waiting for work
    would live on, holding the server's inherited output pipes and memory."""
    os.nice(NICENESS)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(0)

    threading.Thread(target=watch, name="claimtrail-parent-watch", daemon=True).start()


class ParserProcess:
    """One child process that parses record bodies, one body at a time, in arrival order."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pool: ProcessPoolExecutor | None = None

    def start(self) -> None:
        """Start the child and wait until it has imported the parser (about a second), so the
        first body does not pay for it."""
        self._executor().submit(_ready).result()

    def parse_records(self, body: bytes, source: str,
                      compressed: bool | None = None) -> tuple[ParsedBody, list[EncodedRecord]]:
        pool = self._executor()
        try:
            return pool.submit(parse_records, body, source, compressed).result()
        except BrokenProcessPool:
            with self._lock:
                if self._pool is pool:
                    self._pool = None  # the next body starts a new child
            raise StoreError("the ingest parser process stopped while parsing this body; send it again") from None

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)

    def pid(self) -> int | None:
        """The child's process id, once started (for tests and diagnostics)."""
        with self._lock:
            processes = list(getattr(self._pool, "_processes", {}) or {})
        return processes[0] if processes else None

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(max_workers=1, mp_context=get_context("spawn"),
                                                 initializer=follow_parent, initargs=(os.getpid(),))
            return self._pool
