"""The cluster as a decision saw it: the objects of the world at the decision's ``seq``.

A decision at ``seq`` sees exactly the events with a smaller or equal ``seq`` (audit/events.py).
The objects are restored from the nearest checkpoint at or before ``seq`` (``World.snapshot``
keeps them under ``objects``, keyed like ``audit.world.obj_key``) and folded forward with the
events after it (``audit.world.fold_object``). Only objects are needed here, so this does not
build ``audit.world.World``, whose engine indexes cost far more than the fold. The active policy
follows the world's rule: the newest Policy upsert, until it is deleted (then the default policy).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from audit.events import EventType
from audit.explain import ClusterView
from audit.policy import Policy, default_policy, parse_policy
from audit.replay import StoreHistory
from audit.world import fold_object, obj_key, policy_in_force


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
    objects: dict[str, dict[str, dict[str, Any]]] = {}
    active_policy = ""
    if checkpoint is not None:
        snapshot = checkpoint[1]
        objects = {kind: dict(by_key) for kind, by_key in (snapshot.get("objects") or {}).items()}
        active_policy = str(snapshot.get("policy") or "")
    for event in history.events(cluster, checkpoint[0] if checkpoint else -1, seq):
        fold_object(objects, event)
        if event.object_kind == "Policy":
            active_policy = policy_in_force(active_policy, obj_key(event.namespace, event.name),
                                            deleted=event.type == EventType.DELETE.value)
    policy_doc = objects.get("Policy", {}).get(active_policy) if active_policy else None
    policy = parse_policy({**policy_doc, "kind": "Policy"}) if policy_doc else default_policy()
    view = ClusterView.from_objects({**payload, "kind": kind} for kind, by_key in sorted(objects.items())
                                    if kind != "Policy" for _, payload in sorted(by_key.items()))
    return view, policy
