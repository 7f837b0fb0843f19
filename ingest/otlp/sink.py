"""Where received decisions go: the small protocol the receiver writes to, and an in-memory sink.

The API server passes a sink over its AuditStore, which keeps history append-only: a record whose
decision id is stored with other content is refused (and quarantined by the sink), and the
receiver reports it to the sender as a rejected item. ``MemorySink`` is the same contract kept in
lists, refusing nothing (for tests, benchmarks and a receiver run without a store).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol

from audit.records import DecisionRecord


class RecordSink(Protocol):
    def write_records(self, records: list[DecisionRecord]) -> list[str]:
        """Keep ``records``; return one message per record refused (and quarantined by the sink),
        naming its decision id. An identical re-send of a kept record is not a refusal."""
        ...

    def quarantine(self, source: str, kind: str, error: str, raw: bytes) -> None: ...


@dataclass(frozen=True)
class Quarantined:
    source: str
    kind: str
    error: str
    raw: bytes


class MemorySink:
    """Thread-safe lists of what was written and quarantined."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.records: list[DecisionRecord] = []
        self.quarantined: list[Quarantined] = []

    def write_records(self, records: list[DecisionRecord]) -> list[str]:
        with self._lock:
            self.records.extend(records)
        return []

    def quarantine(self, source: str, kind: str, error: str, raw: bytes) -> None:
        with self._lock:
            self.quarantined.append(Quarantined(source, kind, error, raw))
