"""Counterfactual replay for the API: a window of one cluster decided again under another policy.

The history (events and decisions) is read from the store and the window is decided again by
``audit.replay.service`` under the other policy's document (sent with the request, else the
Policy event of that version in the cluster's own log). The answer pairs every recorded decision
of the window with the counterfactual decision for the same pod attempt (``match``: same outcome,
model and devices) and carries the per-tenant and per-model deltas. A window outside the cluster's
event log (after its last event or up to its first) is a 400 problem giving the log's time span.
"""

from __future__ import annotations

from typing import Any

from audit.api import storeport
from audit.api.problems import Problem
from audit.replay import StoreHistory
from audit.replay.service import (
    PolicyNotFound,
    WindowOutsideLog,
    cluster_events,
    counterfactual,
    paired,
    policy_by_version,
)
from audit.replay.whatif import deltas
from audit.store.filters import DecisionFilter
from audit.store.ports import StoreReads
from audit.timestamps import parse_time_ms


def counterfactual_window(store: StoreReads, cluster: str, since: str, until: str, version: str,
                          document: dict[str, Any] | None = None) -> dict[str, Any]:
    history = StoreHistory(store)
    events = cluster_events(history, cluster)
    if not events:
        raise Problem("not-found", f"cluster {cluster!r} has no world events")
    try:
        doc = document if document is not None else policy_by_version(events, version)
    except PolicyNotFound as exc:
        raise Problem("not-found", str(exc)) from None
    version = version or str((doc.get("spec") or {}).get("version", ""))
    since_ms, until_ms = parse_time_ms(since), parse_time_ms(until)
    if until_ms <= since_ms:
        raise Problem("invalid-parameter", f"until {until}: must be after since {since}")
    records = storeport.call(store.all_decisions, DecisionFilter(cluster=cluster, until=until))
    try:
        result = counterfactual(history, cluster, events, records, doc, since_ms, until_ms)
    except WindowOutsideLog as exc:
        raise Problem("invalid-parameter", f"since {since}, until {until}: {exc}") from None
    return {"runs": paired(result), "deltas": deltas(result), "policy_version": version, "cluster": cluster,
            "window": {"since": since, "until": until}}
