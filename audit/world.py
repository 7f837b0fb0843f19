"""The world: what the allocator can see at a sequence number, folded from the event log.

``World.apply(event)`` folds one ``WorldEvent`` (objects by kind/namespace/name) and keeps the
indexes the decision engine needs up to date incrementally: devices by node and model (highest
pool generation only), which devices are allocated and to which claim, which are unhealthy
(a NoSchedule/NoExecute taint the active policy calls health), free-and-healthy counts per node per
model with name-sorted node lists per count, pending pods, device-plugin capacity, and each
tenant's usage (current H100-equivalents plus an exponentially decayed history, half-life from the
policy) computed from allocation and release events and their times, never from hidden state.
A claim is charged for each device under the model the world knows it by now (``UNINDEXED_MODEL``
while no slice has listed it), and a device it holds that no slice lists any more (its node lost,
its driver's slices wiped) under the last model a slice gave it: a claim keeps what it was
allocated until it is deallocated. So, whether a slice was logged before or after the claims
that hold its devices, these counts are those of folding the final objects with slices before
claims, except that a held device no slice lists any more counts under the last model a slice
gave it.

``chain_digest`` = sha256(previous chain || event digest), so one hash names the whole history a
decision saw. ``snapshot()``/``from_snapshot()`` checkpoint the world; indexes are rebuilt from the
objects, history-dependent state (usage, charges, holding times) travels in the snapshot.
``fork()`` copies it in memory instead, indexes and their version counters as they are, for two
histories that go on from one point.

Holding times: when each allocated claim got its devices, and for each device model the last
``FINISHED_KEPT`` finished holdings (release time minus allocation time, in release order) —
what an adaptive fallback estimates the next release from (``audit.scheduler.release_estimate``).

Pure: no I/O, no clock. Times are the events' own.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from audit.canonical import canonical_json
from audit.events import EventType, WorldEvent
from audit.policy import Policy, attribute_text, default_policy, parse_policy
from audit.timestamps import parse_time_ms

GENESIS = "0" * 64
_DELETE = EventType.DELETE.value
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
NO_EXECUTE_EFFECTS = ("NoSchedule", "NoExecute")
DEVICE_PLUGIN_RESOURCE = "nvidia.com/gpu"
# GPU feature discovery labels device-plugin nodes with the product (dashes for spaces).
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
# Finished holdings kept per device model: enough for a stable survival estimate, and the most
# recent ones, so the estimate follows a workload that changes over the day.
FINISHED_KEPT = 256
# Attributes unique per device; left out of signatures (selectors naming them disable the shortcut).
IDENTITY_ATTRIBUTES = frozenset({"uuid", "gpu.nvidia.com/uuid", "resource.kubernetes.io/pciBusID",
                                 "resource.kubernetes.io/pcieRoot", "pciBusID", "pcieRoot"})


# The model charged for a device outside the index (or a device-plugin node of no known model).
UNINDEXED_MODEL = "unknown"

# a taint rule's selector without a driver or pool applies to every driver or pool
_ANY: Any = object()

def event_digest(ev: WorldEvent) -> str:
    """Same value as ``ev.digest()`` without deep-copying the payload (``asdict`` would)."""
    return hashlib.sha256(canonical_json({
        "cluster": ev.cluster, "seq": ev.seq, "time": ev.time, "type": ev.type, "object_kind": ev.object_kind,
        "namespace": ev.namespace, "name": ev.name, "payload": ev.payload, "resource_version": ev.resource_version,
    })).hexdigest()


def chain(prev: str, event_hex: str) -> str:
    return hashlib.sha256((prev + event_hex).encode()).hexdigest()


def obj_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


Objects = dict[str, dict[str, dict[str, Any]]]  # kind -> obj_key -> payload


def fold_object(objects: Objects, ev: WorldEvent) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """Fold one event into ``objects``, the objects alive (an upsert replaces its object, a delete
    removes it), and return the object's (old, new) payloads. The one fold of the log's objects:
    ``World.apply`` indexes on top of it, and readers that need the objects alone (a decision's
    cluster view, a watcher resuming from its sink) call it without building a ``World``."""
    bucket = objects.get(ev.object_kind)
    if bucket is None:  # (setdefault would build a spare dict on every fold)
        bucket = objects[ev.object_kind] = {}
    key = obj_key(ev.namespace, ev.name)
    old = bucket.get(key)
    if ev.type == _DELETE:
        bucket.pop(key, None)
        return old, None
    bucket[key] = ev.payload
    return old, ev.payload


@dataclass
class Device:
    """One indexed device: identity ``driver/pool/device``, its node, model and health."""

    id: str
    driver: str
    pool: str
    name: str
    node: str
    slice: str
    generation: int
    model: str
    attributes: dict[str, Any]
    capacity: dict[str, Any]
    taints: tuple[tuple[str, str, str], ...]  # (key, value, effect) from the slice and taint rules
    unhealthy: bool = False
    signature: str = ""  # see World.signatures; fixed by the fields above, so kept for the removal


class DeviceFacts:
    """A device's model and signature — the two pure functions of its content (under one policy)
    the index needs — memoised for an indexing pass.

    The model depends only on the text of the attributes the policy's model rules read for the
    device's driver, so devices agreeing on those texts share one rule evaluation. A signature
    is the digest of the canonical encoding of what selectors can tell apart; devices of one
    model nearly always share it, so a device equal to an earlier one whose values are all text
    takes that one's signature without encoding (equal text-only JSON values encode alike; with
    numbers or booleans ``==`` is not enough — ``1 == True`` — so those are always encoded).
    Facts are also remembered per device object (holding it, so the entry can never name another
    object).
    """

    _REPRESENTATIVES = 8  # per driver and model: beyond that every device is encoded

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._rule_attributes: dict[str, tuple[str, ...]] = {}
        self._models: dict[tuple[str, tuple[str | None, ...]], str] = {}
        self._by_device: dict[int, tuple[dict[str, Any], str, str]] = {}
        self._signed: dict[tuple[str, str], list[tuple[dict[str, Any], dict[str, Any], str]]] = {}

    def of(self, driver: str, device: dict[str, Any], attributes: dict[str, Any],
           capacity: dict[str, Any]) -> tuple[str, str]:
        """(model, signature) of ``device`` (whose attributes and capacity are given) under ``driver``."""
        known = self._by_device.get(id(device))
        if known is not None and known[0] is device:
            return known[1], known[2]
        model = self.model(driver, attributes)
        signature = self.signature(driver, model, attributes, capacity)
        self._by_device[id(device)] = (device, model, signature)
        return model, signature

    def model(self, driver: str, attributes: dict[str, Any]) -> str:
        names = self._rule_attributes.get(driver)
        if names is None:
            names = self._rule_attributes[driver] = tuple(dict.fromkeys(
                r.attribute for r in self.policy.model_rules if r.driver == driver))
        key = (driver, tuple(attribute_text(driver, attributes, n) for n in names))
        model = self._models.get(key)
        if model is None:
            model = self._models[key] = self.policy.model_of(driver, attributes)
        return model

    def signature(self, driver: str, model: str, attributes: dict[str, Any], capacity: dict[str, Any]) -> str:
        attrs = dict(attributes)
        for name in IDENTITY_ATTRIBUTES:
            attrs.pop(name, None)
        signed = self._signed.get((driver, model))
        if signed is None:
            signed = self._signed[(driver, model)] = []
        for known_attrs, known_capacity, known in signed:
            if known_attrs == attrs and known_capacity == capacity:
                return known
        signature = hashlib.sha256(canonical_json([driver, model, attrs, capacity])).hexdigest()
        if len(signed) < self._REPRESENTATIVES and _text_only(attrs) and _text_only(capacity):
            signed.append((attrs, capacity, signature))
        return signature


def _text_only(value: Any) -> bool:
    """True if ``value`` is plain strings all the way down (dicts with string keys, lists)."""
    kind = type(value)
    if kind is str:
        return True
    if kind is dict:
        return all(type(k) is str and _text_only(v) for k, v in value.items())
    if kind is list:
        return all(_text_only(v) for v in value)
    return False


@dataclass
class TenantUsage:
    in_use_eq: float = 0.0  # H100-equivalents allocated right now
    decayed: float = 0.0  # exponentially decayed H100-eq·ms
    last_ms: int = 0

    def advance(self, now_ms: int, half_life_ms: int) -> None:
        dt = now_ms - self.last_ms
        if dt > 0:
            f = 0.5 ** (dt / half_life_ms)
            self.decayed = self.decayed * f + self.in_use_eq * (half_life_ms / math.log(2)) * (1.0 - f)
            self.last_ms = now_ms
        elif self.last_ms == 0:
            self.last_ms = now_ms

    def rate(self, now_ms: int, half_life_ms: int) -> float:
        """Decayed average usage in H100-equivalents (equals in_use_eq in steady state)."""
        dt = max(0, now_ms - self.last_ms)
        f = 0.5 ** (dt / half_life_ms)
        decayed = self.decayed * f + self.in_use_eq * (half_life_ms / math.log(2)) * (1.0 - f)
        return decayed * math.log(2) / half_life_ms


@dataclass(frozen=True)
class Hold:
    """A Reservation object as the engine reads it: devices of ``models`` on ``node`` set aside,
    up to ``count``, for the pending pod ``pod`` since ``since_ms``."""

    pod: str
    node: str
    models: tuple[str, ...]
    count: int
    tier: int
    since_ms: int


@dataclass
class Charge:
    """What an allocation charged a tenant, so its release subtracts exactly that (charged again
    when the world learns another model for a device it holds: ``World._settle_charges``)."""

    tenant: str
    eq: float
    models: dict[str, int]


class World:
    """Objects plus incremental indexes; see the module docstring."""

    def __init__(self, cluster: str = "default") -> None:
        self.cluster = cluster
        self.seq = -1
        self.time = ""
        self.time_ms = 0
        self.chain_digest = GENESIS
        self.objects: Objects = {}
        self.policy: Policy = default_policy()
        self.policy_key = ""
        # versions: bump when the allocator's inventory inputs change (slices, classes, taint rules)
        self.inventory_version = 0
        self.class_version = 0  # DeviceClass changes (they affect every node)
        self.node_versions: dict[str, int] = {}  # bumped when a node's pools, devices or taints change
        self.multi_model_nodes: set[str] = set()  # nodes carrying more than one device model
        self.devices: dict[str, Device] = {}
        self.node_devices: dict[str, list[str]] = {}  # node -> device ids (slice order)
        self.pool_devices: dict[tuple[str, str], list[str]] = {}
        self.pool_slices: dict[tuple[str, str], set[str]] = {}  # node-local slices per pool
        self.allocated_by: dict[str, str] = {}  # device id -> claim key
        self.claim_devices: dict[str, list[str]] = {}  # allocated claim -> device ids
        self.charges: dict[str, Charge] = {}  # claim key or "pod:<key>" -> charge
        # held device no slice lists any more -> the last model a slice gave it, which its claim's
        # charge goes on counting it under until the claim releases it or a slice lists it again
        self.unlisted: dict[str, str] = {}
        # an indexing pass under way: claims with a held device it indexed under another model than
        # the one their charge counts it under; settled, and empty again, when the pass ends
        # (``_settle_charges``)
        self._remodelled: set[str] = set()
        self.alloc_start: dict[str, int] = {}  # allocated claim -> ms of the event that allocated it
        self.finished: dict[str, list[int]] = {}  # model -> last FINISHED_KEPT holding times (ms), oldest first
        self.usage: dict[str, TenantUsage] = {}
        self.tenant_models: dict[str, dict[str, int]] = {}  # tenant -> model -> devices in use
        # node -> model -> [total, free_healthy]
        self.node_model: dict[str, dict[str, list[int]]] = {}
        # model -> k -> sorted node names with free_healthy >= k
        self.free_nodes: dict[str, dict[int, list[str]]] = {}
        self.model_totals: dict[str, int] = {}
        # bumped whenever model_totals or the device-plugin capacity may change: what the cluster's
        # H100-equivalent capacity is computed from (``audit.scheduler.fairshare``)
        self.capacity_version = 0
        self.model_free: dict[str, int] = {}  # free and healthy devices per model, cluster-wide
        self.model_allocated: dict[str, int] = {}
        # device "signatures" (attributes minus identity, capacity): what selectors can tell apart
        self.signatures: dict[str, list[Any]] = {}  # key -> [count, model, driver, attributes, capacity]
        self.signature_version = 0
        self.nodes: set[str] = set()
        self.has_shared_slices = False
        self.pending: dict[str, int] = {}  # pod key -> creation ms (no nodeName yet)
        self.pending_by_tenant: dict[str, int] = {}  # tenant (under the active policy) -> pending pods
        # tenant -> its pending pods as sorted (creation ms, pod key): the queue order within a tenant
        self.pending_order: dict[str, list[tuple[int, str]]] = {}
        # Reservation objects (the cluster loop's, ``audit.scheduler.reservations``): node -> the
        # hold on it, and pod key -> its node
        self.reservations: dict[str, Hold] = {}
        self.reserved_node: dict[str, str] = {}
        self.dp_capacity: dict[str, int] = {}  # device-plugin node -> nvidia.com/gpu allocatable
        self.dp_used: dict[str, int] = {}
        self.dp_model: dict[str, str] = {}
        # while True (a checkpoint being loaded) free counts and the per-count node lists are left
        # alone and computed once, after every device and allocation is indexed
        self._bulk = False
        # caches other modules derive from this world; they live and die with it (never snapshotted)
        self.derived: dict[str, Any] = {}

    # ---- reading ------------------------------------------------------------------------------

    def derived_at(self, name: str, state: object) -> dict[Any, Any]:
        """The cache kept in ``derived`` under ``name`` while ``state`` (what its answers are read
        from besides their keys: the seq, a policy digest, a time) stays the same; a new state
        starts it empty, so it never holds answers about an older world."""
        kept = self.derived.get(name)
        if kept is None or kept[0] != state:
            kept = self.derived[name] = (state, {})
        answers: dict[Any, Any] = kept[1]
        return answers

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        bucket = self.objects.get(kind)  # (a ``{}`` default would be built on every call)
        return None if bucket is None else bucket.get(obj_key(namespace, name))

    def items(self, kind: str) -> Iterator[tuple[str, dict[str, Any]]]:
        return iter(sorted(self.objects.get(kind, {}).items()))

    def count(self, kind: str) -> int:
        return len(self.objects.get(kind, {}))

    def free_healthy(self, node: str, model: str) -> int:
        return self.node_model.get(node, {}).get(model, [0, 0])[1]

    def nodes_with_free(self, model: str, k: int) -> list[str]:
        """Names (sorted) of nodes with at least ``k`` free, healthy devices of ``model``."""
        return self.free_nodes.get(model, {}).get(max(1, k), [])

    def nodes_with_model(self, model: str) -> list[str]:
        return sorted(n for n, m in self.node_model.items() if m.get(model, [0])[0] > 0)

    def tenant_usage(self, tenant: str) -> TenantUsage:
        return self.usage.get(tenant) or TenantUsage(last_ms=self.time_ms)

    def model_in_use(self, tenant: str, model: str) -> int:
        return self.tenant_models.get(tenant, {}).get(model, 0)

    def charge_of(self, kind: str, namespace: str, name: str) -> Charge | None:
        """What the object holds against its tenant's quota: a claim's allocated devices, or a
        pod's device-plugin GPUs; None for other kinds or when it holds nothing."""
        key = obj_key(namespace, name)
        if kind == "ResourceClaim":
            return self.charges.get(key)
        return self.charges.get(_pod_charge_key(key)) if kind == "Pod" else None

    # ---- folding ------------------------------------------------------------------------------

    def apply(self, ev: WorldEvent, digest: str | None = None) -> None:
        """Fold ``ev``; ``digest`` may give its event digest when the caller already knows it (the
        sha256 of the event's stored canonical text), sparing encoding the event again."""
        if ev.seq <= self.seq:
            raise ValueError(f"WorldEvent: seq: {ev.seq} is not after {self.seq} (events must be applied in order)")
        self.chain_digest = chain(self.chain_digest, event_digest(ev) if digest is None else digest)
        self.seq = ev.seq
        if ev.time and ev.time != self.time:  # (most events share the instant of the one before)
            self.time = ev.time
            self.time_ms = parse_time_ms(ev.time)
        old, new = fold_object(self.objects, ev)
        handler = _HANDLERS.get(ev.object_kind)
        if handler is not None:
            handler(self, obj_key(ev.namespace, ev.name), old, new)

    # ---- policy ---------------------------------------------------------------------------------

    def _on_policy(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        in_force = policy_in_force(self.policy_key, key, deleted=new is None)
        if new is None and in_force == self.policy_key:
            return
        policy = parse_policy(new) if new is not None else default_policy()
        self.policy_key = in_force
        rules_changed = policy.canonical.get("deviceModels") != self.policy.canonical.get("deviceModels")
        self.policy = policy
        self._count_pending_by_tenant()
        if rules_changed:
            self._reindex_devices()

    def _count_pending_by_tenant(self) -> None:
        counts: dict[str, int] = {}
        order: dict[str, list[tuple[int, str]]] = {}
        for key, created in self.pending.items():
            tenant = self.policy.tenant_for(key.split("/", 1)[0])
            counts[tenant] = counts.get(tenant, 0) + 1
            order.setdefault(tenant, []).append((created, key))
        self.pending_by_tenant = counts
        self.pending_order = {t: sorted(v) for t, v in order.items()}

    # ---- devices --------------------------------------------------------------------------------

    def _on_slice(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        self.inventory_version += 1
        for obj in (old, new):
            spec = (obj or {}).get("spec", {})
            if obj is None or not spec.get("nodeName"):
                continue
            pid = (spec.get("driver", ""), spec.get("pool", {}).get("name", ""))
            if obj is new:
                self.pool_slices.setdefault(pid, set()).add(key)
            elif new is None or (new.get("spec", {}).get("driver", ""),
                                 new.get("spec", {}).get("pool", {}).get("name", "")) != pid:
                self.pool_slices.get(pid, set()).discard(key)
        spec = (new or old or {}).get("spec", {})
        pool = spec.get("pool", {})
        if not spec.get("nodeName"):
            if new is not None:
                self.has_shared_slices = True
            return
        if old is not None and old.get("spec", {}).get("nodeName"):
            o = old["spec"]
            if (o.get("driver", ""), o.get("pool", {}).get("name", "")) != (spec.get("driver", ""), pool.get("name", "")):
                self._reindex_pool(o.get("driver", ""), o.get("pool", {}).get("name", ""))
        self._reindex_pool(spec.get("driver", ""), pool.get("name", ""))

    def _on_taint_rule(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        self.inventory_version += 1
        for o in (old, new):
            sel = ((o or {}).get("spec") or {}).get("deviceSelector") or {}
            if sel.get("driver") and sel.get("pool"):
                self._reindex_pool(sel["driver"], sel["pool"])
            elif o is not None:
                self._reindex_devices()
                return

    def _on_class(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        self.inventory_version += 1
        self.class_version += 1

    def _reindex_devices(self) -> None:
        pools = sorted({(d.driver, d.pool) for d in self.devices.values()} | set(self.pool_devices))
        for s in self.objects.get("ResourceSlice", {}).values():
            spec = s.get("spec", {})
            if spec.get("nodeName"):
                pools.append((spec.get("driver", ""), spec.get("pool", {}).get("name", "")))
        facts = DeviceFacts(self.policy)
        rules = self._taint_rules()
        for driver, pool in sorted(set(pools)):
            self._reindex_pool(driver, pool, facts, rules)

    def _touch(self, node: str) -> None:
        self.node_versions[node] = self.node_versions.get(node, 0) + 1
        if len(self.node_model.get(node, {})) > 1:
            self.multi_model_nodes.add(node)
        else:
            self.multi_model_nodes.discard(node)

    def _reindex_pool(self, driver: str, pool: str, facts: DeviceFacts | None = None,
                      rules: list[tuple[Any, Any, str, tuple[str, str, str]]] | None = None) -> None:
        touched = {self.devices[d].node for d in self.pool_devices.get((driver, pool), []) if d in self.devices}
        self._reindex_pool_devices(driver, pool, facts or DeviceFacts(self.policy),
                                   self._taint_rules() if rules is None else rules)
        touched.update(self.devices[d].node for d in self.pool_devices.get((driver, pool), []))
        for node in touched:
            self._touch(node)
        if self._remodelled:
            self._settle_charges()

    def _reindex_pool_devices(self, driver: str, pool: str, facts: DeviceFacts,
                              rules: list[tuple[Any, Any, str, tuple[str, str, str]]]) -> None:
        for dev_id in self.pool_devices.pop((driver, pool), []):
            self._remove_device(dev_id)
        bucket = self.objects.get("ResourceSlice", {})
        slices = sorted(((name, bucket[name]) for name in self.pool_slices.get((driver, pool), ()) if name in bucket),
                        key=lambda x: x[0])
        if not slices:
            return
        rule_taints = [(device, taint) for rule_driver, rule_pool, device, taint in rules
                       if (rule_driver is _ANY or rule_driver == driver) and (rule_pool is _ANY or rule_pool == pool)]
        top = max(int(s["spec"]["pool"].get("generation", 0)) for _, s in slices)
        ids: list[str] = []
        for name, s in slices:
            spec = s["spec"]
            if int(spec["pool"].get("generation", 0)) != top:
                continue
            node = spec["nodeName"]
            devices = self.devices
            for d in spec.get("devices") or []:
                dev_name = d.get("name", "")
                dev_id = f"{driver}/{pool}/{dev_name}"
                if dev_id in devices:
                    continue  # duplicate names make the pool invalid; the allocator reports it
                # most devices carry no taints: skip building empty tuples for them
                own = d.get("taints")
                taints: tuple[tuple[str, str, str], ...] = tuple(
                    (t.get("key", ""), t.get("value", ""), t.get("effect", "")) for t in own) if own else ()
                if rule_taints:
                    taints += tuple(t for (dn, t) in rule_taints if dn in ("", d.get("name")))
                attrs = d.get("attributes") or {}
                capacity = d.get("capacity") or {}
                model, signature = facts.of(driver, d, attrs, capacity)
                dev = Device(dev_id, driver, pool, dev_name, node, name, top, model, attrs, capacity, taints,
                             False, signature)
                if taints:
                    dev.unhealthy = any(e in NO_EXECUTE_EFFECTS and self.policy.is_unhealthy_taint(k)
                                        for k, _, e in taints)
                self._add_device(dev)
                ids.append(dev_id)
        self.pool_devices[(driver, pool)] = ids

    def _taint_rules(self) -> list[tuple[Any, Any, str, tuple[str, str, str]]]:
        """Every DeviceTaintRule by name: (selector driver, pool — ``_ANY`` when absent —, device, taint)."""
        out: list[tuple[Any, Any, str, tuple[str, str, str]]] = []
        for _, rule in sorted(self.objects.get("DeviceTaintRule", {}).items()):
            spec = rule.get("spec", {}) or {}
            sel = spec.get("deviceSelector", {}) or {}
            t = spec.get("taint", {}) or {}
            out.append((sel.get("driver", _ANY), sel.get("pool", _ANY), sel.get("device", ""),
                        (t.get("key", ""), t.get("value", ""), t.get("effect", ""))))
        return out

    def _usable(self, dev: Device) -> bool:
        return not dev.unhealthy and dev.id not in self.allocated_by

    def _add_device(self, dev: Device) -> None:
        self.devices[dev.id] = dev
        self.node_devices.setdefault(dev.node, []).append(dev.id)
        counts = self.node_model.setdefault(dev.node, {}).setdefault(dev.model, [0, 0])
        counts[0] += 1
        self.model_totals[dev.model] = self.model_totals.get(dev.model, 0) + 1
        self.capacity_version += 1
        if not self._bulk and self._usable(dev):
            self._shift_free(dev.node, dev.model, +1)
        if dev.id in self.allocated_by:  # (the one lookup a device no claim holds costs)
            self.model_allocated[dev.model] = self.model_allocated.get(dev.model, 0) + 1
            # charged under the last model a slice gave it, or as unindexed if none had yet
            if self.unlisted.pop(dev.id, UNINDEXED_MODEL) != dev.model:
                self._remodelled.add(self.allocated_by[dev.id])
        sig = dev.signature
        entry = self.signatures.get(sig)
        if entry is None:
            self.signatures[sig] = [1, dev.model, dev.driver, dev.attributes, dev.capacity]
            self.signature_version += 1
        else:
            entry[0] += 1

    def _remove_device(self, dev_id: str) -> None:
        dev = self.devices.pop(dev_id, None)
        if dev is None:
            return
        lst = self.node_devices.get(dev.node, [])
        if dev_id in lst:
            lst.remove(dev_id)
        counts = self.node_model[dev.node][dev.model]
        counts[0] -= 1
        self.model_totals[dev.model] -= 1
        self.capacity_version += 1
        if self._usable(dev):
            self._shift_free(dev.node, dev.model, -1)
        if dev_id in self.allocated_by:
            self.model_allocated[dev.model] = self.model_allocated.get(dev.model, 0) - 1
            self.unlisted[dev_id] = dev.model  # (the pass drops it again if it lists the device)
        if counts[0] == 0:
            del self.node_model[dev.node][dev.model]
            if not self.node_model[dev.node]:
                del self.node_model[dev.node]
        sig = dev.signature
        entry = self.signatures[sig]
        entry[0] -= 1
        if entry[0] == 0:
            del self.signatures[sig]
            self.signature_version += 1

    def _shift_free(self, node: str, model: str, delta: int) -> None:
        per_node = self.node_model.get(node)
        if per_node is None:
            per_node = self.node_model[node] = {}
        counts = per_node.get(model)
        if counts is None:
            counts = per_node[model] = [0, 0]
        before = counts[1]
        after = before + delta
        counts[1] = after
        self.model_free[model] = self.model_free.get(model, 0) + delta
        if self._bulk:
            return
        by_k = self.free_nodes.get(model)
        if by_k is None:
            by_k = self.free_nodes[model] = {}
        if delta > 0:
            for k in range(before + 1, after + 1):
                lst = by_k.get(k)
                if lst is None:
                    lst = by_k[k] = []
                i = bisect.bisect_left(lst, node)
                if i == len(lst) or lst[i] != node:
                    lst.insert(i, node)
        else:
            for k in range(after + 1, before + 1):
                lst = by_k.get(k, [])
                i = bisect.bisect_left(lst, node)
                if i < len(lst) and lst[i] == node:
                    del lst[i]

    def _count_free(self) -> None:
        """Free-and-healthy counts per node and model, and per model, from scratch."""
        model_free: dict[str, int] = {}
        allocated_by, node_model = self.allocated_by, self.node_model
        for dev in self.devices.values():
            if not dev.unhealthy and dev.id not in allocated_by:
                node_model[dev.node][dev.model][1] += 1
                model_free[dev.model] = model_free.get(dev.model, 0) + 1
        self.model_free = model_free

    def _rebuild_free_lists(self) -> None:
        """``free_nodes`` from the free counts in one pass: appending nodes in name order keeps every
        list sorted without the per-device insertions of the incremental path."""
        free_nodes: dict[str, dict[int, list[str]]] = {}
        for node in sorted(self.node_model):
            for model, (_, free) in self.node_model[node].items():
                by_k = free_nodes.setdefault(model, {})
                for k in range(1, free + 1):
                    by_k.setdefault(k, []).append(node)
        self.free_nodes = free_nodes

    # ---- claims and usage -------------------------------------------------------------------------

    def _on_claim(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        # claim_devices holds exactly the old object's allocated ids: no need to read them again
        old_alloc = self.claim_devices.get(key) or []
        new_alloc = _allocated_ids(new)
        if old_alloc == new_alloc:
            return
        if old_alloc:
            self._release(key, old_alloc)
        if new_alloc:
            namespace = (new or {}).get("metadata", {}).get("namespace", "")
            self._allocate(key, namespace, new_alloc)

    def _allocate(self, key: str, namespace: str, ids: list[str]) -> None:
        self.claim_devices[key] = ids
        self.alloc_start[key] = self.time_ms
        taken: dict[tuple[str, str], int] = {}  # (node, model) -> free, healthy devices taken
        devices, allocated_by, model_allocated = self.devices, self.allocated_by, self.model_allocated
        for dev_id in ids:
            dev = devices.get(dev_id)
            if dev is not None:
                model = dev.model
                if not dev.unhealthy and dev_id not in allocated_by:
                    taken[(dev.node, model)] = taken.get((dev.node, model), 0) + 1
                model_allocated[model] = model_allocated.get(model, 0) + 1
            allocated_by[dev_id] = key
        for (node, model), n in taken.items():
            self._shift_free(node, model, -n)
        self._charge(key, self._holding_charge(self.policy.tenant_for(namespace), ids))

    def _holding_charge(self, tenant: str, ids: list[str]) -> Charge:
        """What holding the devices ``ids`` charges ``tenant``: each device under its model as the
        world knows it now; one no slice lists any more under the last model a slice gave it while
        held, ``UNINDEXED_MODEL`` when no slice has."""
        models: dict[str, int] = {}
        h100: dict[str, float] = {}
        eq = 0.0
        devices, unlisted = self.devices, self.unlisted
        for dev_id in ids:
            dev = devices.get(dev_id)
            model = unlisted.get(dev_id, UNINDEXED_MODEL) if dev is None else dev.model
            models[model] = models.get(model, 0) + 1
            per_device = h100.get(model)
            if per_device is None:
                per_device = h100[model] = self.policy.h100_equivalent(model)
            eq += per_device  # device by device, as ever: the sum's rounding is part of the usage
        return Charge(tenant, eq, models)

    def _settle_charges(self) -> None:
        """Charge again each claim an indexing pass just ended gave a held device another model
        (indexed for the first time, or listed again or ruled under another model than the one it
        was charged under): as the same allocation would be charged now (models and
        H100-equivalents under the policy in force), to the tenant it was charged to, so its
        release gives back exactly this. A held device no slice lists any more is no such change:
        it goes on counting under the last model a slice gave it (``unlisted``), as its claim
        keeps its allocation until deallocated. The world then counts what a fold of its final
        objects with slices before claims counts, whatever order they were logged in, except that
        a held device no slice lists any more counts under the last model a slice gave it. That
        order does vary: the watcher logs each first list as it completes and a watch is ordered
        within its kind only, so a claim can come before the slice of its devices; and the
        kubelet deletes a driver's slices once the driver is gone longer than its wiping delay
        (``defaultWipingDelay``, 30 s, kubelet ``pkg/kubelet/cm/dra``) and when the kubelet
        starts, which the driver publishes again while claims hold them, as a lost node's slices
        go while its claims are still allocated."""
        remodelled, self._remodelled = self._remodelled, set()
        for key in sorted(remodelled):
            old = self.charges.get(key)
            ids = self.claim_devices.get(key)
            if old is None or ids is None:
                continue
            charge = self._holding_charge(old.tenant, ids)
            if charge.models != old.models:  # (else it keeps the weights it was charged in)
                self._uncharge(key)
                self._charge(key, charge)

    def _release(self, key: str, ids: list[str]) -> None:
        self.claim_devices.pop(key, None)
        returned: dict[tuple[str, str], int] = {}  # (node, model) -> healthy devices freed
        held: list[str] = []  # models the claim held, once each, in device order
        devices, allocated_by, model_allocated = self.devices, self.allocated_by, self.model_allocated
        for dev_id in ids:
            if allocated_by.get(dev_id) == key:
                del allocated_by[dev_id]
                dev = devices.get(dev_id)
                if dev is not None:
                    model_allocated[dev.model] = model_allocated.get(dev.model, 0) - 1
                    if dev.model not in held:
                        held.append(dev.model)
                    if not dev.unhealthy:
                        returned[(dev.node, dev.model)] = returned.get((dev.node, dev.model), 0) + 1
                else:
                    self.unlisted.pop(dev_id, None)
        for (node, model), n in returned.items():
            self._shift_free(node, model, n)
        self._uncharge(key)
        start = self.alloc_start.pop(key, None)
        if start is not None:
            for model in held:
                self._finish(model, max(0, self.time_ms - start))

    def _finish(self, model: str, held_ms: int) -> None:
        kept = self.finished.get(model)
        if kept is None:
            kept = self.finished[model] = []
        kept.append(held_ms)
        if len(kept) > FINISHED_KEPT:
            del kept[0]

    def _usage_of(self, tenant: str) -> TenantUsage:
        usage = self.usage.get(tenant)
        if usage is None:  # (setdefault would build a spare TenantUsage on every charge)
            usage = self.usage[tenant] = TenantUsage(last_ms=self.time_ms)
        return usage

    def _models_of(self, tenant: str) -> dict[str, int]:
        tm = self.tenant_models.get(tenant)
        if tm is None:
            tm = self.tenant_models[tenant] = {}
        return tm

    def _charge(self, key: str, charge: Charge) -> None:
        usage = self._usage_of(charge.tenant)
        usage.advance(self.time_ms, self.policy.usage_half_life_ms)
        usage.in_use_eq += charge.eq
        tm = self._models_of(charge.tenant)
        for m, n in charge.models.items():
            tm[m] = tm.get(m, 0) + n
        self.charges[key] = charge

    def _uncharge(self, key: str) -> None:
        charge = self.charges.pop(key, None)
        if charge is None:
            return
        usage = self._usage_of(charge.tenant)
        usage.advance(self.time_ms, self.policy.usage_half_life_ms)
        usage.in_use_eq = max(0.0, usage.in_use_eq - charge.eq)
        if usage.in_use_eq < 1e-9:
            usage.in_use_eq = 0.0
        tm = self._models_of(charge.tenant)
        for m, n in charge.models.items():
            left = tm.get(m, 0) - n
            if left:
                tm[m] = left
            else:  # (a model held no more is no entry, as in a world that never held it)
                tm.pop(m, None)

    # ---- nodes and pods -----------------------------------------------------------------------------

    def _on_node(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        self.capacity_version += 1
        if new is None:
            self.nodes.discard(key)
            self.dp_capacity.pop(key, None)
            self.dp_model.pop(key, None)
            return
        self.nodes.add(key)
        was = self.dp_model.get(key)
        gpus = device_plugin_capacity(new)
        if gpus is not None:
            self.dp_capacity[key] = gpus
            self.dp_model[key] = device_plugin_model(self.policy, new)
        else:
            self.dp_capacity.pop(key, None)
            self.dp_model.pop(key, None)
        model = self.dp_model.get(key)
        if model is not None and model != was and self.dp_used.get(key):
            self._recharge_pods_on(key, model)

    def _recharge_pods_on(self, node: str, model: str) -> None:
        """Charge the device-plugin pods bound to ``node`` again under the model the node now
        names (its GPU product label, under the policy's device-model rules), as a pod bound there
        after the node was logged is charged: a pod logged before its node (the watcher's first
        lists complete in any order) was charged as unindexed, and a node relabelled for another
        product changes what its pods hold. A node deleted leaves its pods charged as they were,
        as a claim keeps the model of devices no slice lists any more."""
        pods = self.objects.get("Pod", {})
        for key in sorted(pods):
            pod = pods[key]
            if ((pod.get("spec") or {}).get("nodeName") != node or _terminated(pod)
                    or (old := self.charges.get(_pod_charge_key(key))) is None):
                continue
            gpus = device_plugin_gpus(pod)
            if old.models != {model: gpus}:
                self._uncharge(_pod_charge_key(key))
                self._charge(_pod_charge_key(key), Charge(old.tenant, gpus * self.policy.h100_equivalent(model),
                                                          {model: gpus}))

    def _on_pod(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        old_node = ((old or {}).get("spec") or {}).get("nodeName", "")
        new_node = ((new or {}).get("spec") or {}).get("nodeName", "")
        live = new is not None and not _terminated(new)
        was_pending = key in self.pending
        before = self.pending.get(key)
        if new is not None and live and not new_node:
            self.pending[key] = parse_time_ms(new["metadata"].get("creationTimestamp") or self.time or "1970-01-01T00:00:00Z")
        else:
            self.pending.pop(key, None)
        after = self.pending.get(key)
        if before != after:  # (so too when the pod joins or leaves the pending pods: times are ints)
            tenant = self.policy.tenant_for(key.split("/", 1)[0])
            if was_pending != (after is not None):
                self.pending_by_tenant[tenant] = self.pending_by_tenant.get(tenant, 0) + (1 if not was_pending else -1)
            order = self.pending_order.setdefault(tenant, [])
            if before is not None:
                i = bisect.bisect_left(order, (before, key))
                if i < len(order) and order[i] == (before, key):
                    del order[i]
            if after is not None:
                bisect.insort(order, (after, key))
        old_gpus = device_plugin_gpus(old) if old_node else 0
        new_gpus = device_plugin_gpus(new) if new_node and live else 0
        if old_gpus and (old_node != new_node or not new_gpus):
            self.dp_used[old_node] = self.dp_used.get(old_node, 0) - old_gpus
            self._uncharge(_pod_charge_key(key))
        if new_gpus and (old_node != new_node or not old_gpus):
            self.dp_used[new_node] = self.dp_used.get(new_node, 0) + new_gpus
            model = self.dp_model.get(new_node, UNINDEXED_MODEL)
            namespace = (new or {}).get("metadata", {}).get("namespace", "")
            self._charge(_pod_charge_key(key), Charge(self.policy.tenant_for(namespace),
                                              new_gpus * self.policy.h100_equivalent(model), {model: new_gpus}))

    def _on_reservation(self, key: str, old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        node = self.reserved_node.pop(key, None)
        if node is not None and self.reservations.get(node, Hold("", "", (), 0, 0, 0)).pod == key:
            del self.reservations[node]
        if new is None:
            return
        spec = new.get("spec") or {}
        try:
            hold = Hold(key, str(spec.get("node", "")), tuple(str(m) for m in spec.get("models") or ()),
                        int(spec.get("count", 0)), int(spec.get("tier", 0)),
                        parse_time_ms(str(spec.get("since") or self.time or "1970-01-01T00:00:00Z")))
        except (TypeError, ValueError, AttributeError):
            return  # not one the cluster loop wrote: it holds nothing (the object stays in the log)
        self.reservations[hold.node] = hold
        self.reserved_node[key] = hold.node

    # ---- forks ---------------------------------------------------------------------------------------

    def fork(self) -> World:
        """A world equal to this one that folds on independently of it.

        Every index and counter is copied as it stands, down to the containers the fold changes in
        place, so the fork answers exactly as this world does, and as one folded from the same
        events would (a checkpoint rebuild would renumber the versions caches are keyed on). What
        the world never changes in place is shared: object payloads (an event replaces an object
        whole), devices (built once per indexing pass), charges, holds and the policy. Derived
        caches start empty: some hold references back to the world they were built for."""
        w = World.__new__(World)
        w.cluster, w.seq, w.time, w.time_ms = self.cluster, self.seq, self.time, self.time_ms
        w.chain_digest = self.chain_digest
        w.objects = {kind: dict(bucket) for kind, bucket in self.objects.items()}
        w.policy, w.policy_key = self.policy, self.policy_key
        w.inventory_version, w.class_version = self.inventory_version, self.class_version
        w.node_versions = dict(self.node_versions)
        w.multi_model_nodes = set(self.multi_model_nodes)
        w.devices = dict(self.devices)
        w.node_devices = {node: list(ids) for node, ids in self.node_devices.items()}
        w.pool_devices = {pool: list(ids) for pool, ids in self.pool_devices.items()}
        w.pool_slices = {pool: set(names) for pool, names in self.pool_slices.items()}
        w.allocated_by = dict(self.allocated_by)
        w.claim_devices = {key: list(ids) for key, ids in self.claim_devices.items()}
        w.charges = dict(self.charges)
        w.unlisted = dict(self.unlisted)
        w._remodelled = set()  # (empty between events)
        w.alloc_start = dict(self.alloc_start)
        w.finished = {model: list(held) for model, held in self.finished.items()}
        w.usage = {t: TenantUsage(u.in_use_eq, u.decayed, u.last_ms) for t, u in self.usage.items()}
        w.tenant_models = {t: dict(models) for t, models in self.tenant_models.items()}
        w.node_model = {node: {model: list(counts) for model, counts in per_model.items()}
                        for node, per_model in self.node_model.items()}
        w.free_nodes = {model: {k: list(nodes) for k, nodes in by_k.items()}
                        for model, by_k in self.free_nodes.items()}
        w.model_totals = dict(self.model_totals)
        w.capacity_version = self.capacity_version
        w.model_free = dict(self.model_free)
        w.model_allocated = dict(self.model_allocated)
        w.signatures = {sig: list(entry) for sig, entry in self.signatures.items()}
        w.signature_version = self.signature_version
        w.nodes = set(self.nodes)
        w.has_shared_slices = self.has_shared_slices
        w.pending = dict(self.pending)
        w.pending_by_tenant = dict(self.pending_by_tenant)
        w.pending_order = {t: list(order) for t, order in self.pending_order.items()}
        w.reservations = dict(self.reservations)
        w.reserved_node = dict(self.reserved_node)
        w.dp_capacity, w.dp_used, w.dp_model = dict(self.dp_capacity), dict(self.dp_used), dict(self.dp_model)
        w._bulk = self._bulk
        w.derived = {}
        return w

    # ---- checkpoints ---------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Canonical checkpoint: objects plus the history-dependent state indexes cannot rebuild.

        Object payloads are the world's own (no copy, for speed): read it, do not change it."""
        return {
            "cluster": self.cluster,
            "seq": self.seq,
            "time": self.time,
            "chain": self.chain_digest,
            "policy": self.policy_key,
            "objects": {k: dict(sorted(v.items())) for k, v in sorted(self.objects.items()) if v},
            "usage": {t: [u.in_use_eq, u.decayed, u.last_ms] for t, u in sorted(self.usage.items())},
            "charges": {k: [c.tenant, c.eq, dict(sorted(c.models.items()))] for k, c in sorted(self.charges.items())},
            "unlisted": dict(sorted(self.unlisted.items())),
            "holdings": {"started": dict(sorted(self.alloc_start.items())),
                         "finished": {m: list(v) for m, v in sorted(self.finished.items())}},
        }

    @classmethod
    def from_snapshot(cls, snap: dict[str, Any]) -> World:
        """The world a snapshot holds."""
        w = cls(snap["cluster"])
        policy_objs = snap["objects"].get("Policy", {})
        if snap.get("policy") in policy_objs:
            w.policy_key = snap["policy"]
            w.policy = parse_policy(policy_objs[w.policy_key])
        for kind in ("Policy", "DeviceClass", "DeviceTaintRule", "Node", "ResourceSlice", "Pod"):
            w.objects[kind] = dict(snap["objects"].get(kind, {}))
        w.objects["ResourceClaim"] = dict(snap["objects"].get("ResourceClaim", {}))
        for key, res in sorted(snap["objects"].get("Reservation", {}).items()):
            w.objects.setdefault("Reservation", {})[key] = res
            w._on_reservation(key, None, res)
        for key, node in w.objects["Node"].items():
            w._on_node(key, None, node)
        for key, sl in w.objects["ResourceSlice"].items():
            spec = sl.get("spec", {})
            if spec.get("nodeName"):
                w.pool_slices.setdefault((spec.get("driver", ""), spec.get("pool", {}).get("name", "")), set()).add(key)
            else:
                w.has_shared_slices = True
        # every device is indexed and every allocation taken before free counts and lists are built
        w._bulk = True
        w._reindex_devices()
        devices, allocated_by, model_allocated = w.devices, w.allocated_by, w.model_allocated
        held: dict[str, dict[str, int]] = {}  # allocated claim -> its devices by model, as charged
        # A checkpoint written before held devices no slice lists kept their last model has no
        # "unlisted": such devices (the claims on a node lost when it was written) take the model
        # their claim's stored charge counts beyond its listed devices, when that is one model,
        # as the fold of the log from its start gives (``_unlisted_from_charges``).
        unlisted = snap["unlisted"] if "unlisted" in snap else _unlisted_from_charges(snap, devices)
        for key, claim in w.objects["ResourceClaim"].items():
            ids = _allocated_ids(claim)
            if ids:
                w.claim_devices[key] = ids
                models = held[key] = {}
                for dev_id in ids:
                    allocated_by[dev_id] = key
                    dev = devices.get(dev_id)
                    if dev is None:
                        model = unlisted.get(dev_id, UNINDEXED_MODEL)
                        if dev_id in unlisted:
                            w.unlisted[dev_id] = model
                    else:
                        model = dev.model
                        model_allocated[model] = model_allocated.get(model, 0) + 1
                    models[model] = models.get(model, 0) + 1
        w._bulk = False
        w._count_free()
        w._rebuild_free_lists()
        for key, pod in w.objects["Pod"].items():
            node = (pod.get("spec") or {}).get("nodeName", "")
            if not node and not _terminated(pod):
                w.pending[key] = parse_time_ms(pod["metadata"].get("creationTimestamp") or snap["time"])
            elif node and not _terminated(pod):
                w.dp_used[node] = w.dp_used.get(node, 0) + device_plugin_gpus(pod)
        for k, (tenant, eq, models) in snap["charges"].items():
            w.charges[k] = Charge(tenant, eq, dict(models))
            tm = w.tenant_models.setdefault(tenant, {})
            for m, n in models.items():
                tm[m] = tm.get(m, 0) + n
        for t, (in_use, decayed, last) in snap["usage"].items():
            w.usage[t] = TenantUsage(in_use, decayed, last)
        holdings = snap.get("holdings") or {}
        started = holdings.get("started") or {}
        # A checkpoint written before holding times were kept does not know when its claims were
        # allocated: they count from the checkpoint's time (only adaptive fallback reads them).
        at = parse_time_ms(snap["time"]) if snap["time"] else 0
        w.alloc_start = {k: int(started.get(k, at)) for k in sorted(w.claim_devices)}
        w.finished = {m: [int(x) for x in v] for m, v in (holdings.get("finished") or {}).items()}
        w._count_pending_by_tenant()
        w.seq, w.time, w.chain_digest = snap["seq"], snap["time"], snap["chain"]
        w.time_ms = parse_time_ms(snap["time"]) if snap["time"] else 0
        # a checkpoint written before charges followed their devices may charge a claim under a
        # model its devices do not have (a claim logged before its slice): it is charged as the
        # fold of its history now charges it
        w._remodelled = {key for key, models in held.items()
                         if (charge := w.charges.get(key)) is not None and charge.models != models}
        if w._remodelled:
            w._settle_charges()
        return w


def _unlisted_from_charges(snap: dict[str, Any], devices: dict[str, Device]) -> dict[str, str]:
    """For a checkpoint without ``unlisted``: each allocated claim's devices that no slice lists,
    under the one model its stored charge counts beyond the devices the slices list (none when
    that is not one model: such devices count as ``UNINDEXED_MODEL``)."""
    out: dict[str, str] = {}
    charges = snap.get("charges") or {}
    for key, claim in snap["objects"].get("ResourceClaim", {}).items():
        ids = _allocated_ids(claim)
        missing = [d for d in ids if d not in devices]
        if not missing or key not in charges:
            continue
        left = dict(charges[key][2])
        for d in ids:
            if d in devices:
                left[devices[d].model] = left.get(devices[d].model, 0) - 1
        rest = {m: n for m, n in left.items() if n}
        if len(rest) == 1 and next(iter(rest.values())) == len(missing):
            model = next(iter(rest))
            out.update((d, model) for d in missing)
    return out


def policy_in_force(current: str, key: str, *, deleted: bool) -> str:
    """The key of the Policy object in force after an event about the Policy object ``key``, when
    ``current``'s was in force before ("": the default policy): an upserted Policy takes over, and
    deleting the one in force brings the default back (deleting another changes nothing). The one
    rule for which policy a cluster's event log puts in force, for ``World`` and for readers that
    fold the log's objects alone (a watcher resuming from its sink)."""
    if not deleted:
        return key
    return "" if key == current else current


def _allocated_ids(claim: dict[str, Any] | None) -> list[str]:
    if not claim:
        return []
    alloc = (claim.get("status") or {}).get("allocation")
    if not alloc:
        return []
    # admin-access results do not occupy the device (upstream allocateddevices.go)
    return [f"{r.get('driver', '')}/{r.get('pool', '')}/{r.get('device', '')}"
            for r in (alloc.get("devices") or {}).get("results", []) or [] if not r.get("adminAccess")]


def device_plugin_capacity(node: dict[str, Any]) -> int | None:
    """The node's allocatable ``nvidia.com/gpu``, None when it is no device-plugin node."""
    gpus = ((node.get("status") or {}).get("allocatable") or {}).get(DEVICE_PLUGIN_RESOURCE)
    return None if gpus is None else int(str(gpus))


def device_plugin_model(policy: Policy, node: dict[str, Any]) -> str:
    """The model of a device-plugin node's GPUs: its GPU product label read as the policy's
    device-model table reads a DRA device's ``productName``."""
    product = str(((node.get("metadata") or {}).get("labels") or {}).get(GPU_PRODUCT_LABEL, ""))
    return policy.model_of("gpu.nvidia.com", {"productName": {"string": product.replace("-", " ")}})


def _pod_charge_key(key: str) -> str:
    """A pod's device-plugin GPUs are charged apart from its claims, which charge under their own keys."""
    return f"pod:{key}"


def _terminated(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def device_plugin_gpus(pod: dict[str, Any] | None) -> int:
    """Σ ``nvidia.com/gpu`` limits over the pod's containers (the device plugin's unit)."""
    if not pod:
        return 0
    total = 0
    for c in (pod.get("spec") or {}).get("containers", []) or []:
        limits = ((c.get("resources") or {}).get("limits") or {})
        v = limits.get(DEVICE_PLUGIN_RESOURCE)
        if v is not None:
            total += int(str(v))
    return total


_HANDLERS = {
    "Policy": World._on_policy,
    "ResourceSlice": World._on_slice,
    "DeviceTaintRule": World._on_taint_rule,
    "DeviceClass": World._on_class,
    "ResourceClaim": World._on_claim,
    "Node": World._on_node,
    "Pod": World._on_pod,
    "Reservation": World._on_reservation,
}
