"""Model names for observed decisions, in the vocabulary of the rest of ClaimTrail.

Everywhere else a model is the policy's model name: the engine's records prefer and get the
models of its tiers (``audit.scheduler.tiers``: a tier's selectors evaluated on the world's device
signatures, each device's model from the policy's device-model table), and the pod lifecycle fold
the store keeps, which the pod figures, the dashboards' model filters and the migration report's
strata read, names them so too. The watcher's records use the same names, so that a DRA pod and
a device-plugin pod of one model meet in one stratum and a record's models are the ones its pod's
row has. They are read from an ``audit.world.World`` of the inventory the watcher logs (device
classes, slices, taint rules, nodes) and of the Policy object the stored log holds, if any: the
world the store's fold builds from the same log, so the policy is that fold's (the default one
unless the log holds a Policy object), and a device's model, a tier's label and a device-plugin
node's model are that world's own answers, not a second copy of the rules.

The world follows the log change by change (a slice's change indexes its pool again, nothing
more); when the log changed by other means (a restore) it is built again from the log's objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from audit.events import WorldEvent
from audit.scheduler.attempt import model_matcher
from audit.scheduler.tiers import RequestTiers
from audit.world import UNINDEXED_MODEL, World, device_plugin_model
from ingest.kube.eventlog import Applied, EventLog

# What a device's model, a tier's models and a device-plugin node's model are read from, in the
# order a world takes them: the policy first (its table names every device), a slice after the
# taint rules that may mark its devices.
INVENTORY_KINDS = ("Policy", "DeviceClass", "DeviceTaintRule", "Node", "ResourceSlice")
_POSITION = {kind: i for i, kind in enumerate(INVENTORY_KINDS)}


def _generations(log: EventLog) -> tuple[int, ...]:
    return tuple(log.generation(kind) for kind in INVENTORY_KINDS)


class ModelNames:
    """The engine's model names for what one cluster's event log holds."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.world = World(cluster)
        self._seq = -1
        self._generations: tuple[int, ...] | None = None  # the log's, as this world has folded them

    def follow(self, log: EventLog, applied: Iterable[Applied] = ()) -> World:
        """The world of ``log``'s inventory, ``applied`` being the changes just made to the log:
        folded one by one when they are all the log changed since this world last followed it,
        else built again from the log's objects."""
        changes = [a for a in applied if a.kind in _POSITION]
        now = _generations(log)
        if now == self._generations:
            return self.world
        if changes and self._generations is not None:
            before = list(now)
            for a in changes:
                before[_POSITION[a.kind]] -= 1  # each accepted change bumps its kind's generation once
            if tuple(before) == self._generations:
                for a in changes:
                    meta = a.object.get("metadata") or {}
                    self._fold(a.type, a.kind, str(meta.get("namespace", "") or ""), str(meta.get("name", "")),
                               a.object, a.event.time if a.event is not None else "")
                self._generations = now
                return self.world
        self.world, self._seq = World(self.cluster), -1
        for kind in INVENTORY_KINDS:
            for obj in log.objects(kind):
                meta = obj.get("metadata") or {}
                self._fold("upsert", kind, str(meta.get("namespace", "") or ""), str(meta.get("name", "")), obj, "")
        self._generations = now
        return self.world

    def _fold(self, type_: str, kind: str, namespace: str, name: str, obj: dict[str, Any], time: str) -> None:
        # the world's own seq: it folds the inventory's changes only, never the log's chain
        self._seq += 1
        self.world.apply(WorldEvent(self.cluster, self._seq, time, type_, kind, namespace, name, obj))

    # -- names (of the world as last followed) ----------------------------------------------------

    def device_model(self, result: Mapping[str, Any]) -> str:
        """The model of an allocation result's device, as the engine's records and the lifecycle
        fold name it (``unknown`` for a device the world does not index)."""
        dev = self.world.devices.get(f"{result.get('driver', '')}/{result.get('pool', '')}/{result.get('device', '')}")
        return dev.model if dev is not None else UNINDEXED_MODEL

    def claim_tiers(self, claim: dict[str, Any]) -> list[RequestTiers]:
        """The claim's requests with their tiers, each tier labelled with its models as the
        engine labels it."""
        return model_matcher(self.world).spec_tiers(claim)

    def device_plugin_model(self, node: dict[str, Any] | None) -> str:
        """The model of a device-plugin node's GPUs under the world's policy (``unknown`` for a
        node not seen)."""
        return device_plugin_model(self.world.policy, node or {})
