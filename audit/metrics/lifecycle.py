"""Pod lifecycle: one row per pod that asked for accelerators, folded from the world event log.

Every metric of this package counts pods from this table, never decision records (a pod retried
twenty times is still one pod). The rows come from the same ``World`` fold the engine and replay
use, so what a pod got is read from the objects the cluster wrote — the ResourceClaim's
``status.allocation`` (which subrequest each request got, which devices) and the Pod's
``spec.nodeName`` (when it was bound) — not from the engine's own bookkeeping. Alongside the pods
the fold keeps what the window-level metrics integrate over: the policy in force over time, the
cluster's capacity in H100-equivalents over time and the intervals each device was unhealthy.

Time advances in *instants*: all events with one timestamp. An instant is complete once an event
with a later timestamp arrives; only then is it judged (regret is judged at the end of instants),
so a fold that stops in the middle of a log and one that reads the whole log agree on every
instant both have seen complete.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from audit.events import WorldEvent
from audit.metrics.columns import Columns, PodColumns
from audit.metrics.regret import (
    Needs,
    RegretCandidate,
    RegretWatch,
    first_choice_allocatable,
    reduced_to_first_choice,
)
from audit.policy import Policy
from audit.records import Track
from audit.scheduler.claimspec import claim_requests, pod_claim_names
from audit.scheduler.nodefilter import node_exclusion
from audit.timestamps import parse_time_ms
from audit.world import UNINDEXED_MODEL, World, device_plugin_gpus

# Event kinds that can change capacity, health or the policy: the instant's end re-reads them.
_INVENTORY_KINDS = frozenset({"Node", "ResourceSlice", "DeviceTaintRule", "Policy", "DeviceClass"})
# Kinds whose objects hold devices or quota (``World.charge_of``): their deletes give back what that says.
_HOLDING_KINDS = frozenset({"ResourceClaim", "Pod"})


@dataclass
class PodLife:
    """One pod (one incarnation: a pod re-created under the same name is a new row)."""

    cluster: str
    namespace: str
    pod: str
    uid: str
    tenant: str  # under the policy in force when the pod was created
    track: str  # "dra" or "device-plugin"
    created_ms: int
    bound_ms: int | None = None  # first time spec.nodeName was set
    failed_ms: int | None = None  # phase Failed, or deleted, before ever being bound
    allocated_ms: int | None = None  # devices held from here (first claim allocation; device plugin: bind)
    released_ms: int | None = None  # ... to here (claim deallocated or deleted, pod ended)
    alternatives: bool = False  # some request offers >= 2 firstAvailable subrequests
    tiers: tuple[int, ...] = ()  # per request (pod claim order, request order): the subrequest index it got
    preferred: str = ""  # device model(s) the first alternative of the first request with alternatives asks for
    allocated: str = ""  # device models the pod got, "|"-joined
    devices: int = 0
    h100_eq: float = 0.0  # Σ over its devices of each device's H100-equivalent (policy at allocation)
    regretted: bool = False
    # device-plugin pods: the models of the device-plugin nodes its nodeSelector and required node
    # affinity admitted when it was created, "|"-joined — what it asked for, since its
    # `nvidia.com/gpu` limit names no model ("" for DRA pods: their claims say it, in ``preferred``)
    asked: str = ""
    row: int = field(default=-1, compare=False, repr=False)  # its index in the fold's rows and columns

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.pod}"

    @property
    def first_choice(self) -> bool:
        """Every request got its first subrequest (meaningful for pods with alternatives)."""
        return bool(self.tiers) and all(i == 0 for i in self.tiers)

    @property
    def fallback(self) -> bool:
        return any(i > 0 for i in self.tiers)

    def pending_until(self, end_ms: int) -> int:
        """End of the pod's pending interval [created, bound | failed | end)."""
        ends = [t for t in (self.bound_ms, self.failed_ms) if t is not None]
        return min([*ends, end_ms])


@dataclass(frozen=True)
class UnhealthySpan:
    device: str
    model: str
    start_ms: int
    end_ms: int | None  # None: still unhealthy


@dataclass
class Lifecycle:
    """What the fold knows: the pods, the policy and capacity timelines and unhealthy spans."""

    cluster: str
    pods: list[PodLife]
    policies: list[tuple[int, Policy]]  # (from ms, policy), ascending
    capacity: list[tuple[int, float]]  # (from ms, capacity in H100-equivalents), ascending
    unhealthy: list[UnhealthySpan]
    end_ms: int  # time of the last folded event
    seq: int = -1  # the last folded event's seq (-1: not from a fold)
    # the pods' fields as arrays, row i = pods[i] (None: compute from the PodLife objects)
    columns: Columns | None = field(default=None, compare=False, repr=False)

    def touching(self, since_ms: int, until_ms: int) -> Lifecycle:
        """The same lifecycle with only the pods that can count in [since, until): created before
        its end and not gone (released, or failed) before its start."""
        def keep(p: PodLife) -> bool:
            end = p.released_ms if p.released_ms is not None else p.failed_ms
            return p.created_ms < until_ms and (end is None or end >= since_ms)
        return Lifecycle(self.cluster, [p for p in self.pods if keep(p)], self.policies, self.capacity,
                         self.unhealthy, self.end_ms, self.seq)

    def policy_at(self, ms: int) -> Policy:
        found = self.policies[0][1]
        for start, p in self.policies:
            if start > ms:
                break
            found = p
        return found


