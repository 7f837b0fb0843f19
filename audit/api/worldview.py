"""The cluster as a decision saw it: the objects of the world at the decision's ``seq``.

A decision at ``seq`` sees exactly the events with a smaller or equal ``seq`` (audit/events.py).
The objects are restored from the nearest checkpoint at or before ``seq`` (``World.snapshot``
keeps them under ``objects``, keyed like ``audit.world.obj_key``) and folded forward with the
events after it (``audit.world.fold_object``). Only objects are needed here, so this does not
build ``audit.world.World``, whose engine indexes cost far more than the fold. The active policy
follows the world's rule (``audit.world.policy_in_force``): the newest Policy upsert, until it is
deleted (then the default policy). ``policy_at`` gives that policy alone, folding only the
checkpoint's Policy objects and the Policy events after it, which the store picks out of the log.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from audit.events import EventType, WorldEvent
from audit.explain import ClusterView
from audit.policy import Policy, default_policy, parse_policy
from audit.replay import StoreHistory
from audit.store.aggregates import Query
from audit.world import Objects, fold_object, obj_key, policy_in_force


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold off cyclic garbage collection while a world's objects are built and explained.

    The rebuild creates tens of thousands of JSON-shaped dicts and lists that all survive it and
    hold no reference cycles; collecting while they pile up only walks them again and again
    (more than half of a rebuild's time on a 1,000-node world). Collection resumes afterwards,
    and is never turned on here if something else had turned it off.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def world_at(store: Any, cluster: str, seq: int) -> tuple[ClusterView, Policy]:
    with collector_paused():
        return _world_at(store, cluster, seq)


def _world_at(store: Any, cluster: str, seq: int) -> tuple[ClusterView, Policy]:
    history = StoreHistory(store)  # replay's reader of the store's history, from seq 0 on
    checkpoint = history.nearest_checkpoint(cluster, seq)
    objects: Objects = {}
    active_policy = ""
    if checkpoint is not None:
        snapshot = checkpoint[1]
        objects = {kind: dict(by_key) for kind, by_key in (snapshot.get("objects") or {}).items()}
        active_policy = str(snapshot.get("policy") or "")
    for event in history.events(cluster, checkpoint[0] if checkpoint else -1, seq):
        active_policy = _fold(objects, active_policy, event)
    view = ClusterView.from_objects({**payload, "kind": kind} for kind, by_key in sorted(objects.items())
                                    if kind != "Policy" for _, payload in sorted(by_key.items()))
    return view, _in_force(objects, active_policy)


def _fold(objects: Objects, active_policy: str, event: WorldEvent) -> str:
    """Fold ``event`` into ``objects``; the key of the Policy object in force after it."""
    fold_object(objects, event)
    if event.object_kind != "Policy":
        return active_policy
    return policy_in_force(active_policy, obj_key(event.namespace, event.name),
                           deleted=event.type == EventType.DELETE.value)


def _in_force(objects: Objects, active_policy: str) -> Policy:
    policy_doc = objects.get("Policy", {}).get(active_policy) if active_policy else None
    return parse_policy({**policy_doc, "kind": "Policy"}) if policy_doc else default_policy()


def policy_at(store: Any, cluster: str, seq: int) -> Policy:
    """The policy in force in ``cluster``'s world at ``seq``, as ``world_at`` gives it, without the
    world's other objects (the default policy when the store holds none of that world)."""
    policies, active_policy, events = store.insight(_policy_history, cluster, seq)
    objects: Objects = {"Policy": policies}
    for event in events:
        active_policy = _fold(objects, active_policy, event)
    return _in_force(objects, active_policy)


def _policy_history(query: Query, cluster: str, seq: int) -> tuple[dict[str, Any], str, list[WorldEvent]]:
    """The Policy objects of the nearest checkpoint at or before ``seq``, the key of the one in
    force there, and the Policy events after it through ``seq``: read in the store, so neither the
    checkpoint's other objects nor the log's other events are parsed here."""
    found = query("SELECT seq, JSONExtractString(body, 'policy'), JSONExtractRaw(body, 'objects', 'Policy') "
                  "FROM checkpoints FINAL WHERE cluster = {c:String} AND seq <= {s:Int64} ORDER BY seq DESC LIMIT 1",
                  {"c": cluster, "s": seq}, None).result_rows
    after, active_policy, raw = (int(found[0][0]), str(found[0][1]), str(found[0][2])) if found else (-1, "", "")
    rows = query("SELECT body FROM events WHERE cluster = {c:String} AND seq > {a:Int64} AND seq <= {u:Int64} "
                 "AND object_kind = 'Policy' ORDER BY seq LIMIT 1 BY seq",
                 {"c": cluster, "a": after, "u": seq}, None).result_rows
    return (json.loads(raw) if raw else {}), active_policy, [WorldEvent.from_dict(json.loads(r[0])) for r in rows]
