"""The world a device-plugin pod's ask is read from, for tests that build decision records by hand.

A device-plugin pod's record names no model, so what it asked for comes from the event log: one
device-plugin Node per model (``nvidia.com/gpu`` allocatable and the ``nvidia.com/gpu.product``
label GPU feature discovery sets) and the pod as created, pinning its model with a nodeSelector on
that label. ``asked`` folds them as the CLI and the server do.
"""

from __future__ import annotations

from collections.abc import Iterable

from audit.events import WorldEvent
from audit.metrics import fold_lifecycle
from audit.migration import asked_from_lifecycle
from audit.records import DecisionRecord
from ingest.simulate.cluster import GPU_PRODUCT_LABEL, gpu_product_label

TIME = "2026-01-01T00:00:00.000000Z"  # before every record: the pods exist when they are decided


def world_events(records: Iterable[DecisionRecord], pinned: dict[tuple[str, str], str],
                 node_models: Iterable[str] = ()) -> list[WorldEvent]:
    """Per cluster, a device-plugin node of each pinned model and of each of ``node_models``, then
    each device-plugin pod of ``records`` (by namespace and name) pinning ``pinned[(namespace, pod)]``
    ("" for none: it takes any device-plugin GPU)."""
    pods: dict[str, dict[tuple[str, str], tuple[str, str]]] = {}
    for r in records:
        if r.track == "device-plugin":
            pods.setdefault(r.cluster, {})[(r.namespace, r.pod)] = (r.pod_uid, pinned[(r.namespace, r.pod)])
    out: list[WorldEvent] = []
    for cluster, by_pod in sorted(pods.items()):
        objects = []
        for model in sorted({m for _, m in by_pod.values() if m} | set(node_models)):
            objects.append(("", f"dp-{model.lower()}", {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": f"dp-{model.lower()}", "labels": {GPU_PRODUCT_LABEL: gpu_product_label(model)}},
                "status": {"allocatable": {"nvidia.com/gpu": "8"}}}))
        for (namespace, pod), (uid, model) in sorted(by_pod.items()):
            objects.append((namespace, pod, {
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": pod, "namespace": namespace, "uid": uid, "creationTimestamp": TIME},
                "spec": {**({"nodeSelector": {GPU_PRODUCT_LABEL: gpu_product_label(model)}} if model else {}),
                         "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}))
        for seq, (namespace, name, obj) in enumerate(objects):
            out.append(WorldEvent(cluster=cluster, seq=seq, time=TIME, type="upsert", object_kind=obj["kind"],
                                  namespace=namespace, name=name, payload=obj))
    return out


def asked(records: Iterable[DecisionRecord], pinned: dict[tuple[str, str], str],
          node_models: Iterable[str] = ()) -> dict[tuple[str, str, str], str]:
    """What the device-plugin pods of ``records`` asked for, folded from ``world_events``."""
    events = world_events(records, pinned, node_models)
    out: dict[tuple[str, str, str], str] = {}
    for cluster in sorted({e.cluster for e in events}):
        out.update(asked_from_lifecycle(fold_lifecycle([e for e in events if e.cluster == cluster], cluster).pods))
    return out