class LifecycleFold:
    """Folds events one at a time into the world and the pod rows; ``lifecycle()`` reads them."""

    def __init__(self, cluster: str = "default", world: World | None = None) -> None:
        self.world = world if world is not None else World(cluster)
        self.cluster = self.world.cluster
        self.lives: list[PodLife] = []
        self.live: dict[str, PodLife] = {}  # pod key -> its current incarnation
        self.claim_owner: dict[str, str] = {}  # claim key -> pod key
        self.policies: list[tuple[int, Policy]] = []
        self.capacity: list[tuple[int, float]] = []
        self.spans: list[UnhealthySpan] = []
        self._sick: dict[str, tuple[str, int]] = {}  # device id -> (model, since)
        self._regret = RegretWatch()
        self._instant_ms: int | None = None
        self._inventory_touched = False
        self._policy_touched = False
        # what was given back this instant (devices, or quota held by a pod's device-plugin GPUs),
        # by model, and whether anything else changed that a judged candidate could now fit by
        self._freed_models: set[str] = set()
        self._changed = False
        self._columns = PodColumns()
        self._dirty: set[int] = set()  # rows changed since the columns were last synced
        self._asks_by_selector: dict[str, str] = {}  # a pod's node constraints -> models asked (until a Node changes)
        self._unwritten: set[int] = set()  # rows changed since ``take_changed`` last handed them out

    # ---- folding ---------------------------------------------------------------------------------

    def apply_all(self, events: Iterable[WorldEvent]) -> LifecycleFold:
        for ev in events:
            self.apply(ev)
        return self

    def apply(self, ev: WorldEvent) -> None:
        t = parse_time_ms(ev.time) if ev.time else self.world.time_ms
        if self._instant_ms is not None and t > self._instant_ms:
            self._end_instant(self._instant_ms)
        self._instant_ms = t if self._instant_ms is None else max(t, self._instant_ms)
        kind = ev.object_kind
        old = self.world.get(kind, ev.namespace, ev.name)
        held = self.world.charge_of(kind, ev.namespace, ev.name)
        self.world.apply(ev)
        if kind == "Node":
            self._asks_by_selector.clear()
        if kind in _INVENTORY_KINDS:
            self._inventory_touched = True
            if kind == "Policy":
                self._policy_touched = True
        if kind == "Pod":
            self._on_pod(ev, old, t)
        elif kind == "ResourceClaim":
            self._on_claim(ev, old, t)
        if kind in _INVENTORY_KINDS or (ev.type == "delete" and kind not in _HOLDING_KINDS):
            self._changed = True
        elif held is not None and self.world.charge_of(kind, ev.namespace, ev.name) is not held:
            self._freed_models.update(held.models)

    def end_instant(self) -> None:
        """The current instant is complete (the history is known to go on past it, e.g. a window
        ends before its next event): judge it now, as the next event's arrival would."""
        if self._instant_ms is not None:
            self._end_instant(self._instant_ms)
            self._instant_ms = None

    def fork(self) -> LifecycleFold:
        """A fold equal to this one that goes on independently: folding events into either leaves
        the other, and the lifecycles it reads, as they were; each then reads exactly what a fold
        of its whole log from the start would. Rows are copied (the fold changes them in place),
        and with them the world, the regret watch that points at them and the columns."""
        f = LifecycleFold.__new__(LifecycleFold)
        f.world, f.cluster = self.world.fork(), self.cluster
        f.lives = [copy.copy(life) for life in self.lives]
        f.live = {key: f.lives[life.row] for key, life in self.live.items()}
        f.claim_owner = dict(self.claim_owner)
        f.policies, f.capacity, f.spans = list(self.policies), list(self.capacity), list(self.spans)
        f._sick = dict(self._sick)
        f._regret = self._regret.fork(lambda life: f.lives[life.row])
        f._instant_ms = self._instant_ms
        f._inventory_touched, f._policy_touched = self._inventory_touched, self._policy_touched
        f._freed_models, f._changed = set(self._freed_models), self._changed
        f._columns = self._columns.fork()
        f._dirty = set(self._dirty)
        f._asks_by_selector = dict(self._asks_by_selector)
        f._unwritten = set(self._unwritten)
        return f

    @property
    def columns(self) -> PodColumns:
        return self._columns

    def lifecycle(self) -> Lifecycle:
        """The rows as of now (the current, incomplete instant not judged yet)."""
        policies = self.policies or [(self.world.time_ms, self.world.policy)]
        self._columns.sync(self.lives, sorted(self._dirty))
        self._unwritten |= self._dirty
        self._dirty.clear()
        return Lifecycle(self.cluster, list(self.lives), list(policies), list(self.capacity),
                         [*self.spans, *(UnhealthySpan(d, m, s, None) for d, (m, s) in sorted(self._sick.items()))],
                         self.world.time_ms, self.world.seq, self._columns.view())

    def take_changed(self) -> list[int]:
        """The rows changed (or added) since the last call, ascending, as of the last ``lifecycle()``:
        what a copy of the rows kept elsewhere (the store's ``pods`` table) must rewrite."""
        out = sorted(self._unwritten)
        self._unwritten.clear()
        return out

    def give_back(self, rows: Iterable[int]) -> None:
        """Rows taken by ``take_changed`` that could not be written: handed out again next time."""
        self._unwritten.update(rows)

    # ---- pods and claims -----------------------------------------------------------------------------

    def _on_pod(self, ev: WorldEvent, old: dict[str, Any] | None, t: int) -> None:
        key = f"{ev.namespace}/{ev.name}"
        life = self.live.get(key)
        if ev.type == "delete":
            if life is not None:
                self._dirty.add(life.row)
                del self.live[key]
                if life.bound_ms is None and life.failed_ms is None:
                    life.failed_ms = t
                if life.allocated_ms is not None and life.released_ms is None:
                    life.released_ms = t
            return
        pod = ev.payload
        meta = pod.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        if life is not None and life.uid != uid:
            del self.live[key]
            life = None
        if life is None:
            gpus = device_plugin_gpus(pod)
            claims = pod_claim_names(pod)
            if not gpus and not claims:
                return
            created = parse_time_ms(meta.get("creationTimestamp") or ev.time)
            life = PodLife(self.cluster, ev.namespace, ev.name, uid, self.world.policy.tenant_for(ev.namespace),
                           Track.DEVICE_PLUGIN.value if gpus and not claims else Track.DRA.value, created)
            if life.track == Track.DEVICE_PLUGIN.value:
                life.asked = self._asks(pod)
            life.row = len(self.lives)
            self.lives.append(life)
            self.live[key] = life
        self._dirty.add(life.row)
        for _, claim_name in pod_claim_names(pod):
            if claim_name:
                self.claim_owner[f"{ev.namespace}/{claim_name}"] = key
        node = (pod.get("spec") or {}).get("nodeName", "")
        if node and life.bound_ms is None and life.failed_ms is None:
            self._bound(life, pod, node, t)
        if (pod.get("status") or {}).get("phase") in ("Failed", "Succeeded"):
            if life.bound_ms is None and life.failed_ms is None:
                life.failed_ms = t
            if life.allocated_ms is not None and life.released_ms is None:
                life.released_ms = t

    def _on_claim(self, ev: WorldEvent, old: dict[str, Any] | None, t: int) -> None:
        key = f"{ev.namespace}/{ev.name}"
        owner = self.live.get(self.claim_owner.get(key, ""))
        if owner is None:
            return
        self._dirty.add(owner.row)
        was = bool(((old or {}).get("status") or {}).get("allocation"))
        now = ev.type != "delete" and bool((ev.payload.get("status") or {}).get("allocation"))
        if now and not was and owner.allocated_ms is None:
            owner.allocated_ms = t
        if was and not now and owner.allocated_ms is not None and owner.released_ms is None:
            owner.released_ms = t

    def _bound(self, life: PodLife, pod: dict[str, Any], node: str, t: int) -> None:
        world, policy = self.world, self.world.policy
        life.bound_ms = t
        if life.track == Track.DEVICE_PLUGIN.value:
            model = world.dp_model.get(node, "unknown")
            n = device_plugin_gpus(pod)
            life.allocated_ms = t
            life.devices, life.allocated, life.h100_eq = n, model, n * policy.h100_equivalent(model)
            return
        claims = [c for _, name in pod_claim_names(pod)
                  if name and (c := world.get("ResourceClaim", life.namespace, name)) is not None]
        tiers: list[int] = []
        models: dict[str, int] = {}
        eq = 0.0
        for claim in claims:
            got: dict[str, int] = {}
            for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []:
                request, _, sub = str(r.get("request", "")).partition("/")
                got.setdefault(request, _sub_index(claim, request, sub))
                if r.get("adminAccess"):
                    continue
                dev = world.devices.get(f"{r.get('driver', '')}/{r.get('pool', '')}/{r.get('device', '')}")
                model = dev.model if dev is not None else "unknown"
                models[model] = models.get(model, 0) + 1
                eq += policy.h100_equivalent(model)
            for name, _, alternatives in claim_requests(claim):
                if len(alternatives) >= 2:
                    life.alternatives = True
                tiers.append(got.get(name, 0))
        life.tiers = tuple(tiers)
        life.devices = sum(models.values())
        life.allocated = "|".join(sorted(models))
        life.h100_eq = eq
        if life.allocated_ms is None:
            life.allocated_ms = t
        life.preferred = _preferred(world, claims)
        if life.fallback:
            # the pod as it stands now, kept by reference: the world replaces an object whole on
            # each event and never changes one in place, so this one stays as it was
            reduced = reduced_to_first_choice(claims)
            self._regret.add(RegretCandidate(life, pod, reduced, t + policy.regret_window_ms))

    def _asks(self, pod: dict[str, Any]) -> str:
        """The models of the device-plugin nodes the pod's nodeSelector and required node affinity
        admit, "|"-joined. Only those two count (kube-scheduler's NodeAffinity filter): taints and
        cordons change while the pod waits, what it asked for does not."""
        spec = pod.get("spec") or {}
        key = json.dumps([spec.get("nodeSelector"), (spec.get("affinity") or {}).get("nodeAffinity")], sort_keys=True)
        found = self._asks_by_selector.get(key)
        if found is None:
            world, models = self.world, set()
            for name, model in world.dp_model.items():
                node = world.get("Node", "", name)
                if node is not None and node_exclusion(pod, name, {"metadata": node.get("metadata") or {}}) is None:
                    models.add(model)
            found = self._asks_by_selector[key] = "|".join(sorted(models))
        return found

    # ---- instants ------------------------------------------------------------------------------------

    def _end_instant(self, t: int) -> None:
        world = self.world
        if (self._policy_touched or not self.policies) and (
                not self.policies or self.policies[-1][1] is not world.policy):
            self.policies.append((t, world.policy))
        if self._inventory_touched or not self.capacity:
            cap = _capacity_eq(world)
            if not self.capacity or self.capacity[-1][1] != cap:
                self.capacity.append((t, cap))
            self._health(t)
        # a device outside the index given back: any candidate's first choice may select it
        changed, freed = self._changed or UNINDEXED_MODEL in self._freed_models, self._freed_models
        self._inventory_touched = self._policy_touched = self._changed = False
        self._freed_models = set()
        if len(self._regret):
            due = self._regret.due(t, changed, freed)
            no_room: set[Needs] = set()  # for this world state only
            for c in due:
                if first_choice_allocatable(world, c, no_room):
                    c.life.regretted = True
                    self._dirty.add(c.life.row)
            self._regret.judged(t, due)

    def _health(self, t: int) -> None:
        sick = {d.id: d.model for d in self.world.devices.values() if d.unhealthy}
        for dev_id in sorted(set(self._sick) - set(sick)):
            model, since = self._sick.pop(dev_id)
            self.spans.append(UnhealthySpan(dev_id, model, since, t))
        for dev_id in sorted(set(sick) - set(self._sick)):
            self._sick[dev_id] = (sick[dev_id], t)


