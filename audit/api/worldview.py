"""The cluster as a decision saw it: the world at the decision's ``seq``.

A decision at ``seq`` sees exactly the events with a smaller or equal ``seq`` (audit/events.py).
The world (``audit.world.World``) is restored from the nearest checkpoint at or before ``seq``
and folded forward with the events after it; its objects become the explanation's cluster view
and its active policy the explanation's policy.
"""

from __future__ import annotations

from typing import Any

from audit.explain import ClusterView
from audit.policy import Policy
from audit.world import World


def world_at(store: Any, cluster: str, seq: int) -> tuple[ClusterView, Policy]:
    checkpoint = store.nearest_checkpoint(cluster, seq)
    world = World.from_snapshot(checkpoint[1]) if checkpoint else World(cluster)
    # The store reads events strictly after a non-negative seq; without a checkpoint that skips
    # an event numbered 0 (the simulator and the watcher number from 1).
    start = checkpoint[0] if checkpoint else 0
    for event in store.events(cluster, start, seq):
        world.apply(event)
    objects = [{**payload, "kind": kind} for kind, by_key in sorted(world.objects.items()) if kind != "Policy"
               for _, payload in sorted(by_key.items())]
    return ClusterView.from_objects(objects), world.policy
