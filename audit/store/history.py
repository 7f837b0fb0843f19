"""Append-only history: what ingest may add to the store, given what the store already holds.

A decision id or an event's ``(cluster, seq)``, once stored, never changes. Before a batch is
written, each item is compared with what is stored under its key (and with what this process
accepted moments ago, which may still be on its way through the writer's spool): an identical
re-send is absorbed (counted, not written again), a different one is a conflict and goes to
quarantine, so the stored copy stays as it was. Two items with one key in the same batch are
compared the same way, the first one winning. A conflict's message says which copy was kept (the
stored one, or an earlier one in the same batch) and names both by the digest a sender knows
them by: a record's ``output_digest``, an event's sha256 (its event digest).

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
from audit.events import EventError, WorldEvent
from audit.records import DecisionRecord, RecordError, record_text
from audit.store import quarantine as q
from audit.store.rows import event_json

T = TypeVar("T")


class Keyed(Protocol):
    @property
    def decision_id(self) -> str: ...


class Encoded(Keyed, Protocol):
    """A record already encoded: its id, canonical text, identity digest and output digest."""

    @property
    def text(self) -> str: ...
    @property
    def identity(self) -> bytes: ...
    @property
    def output_digest(self) -> str: ...


R = TypeVar("R", bound=Keyed)
E = TypeVar("E", bound=Encoded)
Query = Callable[..., Any]
# an identity digest, or how to compute it when it is needed (only when two texts differ)
Identity = bytes | Callable[[], bytes]
# the digest a conflict's message names an item by, or how to read it from the item's text
Named = str | Callable[[], str]

# keys accepted lately, with their digests (about 260 bytes each): enough to cover the largest
# body (audit.store.ingest.MAX_LINES) and what is still on its way through the writer
REMEMBERED = 150_000
LOOKUP_CHUNK = 10_000  # keys per lookup query
CLOCK_FIELDS = ("duration_us",)


@dataclass
class Screened(Generic[T]):
    """A batch split by what the store holds: ``fresh`` to write, ``absorbed`` re-sends, and
    ``conflicts``, the quarantine rows of items that differ from history (or, for records, have no
    text the store can hold)."""

    fresh: list[T] = field(default_factory=list)
    fresh_lines: list[int] = field(default_factory=list)
    # the canonical text of each fresh item, made to screen it: the writer spools it as it is
    fresh_texts: list[str] = field(default_factory=list)
    absorbed: int = 0
    conflicts: list[q.QuarantineRow] = field(default_factory=list)
    conflict_errors: list[dict[str, Any]] = field(default_factory=list)  # line, path, error
    # key, identity, sha256 of the text and the digest it is named by: for ``remember`` once written
    accepted: list[tuple[Hashable, bytes, str, str]] = field(default_factory=list)


def record_identity(text: str | bytes) -> bytes:
    """What two copies of a record must share to be the same decision (its canonical JSON text
    without the clock-measured fields)."""
    data = json.loads(text)
    for name in CLOCK_FIELDS:
        data.pop(name, None)
    return hashlib.sha256(canonical_json(data)).digest()


# an item's quarantine row, with the line it came on, the path and the error a sender is told
Refused = tuple[q.QuarantineRow, dict[str, Any]]


def _texts(items: Sequence[T], lines: Sequence[int], text: Callable[[T], str],
           unwritable: Callable[[T, Any], q.QuarantineRow]) -> tuple[list[T], list[int], list[str], list[Refused]]:
    """The items that have a stored text (``text``), their lines and texts, and the quarantine row
    of each that has none (``text`` refused it: a text UTF-8 cannot hold)."""
    good: list[T] = []
    good_lines: list[int] = []
    texts: list[str] = []
    refused: list[Refused] = []
    for item, line in zip(items, lines, strict=True):
        try:
            texts.append(text(item))
        except (RecordError, EventError) as exc:
            row = unwritable(item, exc)
            refused.append((row, {"line": line, "path": exc.path, "error": row.error}))
            continue
        good.append(item)
        good_lines.append(line)
    return good, good_lines, texts, refused


def _with_refused(out: Screened[T], refused: list[Refused]) -> Screened[T]:
    for row, error in refused:
        out.conflicts.append(row)
        out.conflict_errors.append(error)
    return out


def _identity(value: Identity) -> bytes:
    return value if isinstance(value, bytes) else value()


def _sha(text: str | bytes) -> str:
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


def _named(value: Named) -> str:
    return value if isinstance(value, str) else value()


def _output_digest(text: str) -> str:
    return str(json.loads(text).get("output_digest", ""))


def _packed(digest: str) -> bytes | str:
    """A hex digest as its 32 bytes (half the memory of its text), any other value as it is."""
    if len(digest) == 64:
        try:
            raw = bytes.fromhex(digest)
        except ValueError:
            return digest
        if raw.hex() == digest:
            return raw
    return digest


def _unpacked(digest: bytes | str) -> str:
    return digest.hex() if isinstance(digest, bytes) else digest


def _conflict_message(name: str, label: str, kept: str, sent: str, in_batch: bool) -> str:
    """The message of an item refused for a different one under its key: which copy is kept (the
    stored one, or one earlier in the same request) and both digests, ``label`` naming which."""
    kept_as, where = ("earlier", "an earlier one in this request") if in_batch else ("stored", "the stored one")
    if kept != sent:
        digests = f"{kept_as} {label} {kept or 'none'}, sent {label} {sent or 'none'}"
    else:  # two copies declaring one digest: both unsealed, or one redacted by its sender (which
        # keeps the digest of the decision as made)
        digests = f"{kept_as} and sent {label} both {kept or 'none'}, the content differs"
    return f"{name}: conflicts with {where} ({digests}); history is append-only, the {kept_as} one is kept"


class HistoryGuard:
    """Screens records and events against the store before they are written."""

    def __init__(self, query: Query, remembered: int = REMEMBERED) -> None:
        self._query = query
        self._limit = remembered
        # key -> (identity digest, sha256 of the accepted text, the digest it is named by), most
        # recent last; digests are kept as bytes, the hex only made for a conflict's message
        self._recent: OrderedDict[Hashable, tuple[bytes, bytes, bytes | str]] = OrderedDict()

    def screen_records(self, records: Sequence[DecisionRecord], lines: Sequence[int],
                       source: str) -> Screened[DecisionRecord]:
        """A record with no canonical text (a text UTF-8 cannot hold) is quarantined with the
        conflicts, naming the decision and the field; the others are screened."""
        good, good_lines, texts, refused = _texts(records, lines, record_text,
                                                  lambda r, exc: q.unwritable_record(source, r, exc))
        out = self._screen_records(good, [r.decision_id for r in good], texts, [r.output_digest for r in good],
                                   good_lines, source, record_identity)
        return _with_refused(out, refused)

    def screen_encoded(self, records: Sequence[E], lines: Sequence[int], source: str) -> Screened[E]:
        """As ``screen_records``, for records whose canonical text and identity are already made
        (``audit.store.ingest_worker``)."""
        identities = {r.text: r.identity for r in records}
        return self._screen_records(records, [r.decision_id for r in records], [r.text for r in records],
                                    [r.output_digest for r in records], lines, source, identities.__getitem__)

    def _screen_records(self, records: Sequence[R], ids: list[str], texts: list[str], output_digests: list[str],
                        lines: Sequence[int], source: str, identity: Callable[[str], bytes]) -> Screened[R]:
        keys: list[Hashable] = list(ids)
        wanted = sorted({i for i in ids if i not in self._recent})
        digests = dict(self._stored_record_digests(wanted))
        # A re-send with the stored text's digest is that text, so its identity is the sent one's.
        # Only a key whose every copy here differs from the stored text needs that text read back:
        # its identity (without the clock fields) tells a re-run from a conflict.
        stored: dict[Hashable, tuple[Identity, str, Named]] = {}
        for key, text, output_digest in zip(keys, texts, output_digests, strict=True):
            if key in digests and key not in stored and _sha(text) == digests[key]:
                stored[key] = (partial(record_identity, text), digests[key], output_digest)
        differing = sorted(str(k) for k in digests if k not in stored)
        stored.update({k: (record_identity(t), _sha(t), partial(_output_digest, t))
                       for k, t in self._stored_records(differing)})
        return self._split(records, lines, texts, output_digests, keys, stored, source, "record",
                           identity, lambda r: f"decision {r.decision_id}", "decision_id", "output_digest")

    def screen_events(self, events: Sequence[WorldEvent], lines: Sequence[int], source: str) -> Screened[WorldEvent]:
        """As ``screen_records``: an event with no stored text is quarantined naming the event and
        the field."""
        events, lines, texts, refused = _texts(events, lines, event_json,
                                               lambda e, exc: q.unwritable_event(source, e, exc))
        keys: list[Hashable] = [(e.cluster, e.seq) for e in events]
        stored: dict[Hashable, tuple[Identity, str, Named]] = {}
        by_cluster: dict[str, set[int]] = {}
        for e in events:
            if (e.cluster, e.seq) not in self._recent:
                by_cluster.setdefault(e.cluster, set()).add(e.seq)
        for cluster, seqs in by_cluster.items():
            # an event's identity is the sha256 of its text, so the stored digest is all it takes
            for seq, sha in self._stored_event_digests(cluster, sorted(seqs)):
                stored[(cluster, seq)] = (bytes.fromhex(sha), sha, sha)
        return _with_refused(self._split(events, lines, texts, None, keys, stored, source, "event",
                                         lambda t: hashlib.sha256(t.encode()).digest(),
                                         lambda e: f"event {e.cluster}/{e.seq}", "seq", "sha256"), refused)

    def remember(self, screened: Iterable[tuple[Hashable, bytes, str, str]]) -> None:
        for key, identity, sha, named in screened:
            raw = bytes.fromhex(sha)
            self._recent[key] = (identity, raw, raw if named == sha else _packed(named))
            self._recent.move_to_end(key)
        while len(self._recent) > self._limit:
            self._recent.popitem(last=False)

    def _split(self, items: Sequence[T], lines: Sequence[int], texts: list[str], named: list[str] | None,
               keys: list[Hashable], stored: dict[Hashable, tuple[Identity, str, Named]], source: str, kind: str,
               identity: Callable[[str], bytes], name: Callable[[T], str], path: str, label: str) -> Screened[T]:
        """``named``: the digest each item is named by in a conflict's message (``label`` says
        which); None names them by the sha256 of their text."""
        out: Screened[T] = Screened()
        batch: dict[Hashable, tuple[Identity, str, Named]] = {}
        for i, (item, line, text, key) in enumerate(zip(items, lines, texts, keys, strict=True)):
            sha = _sha(text)
            mine_named = sha if named is None else named[i]
            earlier = batch.get(key)
            recent = self._recent.get(key)
            before = earlier or (recent and (recent[0], recent[1].hex(), _unpacked(recent[2]))) or stored.get(key)
            if before is None:
                mine = (identity(text), sha, mine_named)
                batch[key] = mine
                out.accepted.append((key, *mine))
                out.fresh.append(item)
                out.fresh_lines.append(line)
                out.fresh_texts.append(text)
            elif before[1] == sha or _identity(before[0]) == identity(text):
                out.absorbed += 1  # the same text, or the same decision measured again
            else:
                error = _conflict_message(name(item), label, _named(before[2]), mine_named, in_batch=earlier is not None)
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