def _sub_index(claim: dict[str, Any], request: str, sub: str) -> int:
    for name, _, alternatives in claim_requests(claim):
        if name == request:
            for i, (sub_name, _) in enumerate(alternatives):
                if sub_name == sub:
                    return i
    return 0


def _preferred(world: World, claims: list[dict[str, Any]]) -> str:
    """The model label of the first alternative of the first request offering alternatives (of the
    first request when none does): the models its class and selectors can match on this cluster."""
    from audit.scheduler.attempt import model_matcher

    matcher = model_matcher(world)
    first = ""
    for claim in claims:
        for rt in matcher.spec_tiers(claim):
            if not rt.tiers:
                continue
            if len(rt.tiers) >= 2:
                return rt.tiers[0].label
            first = first or rt.tiers[0].label
    return first


def _capacity_eq(world: World) -> float:
    """H100-equivalents of every device on a live node: DRA devices and device-plugin GPUs."""
    policy = world.policy
    total = 0.0
    for dev in world.devices.values():
        if dev.node in world.nodes or not dev.node:
            total += policy.h100_equivalent(dev.model)
    for node, gpus in world.dp_capacity.items():
        if node in world.nodes:
            total += gpus * policy.h100_equivalent(world.dp_model.get(node, "unknown"))
    return total


def fold_lifecycle(events: Iterable[WorldEvent], cluster: str = "default") -> Lifecycle:
    """The lifecycle of one cluster's event log (events in ``seq`` order)."""
    return LifecycleFold(cluster).apply_all(events).lifecycle()
