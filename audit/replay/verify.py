"""Verification by replay: rebuild each decision's inputs, re-execute it, compare digests.

For a record at ``seq`` the world is rebuilt at ``seq`` (``WorldCursor``) and the attempt is
decided again with the record's pod, attempt and time (``audit.scheduler.engine.decide``). First
the ``input_digest`` is compared (input fidelity: did we rebuild what the decision saw?), then
the ``output_digest`` (determinism: does the engine still decide the same?). A bind-time
failure was written at a later seq (the record's blocker carries ``bind_seq``): the proposal is
decided at ``seq`` and re-checked by ``bind`` on the world at ``bind_seq``, as it happened.

Records are replayed in (cluster, seq) order so the world is folded forward once for a whole
batch: all records at one seq are decided first, then their bind checks run in ``bind_seq``
order. Every result names its cause when it does not match: ``input_mismatch``,
``output_mismatch``, ``engine_changed`` (an output difference on a record another engine version
decided), ``missing_events`` or ``checkpoint_corrupt``, with a structural diff.
Records observed on a real cluster (the node came from the binding) are checked for device
agreement instead (``audit.replay.observed``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import groupby
from typing import Any

from audit.canonical import digest
from audit.records import DecisionRecord, output_view, record_dict
from audit.replay.checkpoints import CheckpointCorrupt
from audit.replay.diff import record_diff
from audit.replay.result import Cause, ReplayResult
from audit.replay.source import MissingEvents, ReplaySource, WorldCursor
from audit.scheduler import engine
from audit.timestamps import parse_time_ms
from audit.world import World

# Fields a record copies from its inputs: when the input digest differs these say which input.
INPUT_FIELDS = ("cluster", "seq", "time", "attempt", "namespace", "pod", "pod_uid", "claims", "claim_uids",
                "policy_version", "policy_digest")


def bind_seq(record: DecisionRecord) -> int | None:
    """The seq of the bind-time re-check, for records whose bind failed."""
    seqs = [b.detail["bind_seq"] for b in record.blockers if isinstance(b.detail.get("bind_seq"), int)]
    return seqs[-1] if seqs else None


def is_observed(record: DecisionRecord) -> bool:
    return record.engine_version.endswith("(observed)")


def compare(recorded: DecisionRecord, replayed: DecisionRecord) -> tuple[str, list[str]]:
    """("", []) when the replay reproduces the record, else (cause, diff lines)."""
    if replayed.input_digest != recorded.input_digest:
        return Cause.INPUT_MISMATCH.value, input_diff(recorded, replayed)
    recorded_dict, replayed_dict = record_dict(recorded), record_dict(replayed)
    if replayed.output_digest == recorded.output_digest:
        # equal content under the same digest means the stored record still hashes to its own
        # digest; comparing dicts spares a second canonical encoding per decision
        if output_view(recorded_dict) == output_view(replayed_dict):
            return "", []
        sealed_ok = digest(output_view(recorded_dict)) == recorded.output_digest
    else:
        sealed_ok = digest(output_view(recorded_dict)) == recorded.output_digest
    lines = record_diff(recorded_dict, replayed_dict)
    if not sealed_ok:
        lines.insert(0, "output_digest: the stored record no longer hashes to its own output_digest "
                        "(edited after it was sealed)")
    if not lines:
        lines.append(f"output_digest: recorded {recorded.output_digest}, replayed {replayed.output_digest}")
    if recorded.engine_version != replayed.engine_version:
        # decided by another release of the engine: the diff names the version and shows whether
        # anything else differs
        return Cause.ENGINE_CHANGED.value, lines
    return Cause.OUTPUT_MISMATCH.value, lines


def input_diff(recorded: DecisionRecord, replayed: DecisionRecord) -> list[str]:
    rec, rep = record_dict(recorded), record_dict(replayed)
    lines = [f"input_digest: recorded {recorded.input_digest}, replayed {replayed.input_digest}"]
    lines += record_diff({k: rec[k] for k in INPUT_FIELDS}, {k: rep[k] for k in INPUT_FIELDS})
    if len(lines) == 1:
        lines.append(f"world: the events up to seq {recorded.seq} are not the history this decision saw "
                     "(an event was changed, added or removed)")
    return lines


class Verifier:
    """Replays batches of records against one source, keeping one world cursor per cluster."""

    def __init__(self, source: ReplaySource, decide: Callable[..., engine.Decision] | None = None,
                 bind: Callable[..., engine.Decision] | None = None) -> None:
        self.source = source
        self.cursors: dict[str, WorldCursor] = {}
        # the engine's functions, looked up at call time unless given (tests swap tie-break rules)
        self._decide = decide
        self._bind = bind
        self._last_match: dict[str, int] = {}  # cluster -> seq of the last matching decision

    def cursor(self, cluster: str) -> WorldCursor:
        cur = self.cursors.get(cluster)
        if cur is None:
            cur = self.cursors[cluster] = WorldCursor(self.source, cluster)
        return cur

    def run(self, records: Iterable[DecisionRecord]) -> Iterator[ReplayResult]:
        """Results for the engine's decisions in (cluster, seq, decision_id) order, then for
        observed decisions in the same order; one per record."""
        ordered = sorted(records, key=lambda r: (r.cluster, r.seq, r.decision_id))
        decided = [r for r in ordered if not is_observed(r)]
        for (cluster, seq), group in groupby(decided, key=lambda r: (r.cluster, r.seq)):
            records_at = list(group)
            for r, result in zip(records_at, self._group(cluster, seq, records_at), strict=True):
                self._localise(r, result)
                yield result
        observed = [r for r in ordered if is_observed(r)]
        for cluster, group in groupby(observed, key=lambda r: r.cluster):
            yield from self._observed(cluster, list(group))

    def _localise(self, r: DecisionRecord, result: ReplayResult) -> None:
        """Bound where the history changed: after the events the last matching decision saw (its
        bind re-check included), up to the first decision whose inputs no longer match."""
        cluster, seq = r.cluster, r.seq
        if result.match:
            self._last_match[cluster] = max(self._last_match.get(cluster, -1), seq, bind_seq(r) or seq)
        elif result.cause == Cause.INPUT_MISMATCH.value:
            after = self._last_match.get(cluster)
            if after is not None and after < seq:
                result.diff.append(f"the last decision before it that matched is at seq {after}: "
                                   f"the change is in events {after + 1}..{seq}")

    def _observed(self, cluster: str, records: list[DecisionRecord]) -> Iterator[ReplayResult]:
        from audit.replay.observed import allocation_versions, check_observed

        try:
            versions = allocation_versions(self.source, cluster, records)
        except (MissingEvents, CheckpointCorrupt) as exc:
            yield from (_failed(r, exc) for r in records)
            return
        results: dict[str, ReplayResult] = {}
        placed: list[tuple[int, DecisionRecord, list[dict[str, Any]]]] = []
        for r in records:
            found = versions[r.decision_id]
            if isinstance(found, ReplayResult):
                results[r.decision_id] = found
            else:
                placed.append((found[0], r, found[1]))
        cursor = self.cursor(cluster)
        for at, r, claims in sorted(placed, key=lambda x: (x[0], x[1].decision_id)):
            try:
                world = cursor.at(at)
            except (MissingEvents, CheckpointCorrupt) as exc:
                results[r.decision_id] = _failed(r, exc)
                continue
            results[r.decision_id] = check_observed(world, r, claims)
        for r in records:
            yield results[r.decision_id]

    def _group(self, cluster: str, seq: int, records: list[DecisionRecord]) -> list[ReplayResult]:
        """Results for the records at one seq. World digests first chain the events' stored
        texts; if an input then differs, it is decided again on digests of the events' content,
        so a text that is intact but not canonically encoded never makes a mismatch."""
        results = list(self._group_once(cluster, seq, records))
        if any(r.cause == Cause.INPUT_MISMATCH.value for r in results) and self.cursor(cluster).digest_content():
            results = list(self._group_once(cluster, seq, records))
        return results

    def _group_once(self, cluster: str, seq: int, records: list[DecisionRecord]) -> Iterator[ReplayResult]:
        cursor = self.cursor(cluster)
        try:
            world = cursor.at(seq)
        except (MissingEvents, CheckpointCorrupt) as exc:
            yield from (_failed(r, exc) for r in records)
            return
        decided: list[tuple[DecisionRecord, engine.Decision | ReplayResult]] = []
        for r in records:
            decided.append((r, self._decide_one(world, r)))
        later: list[tuple[int, DecisionRecord, engine.Decision]] = []
        results: dict[str, ReplayResult] = {}
        for r, d in decided:
            if isinstance(d, ReplayResult):
                results[r.decision_id] = d
                continue
            at = bind_seq(r)
            if at is not None and d.proposal is not None:
                later.append((at, r, d))
            else:
                results[r.decision_id] = _result(r, d.record)
        for at, r, d in sorted(later, key=lambda x: (x[0], x[1].decision_id)):
            try:
                world = cursor.at(at)
            except (MissingEvents, CheckpointCorrupt) as exc:
                results[r.decision_id] = _failed(r, exc)
                continue
            bind = self._bind or engine.bind
            results[r.decision_id] = _result(r, bind(world, d, parse_time_ms(r.time),
                                                     failures_before=engine.bind_failures_before(r)).record)
        for r in records:
            yield results[r.decision_id]

    def _decide_one(self, world: World, r: DecisionRecord) -> engine.Decision | ReplayResult:
        decide = self._decide or engine.decide
        try:
            return decide(world, f"{r.namespace}/{r.pod}", r.attempt, parse_time_ms(r.time))
        except KeyError as exc:
            return ReplayResult(r.decision_id, engine.ENGINE_VERSION, r.policy_digest, False,
                                Cause.INPUT_MISMATCH.value, [str(exc.args[0]) if exc.args else repr(exc)])


def _result(recorded: DecisionRecord, replayed: DecisionRecord) -> ReplayResult:
    cause, diff = compare(recorded, replayed)
    return ReplayResult(recorded.decision_id, engine.ENGINE_VERSION, recorded.policy_digest, not cause, cause, diff,
                        replayed=replayed)


def _failed(r: DecisionRecord, exc: Exception) -> ReplayResult:
    cause = Cause.MISSING_EVENTS if isinstance(exc, MissingEvents) else Cause.CHECKPOINT_CORRUPT
    return ReplayResult(r.decision_id, engine.ENGINE_VERSION, r.policy_digest, False, cause.value, [str(exc)],
                        observed=is_observed(r))


def replay_records(source: ReplaySource, records: Iterable[DecisionRecord]) -> list[ReplayResult]:
    return list(Verifier(source).run(records))
