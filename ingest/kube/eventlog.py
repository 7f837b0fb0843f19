"""Turn what reflectors saw into the world event log: nothing missed, nothing doubled.

Reflectors may show the same object version twice (a watch resumed from an older
resourceVersion, a relist after 410 Gone that returns objects already seen) and may miss
intermediate versions during a gap. This log dedupes by ``(kind, namespace, name,
resourceVersion)`` — against the version it holds for a live object, or the deletion's version
for a deleted one (kept for the most recent ``tombstone_limit`` deletions) —, assigns the per-cluster ``seq`` in the order changes are applied, and after
every relist compares the snapshot with what it believes is alive: objects that vanished while
the watch was down get a delete event (with the snapshot's resourceVersion), as do objects
replaced by a namesake (another uid) before it is added, so the world the log describes always
converges to the cluster's.

A restarted watcher ``restore``s the world its sink already holds before the first list, so that
list is a diff against it like any relist: unchanged objects (the same resourceVersion) log
nothing, and objects deleted while no watcher ran get their delete.
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from audit.events import EventType, WorldEvent
from ingest.kube.reflector import Change, Snapshot
from ingest.kube.resources import BY_KIND, object_key

Key = tuple[str, str, str]


@dataclass
class Applied:
    """One accepted change: the world event (None for kinds outside the world) and the object."""

    kind: str
    type: str  # "upsert" | "delete"
    object: dict[str, Any]
    previous: dict[str, Any] | None
    event: WorldEvent | None


def _version(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _uid(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid", "") or "")


def _older(candidate: str, current: str) -> bool:
    """Whether ``candidate`` is an older resourceVersion than ``current``. ResourceVersions are
    opaque strings by contract; they are compared only when both are decimal integers (etcd
    revisions, which every API server in practice serves), never otherwise."""
    return candidate.isdigit() and current.isdigit() and int(candidate) < int(current)


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    """Drop server bookkeeping that changes nothing the allocator or an auditor reads."""
    out = copy.deepcopy(obj)
    (out.get("metadata") or {}).pop("managedFields", None)
    return out


class EventLog:
    def __init__(
        self, cluster: str, clock: Callable[[], str], *, next_seq: int = 0, tombstone_limit: int = 200_000
    ) -> None:
        self.cluster = cluster
        self.clock = clock
        self.next_seq = next_seq
        self.alive: dict[Key, dict[str, Any]] = {}
        self._by_kind: dict[str, dict[Key, dict[str, Any]]] = {}
        self._sorted: dict[str, list[dict[str, Any]]] = {}
        self.generations: dict[str, int] = {}  # bumped on every accepted change of a kind
        # deleted keys -> the resourceVersion of their deletion, most recent last, bounded: what
        # keeps a resent ADDED from bringing a deleted object back
        self._tombstones: OrderedDict[Key, str] = OrderedDict()
        self.tombstone_limit = tombstone_limit
        self.duplicates = 0
        self.synthesized_deletes = 0
        self.stale = 0

    def restore(self, objects: Iterable[tuple[str, dict[str, Any]]]) -> int:
        """Hold ``objects`` ((kind, object) pairs: the world a sink already holds) as alive,
        logging nothing: what was logged before needs no event again. Returns how many."""
        count = 0
        for kind, obj in objects:
            key = object_key(kind, obj)
            self.alive[key] = obj
            self._by_kind.setdefault(kind, {})[key] = obj
            self._sorted.pop(kind, None)
            self.generations[kind] = self.generations.get(kind, 0) + 1
            count += 1
        return count

    def objects(self, kind: str) -> list[dict[str, Any]]:
        """Alive objects of one kind, sorted by (namespace, name) so callers never see dict order.
        The list is shared until the kind changes again: callers must not modify it."""
        cached = self._sorted.get(kind)
        if cached is None:
            objs = self._by_kind.get(kind, {})
            cached = self._sorted[kind] = [objs[k] for k in sorted(objs)]
        return cached

    def generation(self, kind: str) -> int:
        return self.generations.get(kind, 0)

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.alive.get((kind, namespace, name))

    def apply(self, item: Snapshot | Change) -> list[Applied]:
        if isinstance(item, Snapshot):
            return self._apply_snapshot(item)
        obj = _clean(item.object)
        kind = item.kind
        return self._accept(kind, obj, deleted=item.type == "DELETED", version=_version(obj))

    def _apply_snapshot(self, snap: Snapshot) -> list[Applied]:
        out: list[Applied] = []
        present: set[Key] = set()
        for raw in snap.objects:
            obj = _clean(raw)
            key = object_key(snap.kind, obj)
            present.add(key)
            current = self.alive.get(key)
            if current is not None and _uid(current) and _uid(obj) and _uid(current) != _uid(obj):
                # deleted and created again under its name while the watch was down: the first
                # one gets its delete, as a watch would have said, before its successor is added
                self.synthesized_deletes += 1
                out += self._accept(snap.kind, current, deleted=True, version=snap.resource_version, relisted=True)
                self._tombstones.pop(key, None)  # the tombstone is the predecessor's, not this one's
            out += self._accept(snap.kind, obj, deleted=False, version=_version(obj))
        gone = sorted(
            key
            for key in self._by_kind.get(snap.kind, {})
            if (not snap.scope or key[1] == snap.scope) and key not in present
        )
        for key in gone:
            self.synthesized_deletes += 1
            out += self._accept(snap.kind, self.alive[key], deleted=True, version=snap.resource_version, relisted=True)
        return out

    def _accept(
        self, kind: str, obj: dict[str, Any], *, deleted: bool, version: str, relisted: bool = False
    ) -> list[Applied]:
        key = object_key(kind, obj)
        current = self.alive.get(key)
        held = _version(current) if current is not None else self._tombstones.get(key)
        if held is not None and version == held:
            self.duplicates += 1  # this exact version (or this deletion) is already in the log
            return []
        if deleted and current is None:
            # already gone (a relist noticed first) or never seen alive: nothing to delete
            return []
        if held is not None and not relisted and _older(version, held):
            # older than what we hold (a resent stream): applying it would move the world
            # backwards, or bring a deleted object back
            self.stale += 1
            return []
        previous = self.alive.get(key)
        per_kind = self._by_kind.setdefault(kind, {})
        if deleted:
            self.alive.pop(key, None)
            per_kind.pop(key, None)
            self._tombstones[key] = version
            self._tombstones.move_to_end(key)
            while len(self._tombstones) > self.tombstone_limit:
                self._tombstones.popitem(last=False)
        else:
            self.alive[key] = obj
            per_kind[key] = obj
            self._tombstones.pop(key, None)
        self._sorted.pop(kind, None)
        self.generations[kind] = self.generations.get(kind, 0) + 1
        event = None
        etype = EventType.DELETE if deleted else EventType.UPSERT
        if BY_KIND[kind].world:
            event = WorldEvent(
                cluster=self.cluster,
                seq=self.next_seq,
                time=self.clock(),
                type=etype.value,
                object_kind=kind,
                namespace=key[1],
                name=key[2],
                payload=obj,
                resource_version=version,
            )
            self.next_seq += 1
        return [Applied(kind, etype.value, obj, previous, event)]
