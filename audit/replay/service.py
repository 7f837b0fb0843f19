"""The replay use cases, in one place for the command line and the API.

Verifying recorded decisions by id, in history order one step at a time, deciding a window of
one cluster again under another policy, and finding a policy document by version are done here,
over a ``History`` (the store through ``StoreHistory``, or ``MemorySource`` over files); the CLI
and the API parse their input, call these and render what comes back. Pure: every read goes
through the history handed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

from audit.events import WorldEvent
from audit.records import DecisionRecord
from audit.replay.batch import history_order, replay_in_steps
from audit.replay.result import Cause, ReplayResult
from audit.replay.source import ReplaySource, WorldCursor
from audit.replay.verify import Verifier
from audit.replay.whatif import WhatIf, whatif
from audit.timestamps import format_time_ms, parse_time_ms
from audit.world import World

FEW = 32  # up to this many decisions, one query each for their events costs less than a pass over the history


class EventHistory(ReplaySource, Protocol):
    """The world's events and checkpoints per cluster."""

    def max_seq(self, cluster: str) -> int | None: ...


class History(EventHistory, Protocol):
    """A recorded history: the world's events and checkpoints per cluster, and its decisions by id."""

    def get_decisions(self, decision_ids: Sequence[str], tenant: str | None) -> dict[str, DecisionRecord]: ...


class PolicyNotFound(LookupError):
    """No Policy event of the history has the version asked for."""


class WindowOutsideLog(ValueError):
    """A what-if window that no event of the cluster's log falls in: nothing recorded lies in it,
    and its figures would only extrapolate the world as it was at one end of the log."""


def not_found(decision_id: str) -> ReplayResult:
    return ReplayResult(decision_id, "", "", False, Cause.MISSING_EVENTS.value, [f"decision {decision_id}: not found"])


def verify_chunks(source: ReplaySource, chunks: Iterable[Sequence[DecisionRecord]]) -> Iterator[list[ReplayResult]]:
    """Each chunk's results, in order, by one verifier (its world cursor moves on from one chunk to
    the next); the regenerated records are dropped, the caller keeps the verdicts."""
    verifier = Verifier(source)
    for chunk in chunks:
        results = list(verifier.run(chunk))
        for r in results:
            r.replayed = None
        yield results


def verify_ids(history: History, decision_ids: list[str]) -> list[ReplayResult]:
    """Replay the decisions with these ids (an id given twice is replayed once), found ones in the
    order given, then one ``missing_events`` result per id not found. A few decisions are replayed
    against the history directly (one events read per decision); more with one read of each
    stretch of their history (``audit.replay.batch``)."""
    wanted = list(dict.fromkeys(decision_ids))
    found = history.get_decisions(wanted, None)
    records = [found[d] for d in wanted if d in found]
    if len(records) <= FEW:
        results = list(Verifier(history).run(records))
    else:
        results = [r for step in replay_in_steps(history, records, len(records)) for r in step]
    return results + [not_found(d) for d in wanted if d not in found]


def verify_in_steps(history: History, decision_ids: list[str], step: int) -> Iterator[list[ReplayResult]]:
    """The decisions with these ids in history order, ``step`` at a time, then the ids not found
    (one step): what a long replay job stores between two progress updates."""
    found = history.get_decisions(decision_ids, None)
    yield from replay_in_steps(history, history_order(list(found.values())), step)
    missing = [not_found(d) for d in decision_ids if d not in found]
    if missing:
        yield missing


def policy_by_version(events: Iterable[WorldEvent], version: str) -> dict[str, Any]:
    """The document of the latest Policy event of ``events`` whose ``spec.version`` is ``version``."""
    for ev in reversed(list(events)):
        if ev.object_kind == "Policy" and str((ev.payload.get("spec") or {}).get("version")) == version:
            return {**ev.payload, "kind": "Policy"}
    raise PolicyNotFound(f"policy version {version!r} not found in the cluster's history")


def cluster_events(history: EventHistory, cluster: str) -> list[WorldEvent]:
    """Every event of ``cluster`` in seq order (empty when it has none)."""
    top = history.max_seq(cluster)
    return [] if top is None else list(history.events(cluster, -1, top))


def outside_log(cluster: str, first_ms: int, last_ms: int, since_ms: int, until_ms: int) -> str | None:
    """Why the window ``[since_ms, until_ms)`` holds no time of ``cluster``'s event log, whose first
    and last events are at ``first_ms`` and ``last_ms``: it starts after the last or ends at or
    before the first. None when it holds one. Figures over such a window would only extrapolate
    the world as it was at one end of the log (a pod pending at the last event "waiting" on for
    months), so the what-if and the per-pod statistics refuse it alike."""
    if since_ms <= last_ms and until_ms > first_ms:
        return None
    side = "after" if since_ms > last_ms else "before"
    return (f"the window lies {side} the event log of cluster {cluster}, which spans {format_time_ms(first_ms)} "
            f".. {format_time_ms(last_ms)}")


def within_log(cluster: str, events: Sequence[WorldEvent], since_ms: int, until_ms: int) -> None:
    """WindowOutsideLog unless the window ``[since_ms, until_ms)`` holds a time of ``cluster``'s
    event log (``outside_log``)."""
    if not events:
        raise WindowOutsideLog(f"cluster {cluster} has no world events")
    times = [parse_time_ms(e.time) for e in events]
    why = outside_log(cluster, min(times), max(times), since_ms, until_ms)
    if why is not None:
        raise WindowOutsideLog(f"{why}; a what-if decides again only a window of recorded history")


def counterfactual(history: EventHistory, cluster: str, events: list[WorldEvent], records: list[DecisionRecord],
                   document: dict[str, Any], since_ms: int, until_ms: int) -> WhatIf:
    """The window ``[since_ms, until_ms)`` of ``cluster`` decided again under ``document``, from the
    world just before the window (rebuilt from the history's nearest checkpoint), beside the
    recorded decisions. ``events`` are the cluster's; ``records`` may cover more than the window and
    other clusters, whose decisions are left out (their pods may share names with this cluster's).
    A window outside the cluster's event log is refused (``within_log``)."""
    within_log(cluster, events, since_ms, until_ms)
    records = [r for r in records if r.cluster == cluster]
    before = [e.seq for e in events if parse_time_ms(e.time) < since_ms]
    start = WorldCursor(history, cluster).at(max(before)) if before else World(cluster)
    return whatif(start, events, records, document, since_ms, until_ms)


def _key(r: DecisionRecord) -> tuple[str, str, int]:
    return (r.namespace, r.pod, r.attempt)


def _result(r: DecisionRecord) -> tuple[str, str, list[str]]:
    return (r.outcome, r.allocated_model, [d.device for d in r.devices])


def _side(r: DecisionRecord | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {"outcome": r.outcome, "allocated_model": r.allocated_model, "node": r.node,
            "devices": [d.device for d in r.devices], "policy_version": r.policy_version}


def paired(result: WhatIf) -> list[dict[str, Any]]:
    """Every recorded decision of the window (by time) beside the counterfactual decision of the
    same pod attempt; ``match``: the same outcome, model and devices."""
    replayed = {_key(r): r for r in result.counterfactual.records}
    runs = []
    for rec in sorted(result.recorded.records, key=lambda r: (r.time, r.decision_id)):
        other = replayed.get(_key(rec))
        runs.append({"decision_id": rec.decision_id, "pod": f"{rec.namespace}/{rec.pod}", "attempt": rec.attempt,
                     "match": other is not None and _result(other) == _result(rec),
                     "recorded": _side(rec), "counterfactual": _side(other)})
    return runs
