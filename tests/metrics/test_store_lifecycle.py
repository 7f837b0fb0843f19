"""The store keeps the pod lifecycle current from its event log, and never folds past a gap."""

from __future__ import annotations

import json

from audit.events import WorldEvent
from audit.metrics import fold_lifecycle
from audit.store.queries import AuditStore
from tests.metrics.eventlog import Log


def _ingest(store: AuditStore, events: list[WorldEvent]) -> None:
    body = "".join(json.dumps(e.to_dict()) + "\n" for e in events).encode()
    assert store.ingest_jsonl(body, "events", "test").delivered


def test_an_event_still_missing_stops_the_fold_until_it_arrives(store: AuditStore) -> None:
    log = Log().nodes("H100", 1, 4).at(0).pod("team-a/p", ("gpu", ["H100", "A100"], 2))
    log.at(5).bind("team-a/p", "h100-0", {"gpu": ("h100", [0, 1])}).tick(6)
    bind_claim = next(i for i, e in enumerate(log.events) if e.object_kind == "ResourceClaim" and e.payload.get("status"))
    _ingest(store, log.events[:bind_claim] + log.events[bind_claim + 1:])
    (pod,) = store.pod_lifecycle("c1").pods
    assert (pod.bound_ms, store.pod_lifecycle("c1").seq) == (None, bind_claim - 1)
    _ingest(store, [log.events[bind_claim]])
    served = store.pod_lifecycle("c1")
    assert served.seq == log.events[-1].seq
    assert served.pods == fold_lifecycle(log.events, "c1").pods
