"""The engine's node filter: the shared rules of ``audit.scheduler.nodefilter`` on the world.

Returns ``None`` when the node passes, otherwise a short structured reason (recorded as
``node_filtered``): ``{"filter": cause, "node": name}`` plus the ``key`` of an untolerated taint or
an unmatched nodeSelector entry.
"""

from __future__ import annotations

from typing import Any

from audit.scheduler.nodefilter import node_exclusion
from audit.world import World

# Causes whose record names the key they tripped on.
_KEYED_CAUSES = ("taint", "node_selector")


def node_filter(world: World, node_name: str, pod: dict[str, Any]) -> dict[str, str] | None:
    node = world.get("Node", "", node_name) if node_name in world.nodes else None
    excluded = node_exclusion(pod, node_name, node)
    if excluded is None:
        return None
    out = {"filter": excluded.cause, "node": node_name}
    if excluded.cause in _KEYED_CAUSES:
        out["key"] = excluded.key
    return out
