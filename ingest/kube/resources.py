"""The resources the watcher lists and watches, and how the kubernetes client reaches each one.

Each entry names the API class and the list functions of the ``kubernetes`` client, so the
client builds the real request paths (``/apis/resource.k8s.io/v1/resourceslices``,
``/api/v1/namespaces/<ns>/pods`` …) and carries auth and TLS. Objects are read as raw v1 JSON
(``_preload_content=False``) so no field is dropped by the client's models.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client


@dataclass(frozen=True)
class WatchedResource:
    kind: str  # the object kind as the API spells it
    api: str  # kubernetes.client API class name
    list_all: str  # cluster-scoped list, or list across all namespaces
    list_namespaced: str = ""  # empty for cluster-scoped kinds
    world: bool = True  # whether objects of this kind belong to the world event log

    @property
    def namespaced(self) -> bool:
        return bool(self.list_namespaced)

    def list_function(self, api_client: client.ApiClient, namespace: str | None) -> Callable[..., Any]:
        api = getattr(client, self.api)(api_client)
        if namespace and self.namespaced:
            fn = getattr(api, self.list_namespaced)
            return lambda **kw: fn(namespace, **kw)
        fn_all: Callable[..., Any] = getattr(api, self.list_all)
        return fn_all


# Order matters only for start-up: inventory first, so the first observed claims find their
# slices and classes already in the world. It is the order the reflectors start in, not the one
# their lists are logged in: each list is logged as it completes (``Watcher._consume``), and
# watches are ordered within a kind only, so a claim can still be logged before the slice of its
# devices; the world charges it by the devices as it knows them when the slice comes
# (``audit.world.World._settle_charges``).
WATCHED: tuple[WatchedResource, ...] = (
    WatchedResource("DeviceClass", "ResourceV1Api", "list_device_class"),
    WatchedResource("ResourceSlice", "ResourceV1Api", "list_resource_slice"),
    WatchedResource("DeviceTaintRule", "ResourceV1Api", "list_device_taint_rule"),
    WatchedResource("Node", "CoreV1Api", "list_node"),
    WatchedResource(
        "ResourceClaim", "ResourceV1Api", "list_resource_claim_for_all_namespaces", "list_namespaced_resource_claim"
    ),
    WatchedResource("Pod", "CoreV1Api", "list_pod_for_all_namespaces", "list_namespaced_pod"),
    WatchedResource("Event", "CoreV1Api", "list_event_for_all_namespaces", "list_namespaced_event", world=False),
)

BY_KIND = {r.kind: r for r in WATCHED}


def object_key(kind: str, obj: dict) -> tuple[str, str, str]:
    meta = obj.get("metadata") or {}
    return (kind, meta.get("namespace", "") or "", meta.get("name", "") or "")
