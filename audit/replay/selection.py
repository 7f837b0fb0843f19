"""Which decisions a replay run verifies: window, cluster, ids, a deterministic sample, a shard.

Sampling hashes the decision id (sha256), so ``--sample 0.01`` picks the same decisions on every
run and on every shard — no random generator, no dependence on input order. Sharding splits the
history into segments of ``segment`` sequence numbers (the checkpoint interval) and deals them
round-robin: shard ``i`` of ``N`` replays the segments with ``(seq // segment) % N == i``, so each
shard restarts from a checkpoint at most once per segment and the shards together cover every
decision exactly once (what a Kubernetes Indexed Job runs, one completion index per shard).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from audit.records import DecisionRecord
from audit.replay.checkpoints import DEFAULT_INTERVAL
from audit.timestamps import parse_time_ms, parse_zoned_ms

_SCALE = float(1 << 64)


class SelectionError(ValueError):
    """A selection option is malformed; the message names the option."""


@dataclass(frozen=True)
class Shard:
    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        i, sep, n = text.partition("/")
        if not sep or not i.strip().isdigit() or not n.strip().isdigit():
            raise SelectionError(f"--shard {text!r}: expected i/N with whole numbers, e.g. 0/8")
        shard = cls(int(i), int(n))
        if shard.count < 1 or not 0 <= shard.index < shard.count:
            raise SelectionError(f"--shard {text!r}: need 0 <= i < N and N >= 1")
        return shard

    def owns(self, seq: int, segment: int = DEFAULT_INTERVAL) -> bool:
        return (seq // segment) % self.count == self.index


def sampled(decision_id: str, fraction: float) -> bool:
    """True for a stable ``fraction`` of ids (by the first 64 bits of their sha256)."""
    if fraction >= 1.0:
        return True
    h = int.from_bytes(hashlib.sha256(decision_id.encode()).digest()[:8], "big")
    return h / _SCALE < fraction


@dataclass(frozen=True)
class Selection:
    since: str | None = None  # inclusive, RFC 3339
    until: str | None = None  # exclusive
    decision_ids: tuple[str, ...] = ()
    sample: float = 1.0
    shard: Shard | None = None
    segment: int = DEFAULT_INTERVAL
    cluster: str | None = None  # only this cluster's decisions

    def __post_init__(self) -> None:
        if not 0.0 < self.sample <= 1.0:
            raise SelectionError(f"--sample {self.sample}: must be in (0, 1]")
        if self.segment < 1:
            raise SelectionError(f"--segment {self.segment}: must be >= 1")
        for name in ("since", "until"):
            value = getattr(self, name)
            if value is not None:
                try:
                    parse_zoned_ms(value)
                except ValueError as exc:
                    raise SelectionError(f"--{name} {value!r}: {exc}") from None
        if self.since is not None and self.until is not None and parse_time_ms(self.until) < parse_time_ms(self.since):
            raise SelectionError(f"--until {self.until}: must be after --since {self.since}")

    def keeps(self, r: DecisionRecord) -> bool:
        if self.decision_ids and r.decision_id not in self.decision_ids:
            return False
        if self.cluster is not None and r.cluster != self.cluster:
            return False
        t = parse_time_ms(r.time)
        if self.since is not None and t < parse_time_ms(self.since):
            return False
        if self.until is not None and t >= parse_time_ms(self.until):
            return False
        if self.shard is not None and not self.shard.owns(r.seq, self.segment):
            return False
        return sampled(r.decision_id, self.sample)

    def apply(self, records: Iterable[DecisionRecord]) -> list[DecisionRecord]:
        return [r for r in records if self.keeps(r)]


def split_contiguous(records: Sequence[DecisionRecord], parts: int) -> list[list[DecisionRecord]]:
    """``parts`` runs of records in (cluster, seq) order, for parallel workers folding forward."""
    ordered = sorted(records, key=lambda r: (r.cluster, r.seq, r.decision_id))
    size = -(-len(ordered) // max(1, parts)) if ordered else 0
    return [ordered[i:i + size] for i in range(0, len(ordered), size)] if size else []
