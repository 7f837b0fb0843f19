"""Counterfactual replay for the API: a window of one cluster decided again under another policy.

The history (events and decisions) is read from the store; ``audit.replay.whatif`` re-runs the
window under the other policy's document (sent with the request, else found by version in the
store's policies or the Policy events of the cluster's own log). The answer pairs every recorded decision of the window with the
counterfactual decision for the same pod attempt (``match``: same outcome, model and devices)
and carries the per-tenant and per-model deltas.
"""

from __future__ import annotations

from typing import Any

from audit.api import storeport
from audit.api.problems import Problem
from audit.records import DecisionRecord
from audit.replay import StoreHistory, WorldCursor
from audit.replay.whatif import deltas, whatif
from audit.store.filters import DecisionFilter
from audit.timestamps import parse_time_ms
from audit.world import World


def _policy_document(store: Any, events: list[Any], version: str) -> dict[str, Any]:
    stored = store.get_policy(version)
    if stored:
        return dict(stored)
    for ev in reversed(events):
        if ev.object_kind == "Policy" and str((ev.payload.get("spec") or {}).get("version")) == version:
            return {**ev.payload, "kind": "Policy"}
    raise Problem("not-found", f"policy version {version!r} not found in the store or the cluster's history")


def _records(store: Any, cluster: str, until: str) -> list[DecisionRecord]:
    out: list[DecisionRecord] = []
    cursor = None
    while True:
        page, cursor = store.list_decisions(DecisionFilter(cluster=cluster, until=until), cursor, 1000)
        out.extend(page)
        if cursor is None:
            return out


def _key(r: DecisionRecord) -> tuple[str, str, int]:
    return (r.namespace, r.pod, r.attempt)


def _result(r: DecisionRecord) -> tuple[str, str, list[str]]:
    return (r.outcome, r.allocated_model, [d.device for d in r.devices])


def _side(r: DecisionRecord | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {"outcome": r.outcome, "allocated_model": r.allocated_model, "node": r.node,
            "devices": [d.device for d in r.devices], "policy_version": r.policy_version}


def counterfactual_window(store: Any, cluster: str, since: str, until: str, version: str,
                          document: dict[str, Any] | None = None) -> dict[str, Any]:
    top = storeport.call(store.max_seq, cluster)
    if top is None:
        raise Problem("not-found", f"cluster {cluster!r} has no world events")
    history = StoreHistory(store)
    events = list(history.events(cluster, -1, top))
    doc = document if document is not None else _policy_document(store, events, version)
    version = version or str((doc.get("spec") or {}).get("version", ""))
    since_ms, until_ms = parse_time_ms(since), parse_time_ms(until)
    if until_ms <= since_ms:
        raise Problem("invalid-parameter", f"until {until}: must be after since {since}")
    records = _records(store, cluster, until)
    before = [e.seq for e in events if parse_time_ms(e.time) < since_ms]
    start = WorldCursor(history, cluster).at(max(before)) if before else World(cluster)
    result = whatif(start, events, records, doc, since_ms, until_ms)
    replayed = {_key(r): r for r in result.counterfactual.records}
    runs = []
    for rec in sorted(result.recorded.records, key=lambda r: (r.time, r.decision_id)):
        other = replayed.get(_key(rec))
        runs.append({"decision_id": rec.decision_id, "pod": f"{rec.namespace}/{rec.pod}", "attempt": rec.attempt,
                     "match": other is not None and _result(other) == _result(rec),
                     "recorded": _side(rec), "counterfactual": _side(other)})
    return {"runs": runs, "deltas": deltas(result), "policy_version": version, "cluster": cluster,
            "window": {"since": since, "until": until}}
