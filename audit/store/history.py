"""Append-only history: what ingest may add to the store, given what the store already holds.

A decision id or an event's ``(cluster, seq)``, once stored, never changes. Before a batch is
written, each item is compared with what is stored under its key (and with what this process
accepted moments ago, which may still be on its way through the writer's spool): an identical
re-send is absorbed (counted, not written again), a different one is a conflict and goes to
quarantine with both digests, so the stored copy stays as it was. Two items with one key in the
same batch are compared the same way, the first one winning.

"Identical" means the same canonical JSON, except for a record's ``duration_us``: it is measured
from a clock, left out of the output digest for that reason, and a producer re-running the same
decision measures it again. The caller serializes ``screen`` and ``remember`` so that two
concurrent requests cannot both add the same new key, and calls ``remember`` only once the
fresh items are in the writer.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, Protocol, TypeVar

from audit.canonical import canonical_json
from audit.events import WorldEvent
from audit.records import DecisionRecord
from audit.store import quarantine as q
from audit.store.rows import event_json, record_json

T = TypeVar("T")


class Keyed(Protocol):
    @property
    def decision_id(self) -> str: ...


class Encoded(Keyed, Protocol):
    """A record already encoded: its id, canonical text and identity digest."""

    @property
    def text(self) -> str: ...
    @property
    def identity(self) -> bytes: ...


R = TypeVar("R", bound=Keyed)
E = TypeVar("E", bound=Encoded)
Query = Callable[..., Any]
# an identity digest, or how to compute it when it is needed (only when two texts differ)
Identity = bytes | Callable[[], bytes]

# keys accepted lately, with their digests (about 200 bytes each): enough to cover the largest
# body (audit.store.ingest.MAX_LINES) and what is still on its way through the writer
REMEMBERED = 150_000
LOOKUP_CHUNK = 10_000  # keys per lookup query
CLOCK_FIELDS = ("duration_us",)


@dataclass
class Screened(Generic[T]):
    """A batch split by what the store holds: ``fresh`` to write, ``absorbed`` re-sends, ``conflicts``."""

    fresh: list[T] = field(default_factory=list)
    fresh_lines: list[int] = field(default_factory=list)
    absorbed: int = 0
    conflicts: list[q.QuarantineRow] = field(default_factory=list)
    conflict_errors: list[dict[str, Any]] = field(default_factory=list)  # line, path, error
    accepted: list[tuple[Hashable, bytes, str]] = field(default_factory=list)  # for ``remember`` once written


def record_identity(text: str | bytes) -> bytes:
    """What two copies of a record must share to be the same decision (its canonical JSON text
    without the clock-measured fields)."""
    data = json.loads(text)
    for name in CLOCK_FIELDS:
        data.pop(name, None)
    return hashlib.sha256(canonical_json(data)).digest()


def _identity(value: Identity) -> bytes:
    return value if isinstance(value, bytes) else value()


def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


class HistoryGuard:
    """Screens records and events against the store before they are written."""

    def __init__(self, query: Query, remembered: int = REMEMBERED) -> None:
        self._query = query
        self._limit = remembered
        # key -> (identity digest, sha256 of the accepted text), most recent last; digests are kept
        # as bytes, the hex only made for a conflict's message
        self._recent: OrderedDict[Hashable, tuple[bytes, bytes]] = OrderedDict()

    def screen_records(self, records: Sequence[DecisionRecord], lines: Sequence[int],
                       source: str) -> Screened[DecisionRecord]:
        return self._screen_records(records, [r.decision_id for r in records], [record_json(r) for r in records],
                                    lines, source, record_identity)

    def screen_encoded(self, records: Sequence[E], lines: Sequence[int], source: str) -> Screened[E]:
        """As ``screen_records``, for records whose canonical text and identity are already made
        (``audit.store.ingest_worker``)."""
        identities = {r.text: r.identity for r in records}
        return self._screen_records(records, [r.decision_id for r in records], [r.text for r in records],
                                    lines, source, identities.__getitem__)

    def _screen_records(self, records: Sequence[R], ids: list[str], texts: list[str], lines: Sequence[int],
                        source: str, identity: Callable[[str], bytes]) -> Screened[R]:
        keys: list[Hashable] = list(ids)
        wanted = sorted({i for i in ids if i not in self._recent})
        digests = dict(self._stored_record_digests(wanted))
        # A re-send with the stored text's digest is that text, so its identity is the sent one's.
        # Only a key whose every copy here differs from the stored text needs that text read back:
        # its identity (without the clock fields) tells a re-run from a conflict.
        stored: dict[Hashable, tuple[Identity, str]] = {}
        for key, text in zip(keys, texts, strict=True):
            if key in digests and key not in stored and _sha(text) == digests[key]:
                stored[key] = (partial(record_identity, text), digests[key])
        differing = sorted(str(k) for k in digests if k not in stored)
        stored.update({k: (record_identity(t), _sha(t)) for k, t in self._stored_records(differing)})
        return self._split(records, lines, texts, keys, stored, source, "record",
                           identity, lambda r: f"decision {r.decision_id}", "decision_id")

    def screen_events(self, events: Sequence[WorldEvent], lines: Sequence[int], source: str) -> Screened[WorldEvent]:
        texts = [event_json(e) for e in events]
        keys: list[Hashable] = [(e.cluster, e.seq) for e in events]
        stored: dict[Hashable, tuple[Identity, str]] = {}
        by_cluster: dict[str, set[int]] = {}
        for e in events:
            if (e.cluster, e.seq) not in self._recent:
                by_cluster.setdefault(e.cluster, set()).add(e.seq)
        for cluster, seqs in by_cluster.items():
            # an event's identity is the sha256 of its text, so the stored digest is all it takes
            for seq, sha in self._stored_event_digests(cluster, sorted(seqs)):
                stored[(cluster, seq)] = (bytes.fromhex(sha), sha)
        return self._split(events, lines, texts, keys, stored, source, "event",
                           lambda t: hashlib.sha256(t.encode()).digest(),
                           lambda e: f"event {e.cluster}/{e.seq}", "seq")

    def remember(self, screened: Iterable[tuple[Hashable, bytes, str]]) -> None:
        for key, identity, sha in screened:
            self._recent[key] = (identity, bytes.fromhex(sha))
            self._recent.move_to_end(key)
        while len(self._recent) > self._limit:
            self._recent.popitem(last=False)

    def _split(self, items: Sequence[T], lines: Sequence[int], texts: list[str], keys: list[Hashable],
               stored: dict[Hashable, tuple[Identity, str]], source: str, kind: str,
               identity: Callable[[str], bytes], name: Callable[[T], str], path: str) -> Screened[T]:
        out: Screened[T] = Screened()
        batch: dict[Hashable, tuple[Identity, str]] = {}
        for item, line, text, key in zip(items, lines, texts, keys, strict=True):
            sha = _sha(text)
            recent = self._recent.get(key)
            before = batch.get(key) or (recent and (recent[0], recent[1].hex())) or stored.get(key)
            if before is None:
                mine = (identity(text), sha)
                batch[key] = mine
                out.accepted.append((key, *mine))
                out.fresh.append(item)
                out.fresh_lines.append(line)
            elif before[1] == sha or _identity(before[0]) == identity(text):
                out.absorbed += 1  # the same text, or the same decision measured again
            else:
                error = (f"{name(item)}: conflicts with the stored one (stored sha256 {before[1]}, sent sha256 "
                         f"{sha}); history is append-only, the stored one is kept")
                out.conflicts.append(q.quarantine_row(source, kind, error, path, text))
                out.conflict_errors.append({"line": line, "path": path, "error": error})
        return out

    def _stored_record_digests(self, ids: list[str]) -> Iterable[tuple[str, str]]:
        """(decision id, sha256 hex of its stored text) for the ids the store holds, by primary key."""
        for start in range(0, len(ids), LOOKUP_CHUNK):
            chunk = ids[start:start + LOOKUP_CHUNK]
            # the first copy stored is the one every read returns (ReplacingMergeTree keeps one
            # per key, and the guard never lets a different one in)
            yield from self._query("SELECT decision_id, lower(hex(any(sha256))) FROM decision_keys WHERE decision_id IN "
                                   "{ids:Array(String)} GROUP BY decision_id", {"ids": chunk}).result_rows

    def _stored_records(self, ids: list[str]) -> Iterable[tuple[str, str]]:
        for start in range(0, len(ids), LOOKUP_CHUNK):
            chunk = ids[start:start + LOOKUP_CHUNK]
            yield from self._query("SELECT decision_id, any(record) FROM decisions WHERE decision_id IN "
                                   "{ids:Array(String)} GROUP BY decision_id", {"ids": chunk}).result_rows

    def _stored_event_digests(self, cluster: str, seqs: list[int]) -> Iterable[tuple[int, str]]:
        for start in range(0, len(seqs), LOOKUP_CHUNK):
            chunk = seqs[start:start + LOOKUP_CHUNK]
            rows = self._query("SELECT seq, lower(hex(any(sha256))) FROM event_keys WHERE cluster = {c:String} AND seq IN "
                               "{s:Array(UInt64)} GROUP BY seq", {"c": cluster, "s": chunk}).result_rows
            for seq, sha in rows:
                yield int(seq), str(sha)
