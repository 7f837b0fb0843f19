"""The cluster as a decision saw it: the objects of the world at the decision's ``seq``.

A decision at ``seq`` sees exactly the events with a smaller or equal ``seq`` (audit/events.py).
The objects are restored from the nearest checkpoint at or before ``seq`` (``World.snapshot``
keeps them under ``objects``, keyed like ``audit.world.obj_key``) and folded forward with the
events after it: an upsert replaces the object, a delete removes it. Only objects are needed
here, so this does not build ``audit.world.World``, whose engine indexes cost far more than
the fold. The active policy follows the world's rule: the newest Policy upsert, until it is
deleted (then the default policy).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from clickhouse_connect.driver.exceptions import ClickHouseError

from audit.events import EventType, WorldEvent
from audit.explain import ClusterView
from audit.policy import Policy, default_policy, parse_policy
from audit.world import obj_key

log = logging.getLogger("claimtrail.api")


def _events(store: Any, cluster: str, after_seq: int, upto_seq: int) -> Iterator[WorldEvent]:
    """Events with ``after_seq < seq <= upto_seq``; ``after_seq=-1`` means from the first event (seq 0)."""
    started = False
    try:
        for event in store.events(cluster, after_seq, upto_seq):
            started = True
            yield event
        return
    except ClickHouseError:
        if started or after_seq >= 0:
            raise
    # A store that binds after_seq as unsigned cannot start before seq 0: the event at seq 0 (the
    # simulator's initial Policy) is then missing from the fold, which is logged for operators.
    log.warning("the store cannot read events from seq 0; the world is folded from seq 1",
                extra={"cluster": cluster})
    yield from store.events(cluster, 0, upto_seq)


def world_at(store: Any, cluster: str, seq: int) -> tuple[ClusterView, Policy]:
    checkpoint = store.nearest_checkpoint(cluster, seq)
    objects: dict[str, dict[str, dict[str, Any]]] = {}
    active_policy = ""
    if checkpoint is not None:
        snapshot = checkpoint[1]
        objects = {kind: dict(by_key) for kind, by_key in (snapshot.get("objects") or {}).items()}
        active_policy = str(snapshot.get("policy") or "")
    for event in _events(store, cluster, checkpoint[0] if checkpoint else -1, seq):
        key = obj_key(event.namespace, event.name)
        by_key = objects.setdefault(event.object_kind, {})
        if event.type == EventType.DELETE.value:
            by_key.pop(key, None)
            if event.object_kind == "Policy" and key == active_policy:
                active_policy = ""
        else:
            by_key[key] = event.payload
            if event.object_kind == "Policy":
                active_policy = key
    policy_doc = objects.get("Policy", {}).get(active_policy) if active_policy else None
    policy = parse_policy({**policy_doc, "kind": "Policy"}) if policy_doc else default_policy()
    view = ClusterView.from_objects({**payload, "kind": kind} for kind, by_key in sorted(objects.items())
                                    if kind != "Policy" for _, payload in sorted(by_key.items()))
    return view, policy
