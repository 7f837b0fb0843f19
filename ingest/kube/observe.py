"""Observed decisions: what the real scheduler did, as DecisionRecords.

- A pod whose claims are all allocated (``status.allocation``: results, chosen subrequest, node
  selector) becomes one ``track=dra`` record with the devices, the tier it landed in, its wait
  (pod creation → PodScheduled) and the allocator's agreement in ``message``.
- A bound pod with ``nvidia.com/gpu`` limits becomes a ``track=device-plugin`` record.
- A ``FailedScheduling`` event for a GPU pod (e.g. "cannot allocate all claims") becomes an
  ``unschedulable`` record on the pod's track, one per event count.

Models are named as the engine's records name them (``ingest.kube.naming``): the preference is
the tier labels of the first claim's first request, a device's model and a device-plugin node's
the policy's; the subrequest a device came from stays in its ``request``.

Ids never depend on arrival order (reflectors run in parallel, events may come late or expire):
a device-plugin binding is ``decision_id(cluster, pod uid, 0)`` and the n-th scheduling failure
of a pod ``decision_id(cluster, pod uid, n)`` with n ≥ 1 from the event's count. An allocation is
keyed on the pod's first claim: ``decision_id(cluster, claim uid, 0)`` when the resourceclaim
controller made that claim from a ResourceClaimTemplate for the pod (it serves that pod only, so
its uid names one allocation), ``decision_id(cluster, "<claim uid>/<pod uid>", 0)`` when it is a
standalone claim, which pods reuse one after another. Each allocation of a standalone claim is one
decision however many pods share it, recorded for the pod it was made for: the first pod of
``status.reservedFor`` that has the claim first (kube-scheduler's bindClaim writes the allocation
and appends its pod to ``reservedFor`` in one status update; pods that join later are appended
behind it and add no decision). An allocation lasts until the claim is seen deallocated, or seen
allocated for pods none of which it was reserved for before (the claim controller deallocates a
claim when its last reservation goes, so the log missed a deallocation). A pod is bound once, and
an allocation the scheduler gave up before binding is not its decision, so the pod's uid tells a
claim's allocations apart. Re-observing the same state (a relist) yields the same ids, and the
observer emits each id once.

A restarted watcher ``restore``s the observer before its first list: the claims and pods of the
world the sink holds (what later changes are joined with), and the decisions the sink already
stores about those pods and about the pods the alive claims' allocations have served (gone ones
included), which are not emitted again — a decision derived anew carries the world position it
was seen at, so the store would hold it a conflict with the recorded one and quarantine it. A
standalone claim's allocation counts as recorded when one of the pods it served has its decision
under the allocation's id, or under the claim's uid alone (the former scheme, which keyed every
allocation of a standalone claim on it: after the upgrade, an allocation recorded so gets no second
record under the new id, and the claim's later allocations get theirs). ``restore`` then derives
the decisions that world completes which the sink does not hold, as ``observe`` would have: a
watcher that stopped after its sink took the events that complete a decision (a claim's
allocation and its pod's binding, a device-plugin pod's binding) but before it took the record
left the restarted one a world in which nothing changes, so only this recovers the record. A
scheduling failure is not part of the world: its record is recovered when the restarted watcher
lists the FailedScheduling event again, which the API server keeps for its --event-ttl (1 h by
default); a decision whose pod is gone, or whose claims were deallocated, by the end of the log
is not derived.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, deque
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any

from audit.canonical import digest
from audit.records import (
    NO_MODEL,
    DecisionRecord,
    DeviceRef,
    Exemplar,
    Outcome,
    RetryClass,
    TierSummary,
    Track,
    decision_id,
)
from audit.scheduler.claimspec import claim_key
from audit.store.ports import PodDecision
from audit.timestamps import parse_time_ms
from audit.world import DEVICE_PLUGIN_RESOURCE
from ingest.claims import allocation, reserved_pods, same_allocation
from ingest.kube import agreement
from ingest.kube.eventlog import Applied, EventLog
from ingest.kube.naming import ModelNames

log = logging.getLogger(__name__)

TEMPLATE_VERSION_LABEL = "claimtrail.io/template-version"
# what the resourceclaim controller (kube-controller-manager, pkg/controller/resourceclaim:
# podResourceClaimAnnotation) annotates a claim it made from a template with
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
ENGINE = "kube-scheduler (observed)"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _ms_between(start: str, end: str) -> int:
    """Milliseconds from ``start`` to ``end`` (API server timestamps); 0 while either is unset."""
    if not start or not end:
        return 0
    return max(0, parse_time_ms(end) - parse_time_ms(start))


def gpu_limit(pod: Mapping[str, Any]) -> int:
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        value = ((c.get("resources") or {}).get("limits") or {}).get(DEVICE_PLUGIN_RESOURCE)
        if value is not None:
            try:
                total += int(str(value))
            except ValueError:
                continue
    return total


def scheduled_at(pod: Mapping[str, Any]) -> str:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "True":
            return str(cond.get("lastTransitionTime") or "")
    return ""


def pod_claim_names(pod: Mapping[str, Any]) -> list[str] | None:
    """Claim object names in ``spec.resourceClaims`` order; None while one is not created yet."""
    statuses = {s.get("name"): s.get("resourceClaimName") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    names = []
    for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = ref.get("resourceClaimName") or statuses.get(ref.get("name"))
        if not name:
            return None
        names.append(name)
    return names


def generated_for_pod(claim: Mapping[str, Any]) -> bool:
    """Whether the claim was made from a ResourceClaimTemplate for one pod. The resourceclaim
    controller annotates such a claim with the pod's claim name and makes the pod its controlling
    owner (claims made before Kubernetes 1.28 have only the owner); a standalone claim, created
    directly, has neither, and may serve one pod after another."""
    meta = _meta(claim)
    if POD_CLAIM_ANNOTATION in (meta.get("annotations") or {}):
        return True
    return any(ref.get("kind") == "Pod" and ref.get("controller") for ref in meta.get("ownerReferences") or [])


def _finished(pod: Mapping[str, Any]) -> bool:
    """Whether the pod is done or going: the only time its claims are deallocated for good."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed") or bool(_meta(pod).get("deletionTimestamp"))


class DecisionObserver:
    def __init__(
        self,
        cluster: str,
        clock: Callable[[], str],
        *,
        check_allocations: bool = True,
        cache_size: int = 100_000,
        metrics: agreement.AgreementMetrics | None = None,
    ) -> None:
        self.cluster = cluster
        self.clock = clock
        self.check_allocations = check_allocations
        self.cache_size = cache_size
        self.metrics = metrics or agreement.AgreementMetrics()
        self.rerun = agreement.Rerunner(self.metrics, cache_size)
        self.agreements: deque[agreement.Agreement] = deque(maxlen=1000)  # the most recent, for inspection
        self._recorded: OrderedDict[str, None] = OrderedDict()  # decision ids already emitted (bounded)
        # standalone claims (by uid) whose current allocation has its record (bounded)
        self._decided: OrderedDict[str, None] = OrderedDict()
        self._failures: dict[tuple[str, str], int] = {}  # live pod (namespace, uid) -> scheduling failures seen
        # Reflectors run in parallel, so a claim may be deleted before its pod's binding arrives
        # (or the pod before the claim's allocation): joins use the last state seen of each,
        # kept after deletion, in bounded most-recently-seen caches.
        self._pods = _Recent(cache_size)
        # the same pods by (namespace, uid): a scheduler event names the pod it is about by uid,
        # and a pod recreated under its name (Job, StatefulSet) is another pod
        self._pods_by_uid = _Recent(cache_size)
        self._claims = _Recent(cache_size)
        self._allocated = _Recent(cache_size)
        # scheduler events that arrived before their pod or its claims
        self._waiting: OrderedDict[tuple[str, str], list[Mapping[str, Any]]] = OrderedDict()
        # allocated claims by the single node their allocation is pinned to ("" = not pinned)
        self._allocated_on: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self._claim_node: dict[tuple[str, str], str] = {}
        self.names = ModelNames(cluster)  # the engine's model names, from the logged inventory

    def restore(self, world: EventLog, decisions: Iterable[PodDecision],
                reservations: Mapping[str, Sequence[str]]) -> list[DecisionRecord]:
        """Take in the claims and pods ``world`` holds (restored from a sink) as if observed, and
        ``decisions``, those the sink stores about its pods and about the pods its claims'
        allocations have been reserved for (``reservations``: claim uid -> pod uids), as emitted.
        Returns the decisions this observer would have emitted for that world that the sink does
        not hold: those of a watcher that stopped after its sink took the events that complete a
        decision and before it took the record (a crash, a kill, a lost leadership)."""
        for claim in world.objects("ResourceClaim"):
            key = (str(_meta(claim).get("namespace", "")), str(_meta(claim).get("name", "")))
            self._index_allocation(key, claim)
            self._claims.put(key, claim)
            if allocation(claim):
                self._allocated.put(key, claim)
        for pod in world.objects("Pod"):
            ns = str(_meta(pod).get("namespace", ""))
            self._pods.put((ns, str(_meta(pod).get("name", ""))), pod)
            self._pods_by_uid.put((ns, str(_meta(pod).get("uid", ""))), pod)
        held: dict[str, set[str]] = {}  # pod uid -> ids of the decisions stored about it
        for d in decisions:
            self._remember(d.decision_id)
            held.setdefault(d.pod_uid, set()).add(d.decision_id)
            if d.outcome == Outcome.UNSCHEDULABLE.value and d.attempt > 0:
                # the n-th failure is recorded: an event of count <= n adds nothing
                key = (d.namespace, d.pod_uid)
                self._failures[key] = max(self._failures.get(key, 0), d.attempt)
        for claim in world.objects("ResourceClaim"):
            uid = str(_meta(claim).get("uid", ""))
            served = [*reservations.get(uid, ()), *reserved_pods(claim)]
            if allocation(claim) and not generated_for_pod(claim) and any(
                    self._recorded_for(uid, pod, held.get(pod, set())) for pod in served):
                self._decide(uid)
        stored = {i for ids in held.values() for i in ids}  # not the bounded window: all of them
        self.names.follow(world)
        # What is derived here is what the first observation derived, as far as the world at the
        # end of the log tells it: ``seq`` is that end, not where the decision was first seen;
        # ``time`` is the pod's PodScheduled time as then (the clock's now where the pod has
        # none); a DRA record's device models and the allocator's re-run (``message``,
        # ``tiers``) read the slices and the claims in use at that end, which may differ from
        # those of the moment it was made.
        out: list[DecisionRecord] = []
        for pod in world.objects("Pod"):
            try:
                out += self._pod(pod, world, stored)
            except Exception:  # noqa: BLE001 - one pod that cannot be read must not cost the others theirs
                meta = _meta(pod)
                log.exception("could not derive a decision from the stored world",
                              extra={"tenant_data": {"pod": f"{meta.get('namespace', '')}/{meta.get('name', '')}"}})
        return out

    def observe(self, applied: list[Applied], world: EventLog) -> list[DecisionRecord]:
        self.names.follow(world, applied)
        out: list[DecisionRecord] = []
        for a in applied:
            key = (str(_meta(a.object).get("namespace", "")), str(_meta(a.object).get("name", "")))
            if a.kind == "ResourceClaim":
                self._index_allocation(key, a.object if a.type == "upsert" else None)
                if a.type == "upsert" and not same_allocation(a.previous, a.object):
                    self._decided.pop(str(_meta(a.object).get("uid", "")), None)  # the next one is new
            if a.type != "upsert":
                if a.kind == "Pod":
                    self._failures.pop((key[0], str(_meta(a.object).get("uid", ""))), None)
                continue
            if a.kind == "Pod":
                self._pods.put(key, a.object)
                self._pods_by_uid.put((key[0], str(_meta(a.object).get("uid", ""))), a.object)
                for event in self._waiting.pop(key, []):
                    out += self._event(event, world)
                out += self._pod(a.object, world)
            elif a.kind == "ResourceClaim":
                self._claims.put(key, a.object)
                if (a.object.get("status") or {}).get("allocation"):
                    self._allocated.put(key, a.object)
                    for ref in (a.object.get("status") or {}).get("reservedFor") or []:
                        if ref.get("resource") == "pods":
                            pod = self._pods.get((key[0], str(ref.get("name", ""))))
                            if pod is not None:
                                out += self._pod(pod, world)
                for pod_key in [k for k in self._waiting if k[0] == key[0]]:
                    for event in self._waiting.pop(pod_key, []):
                        out += self._event(event, world)
            elif a.kind == "Event":
                out += self._event(a.object, world)
        return out

    # -- successes ------------------------------------------------------------------------------
    def _pod(self, pod: Mapping[str, Any], world: EventLog,
             stored: Container[str] = ()) -> list[DecisionRecord]:
        """The decision ``pod`` completes, unless it is emitted already or among ``stored``."""
        node = (pod.get("spec") or {}).get("nodeName") or ""
        pod_uid = str(_meta(pod).get("uid", ""))
        if (pod.get("spec") or {}).get("resourceClaims"):
            claims = self._bound_claims(pod)
            if claims is None:
                return []
            first = claims[0]
            uid = str(_meta(first).get("uid", ""))
            if not generated_for_pod(first):
                if uid in self._decided or self._in_line(first) != pod_uid:
                    return []  # the allocation has its record, or will have it for the pod it was made for
                self._decide(uid)
                uid = f"{uid}/{pod_uid}"
            if not self._new(uid, stored):
                return []
            return self._emit(self._dra_record(pod, claims, node, uid, world))
        if node and gpu_limit(pod) > 0 and self._new(pod_uid, stored):
            return self._emit(self._device_plugin_record(pod, node, world))
        return []

    def _bound_claims(self, pod: Mapping[str, Any]) -> list[dict[str, Any]] | None:
        """A DRA pod's claims, in ``spec.resourceClaims`` order, each as last seen allocated,
        once its decision is complete; None before."""
        ns = _meta(pod).get("namespace", "")
        names = pod_claim_names(pod)
        if not (pod.get("spec") or {}).get("nodeName") or not names:
            return None  # the decision is complete when the pod is bound, not before
        claims = [self._allocated.get((ns, n)) for n in names]
        if any(c is None or not allocation(c) for c in claims):
            return None
        if not _finished(pod) and any(not allocation(self._claims.get((ns, n))) for n in names):
            # a claim deallocated since while its pod still runs: the scheduler gave that
            # allocation up (a binding cycle that failed) and a new one is coming. Only a
            # finished pod's claims are deallocated for good (the last allocation counts)
            return None
        return [c for c in claims if c is not None]

    def _in_line(self, claim: Mapping[str, Any]) -> str:
        """The uid of the pod a standalone claim's allocation is recorded for: the first pod of
        ``reservedFor`` that has the claim first. kube-scheduler's bindClaim (plugin
        dynamicresources) writes the allocation and appends its pod to ``reservedFor`` in one
        status update, and later pods only join behind it: while that pod holds the allocation it
        is first. A pod not seen yet may be the one, so it keeps its place ("" when none is)."""
        ns, name = _meta(claim).get("namespace", ""), _meta(claim).get("name", "")
        for uid in reserved_pods(claim):
            pod = self._pods_by_uid.get((str(ns), uid))
            names = pod_claim_names(pod) if pod is not None else None
            if names is None or names[:1] == [name]:
                return uid
        return ""

    def _recorded_for(self, claim_uid: str, pod_uid: str, stored: set[str]) -> bool:
        """Whether ``stored``, the ids of the decisions stored about one pod a standalone claim's
        allocation served (perhaps a pod deleted since), holds that allocation's decision: under
        its id, or under the claim's uid alone as a watcher of the former scheme recorded it."""
        return bool(stored & {decision_id(self.cluster, f"{claim_uid}/{pod_uid}", 0),
                              decision_id(self.cluster, claim_uid, 0)})

    def _decide(self, claim_uid: str) -> None:
        self._decided[claim_uid] = None
        self._decided.move_to_end(claim_uid)
        while len(self._decided) > self.cache_size:
            self._decided.popitem(last=False)

    def _new(self, key: str, stored: Container[str] = ()) -> bool:
        """Whether the decision keyed ``key`` (attempt 0) is still to emit (and not among
        ``stored``): asked before its record is built, which re-runs the allocator (and counts the
        re-run) for an allocation."""
        decision = decision_id(self.cluster, key, 0)
        return decision not in self._recorded and decision not in stored

    def _emit(self, record: DecisionRecord | None) -> list[DecisionRecord]:
        if record is None or record.decision_id in self._recorded:
            return []
        self._remember(record.decision_id)
        return [record.seal()]

    def _remember(self, decision: str) -> None:
        self._recorded[decision] = None
        while len(self._recorded) > self.cache_size:
            self._recorded.popitem(last=False)  # the store dedupes by id beyond this window

    def _wait(self, pod_key: tuple[str, str], event: Mapping[str, Any]) -> None:
        self._waiting.setdefault(pod_key, []).append(event)
        while len(self._waiting) > self.cache_size:
            (ns, name), dropped = self._waiting.popitem(last=False)
            log.warning(
                "scheduler events dropped: their pod or claims never arrived",
                extra={"events": len(dropped), "tenant_data": {"pod": f"{ns}/{name}"}},
            )

    def _base(self, pod: Mapping[str, Any], key_uid: str, attempt: int, world: EventLog) -> dict[str, Any]:
        meta = _meta(pod)
        ns = meta.get("namespace", "")
        return {
            "decision_id": decision_id(self.cluster, key_uid, attempt),
            "cluster": self.cluster,
            "seq": max(0, world.next_seq - 1),
            "attempt": attempt,
            "tenant": ns,
            "namespace": ns,
            "pod": meta.get("name", ""),
            "pod_uid": meta.get("uid", ""),
            "policy_version": "observed",
            "policy_digest": "",
            "engine_version": ENGINE,
        }

    def _dra_record(
        self, pod: Mapping[str, Any], claims: list[dict[str, Any]], node: str, key: str, world: EventLog
    ) -> DecisionRecord:
        attempt = 0
        uids = [str(_meta(c).get("uid", "")) for c in claims]
        names = self.names
        names.follow(world)
        # as the engine's record (audit.scheduler.attempt.new_record, engine._proposal): the
        # preference is the tier labels of the first claim's first request, the tier the index
        # that request got, a fallback any request's later subrequest
        rts = [rt for c in claims for rt in names.claim_tiers(c)]
        index = {(t.claim, t.request, t.subrequest): t.index for rt in rts for t in rt.tiers}
        primary = rts[0] if rts else None
        preference = [t.label for t in primary.tiers] if primary else []
        devices: list[DeviceRef] = []
        tier_index, fallback = -1, False
        for claim in claims:
            ckey = claim_key(claim)
            for res in claim["status"]["allocation"].get("devices", {}).get("results") or []:
                request, _, sub = str(res.get("request", "")).partition("/")
                devices.append(
                    DeviceRef(
                        device=f"{res.get('driver')}/{res.get('pool')}/{res.get('device')}",
                        node=node,
                        model=names.device_model(res),
                        request=str(res.get("request", "")),
                    )
                )
                got = index.get((ckey, request, sub), -1)
                fallback = fallback or got > 0
                if primary is not None and tier_index < 0 and (ckey, request) == (primary.claim, primary.request):
                    tier_index = got
        # devices in use that this node can reach: claims allocated on it, plus claims whose
        # allocation is not pinned to one node (network-attached or multi-node pools)
        mine = set(uids)
        other = [
            c for group in (self._allocated_on.get(node, {}), self._allocated_on.get("", {}))
            for _, c in sorted(group.items()) if _meta(c).get("uid") not in mine
        ]
        node_obj = world.get("Node", "", node)
        tiers: list[TierSummary] = []
        if self.check_allocations and node_obj is not None:
            agreed = self.rerun.check(
                node=node_obj, claims=claims, slices=world.objects("ResourceSlice"),
                classes=world.objects("DeviceClass"), taint_rules=world.objects("DeviceTaintRule"), other_claims=other,
                generation=tuple(world.generation(k) for k in ("ResourceSlice", "DeviceClass", "DeviceTaintRule")),
            )
            self.agreements.append(agreed)
            message = agreed.summary()
            labels = {t.path: t.label for rt in rts for t in rt.tiers}
            tiers = tier_summaries(agreed.evidence, node, labels, multi_claim=len(claims) > 1)
        else:
            message = "allocator not run: node not observed" if self.check_allocations else ""
        bound = scheduled_at(pod)
        created = str(_meta(pod).get("creationTimestamp", ""))
        label = (_meta(claims[0]).get("labels") or {}).get(TEMPLATE_VERSION_LABEL, "")
        return DecisionRecord(
            **self._base(pod, key, attempt, world),
            time=bound or self.clock(),
            claims=[str(_meta(c).get("name", "")) for c in claims],
            claim_uids=uids,
            preference=preference,
            outcome=Outcome.ALLOCATED.value,
            node=node,
            devices=devices,
            tier_index=tier_index,
            preferred_model=preference[0] if preference else "",
            allocated_model="|".join(sorted({d.model for d in devices})),
            fallback=fallback,
            tiers=tiers,
            wait_ms=_ms_between(created, bound) if bound else 0,
            track=Track.DRA.value,
            template_version=str(label),
            message=message,
            input_digest=digest({"claims": [c.get("spec") for c in claims], "node": node}),
        )

    def _device_plugin_record(self, pod: Mapping[str, Any], node: str, world: EventLog) -> DecisionRecord:
        attempt = 0
        self.names.follow(world)
        model = self.names.device_plugin_model(world.get("Node", "", node))
        count = gpu_limit(pod)
        bound = scheduled_at(pod)
        created = str(_meta(pod).get("creationTimestamp", ""))
        return DecisionRecord(
            **self._base(pod, str(_meta(pod).get("uid", "")), attempt, world),
            time=bound or self.clock(),
            claims=[],
            claim_uids=[],
            # as the engine's device-plugin records: one "tier", the resource, naming no model
            preference=[DEVICE_PLUGIN_RESOURCE],
            outcome=Outcome.ALLOCATED.value,
            node=node,
            # the device plugin does not say which GPUs it handed out, only how many on which node
            devices=[DeviceRef(device=f"{DEVICE_PLUGIN_RESOURCE}/{node}/{i}", node=node, model=model, request=DEVICE_PLUGIN_RESOURCE) for i in range(count)],
            allocated_model=model,
            wait_ms=_ms_between(created, bound) if bound else 0,
            track=Track.DEVICE_PLUGIN.value,
            template_version=str((_meta(pod).get("labels") or {}).get(TEMPLATE_VERSION_LABEL, "")),
            input_digest=digest({"pod": pod.get("spec"), "node": node}),
        )

    def _index_allocation(self, key: tuple[str, str], claim: dict[str, Any] | None) -> None:
        old = self._claim_node.pop(key, None)
        if old is not None:
            self._allocated_on.get(old, {}).pop(key, None)
        allocated = allocation(claim)
        if claim is None or not allocated:
            return
        node = pinned_node(allocated.get("nodeSelector"))
        self._allocated_on.setdefault(node, {})[key] = claim
        self._claim_node[key] = node

    # -- failures -------------------------------------------------------------------------------
    def _event(self, event: Mapping[str, Any], world: EventLog) -> list[DecisionRecord]:
        involved = event.get("involvedObject") or {}
        if event.get("reason") != "FailedScheduling" or involved.get("kind") != "Pod":
            return []
        ns, name, uid = involved.get("namespace", ""), involved.get("name", ""), involved.get("uid", "")
        # by uid when the event says it: events outlive their pod, and a pod recreated under the
        # same name must not inherit its predecessor's failures
        pod = self._pods_by_uid.get((ns, str(uid))) if uid else self._pods.get((ns, name))
        if pod is None:
            self._wait((ns, name), event)
            return []
        is_dra = bool((pod.get("spec") or {}).get("resourceClaims"))
        if not is_dra and gpu_limit(pod) == 0:
            return []  # not a GPU pod: not a decision this audit covers
        claims = [self._claims.get((ns, n)) for n in (pod_claim_names(pod) or [])] if is_dra else []
        if is_dra and (not claims or any(c is None for c in claims)):
            # the scheduler only tries pods whose claims exist: wait until we have seen them, so
            # the record does not depend on which reflector delivered first
            self._wait((ns, name), event)
            return []
        count = int(event.get("count") or (event.get("series") or {}).get("count") or 1)
        pod_key = (ns, str(_meta(pod).get("uid", "")))
        seen = self._failures.get(pod_key, 0)
        if count <= seen:
            return []
        self._failures[pod_key] = count
        claims_ok = [c for c in claims if c is not None]
        uids = [str(_meta(c).get("uid", "")) for c in claims_ok]
        message = str(event.get("message", ""))
        # the last occurrence: lastTimestamp for core/v1 events, series.lastObservedTime for the
        # events.k8s.io/v1 events kube-scheduler writes (their eventTime is the first occurrence)
        when = str(event.get("lastTimestamp") or (event.get("series") or {}).get("lastObservedTime")
                   or event.get("eventTime") or self.clock())
        label_src = claims_ok[0] if claims_ok else pod
        self.names.follow(world)
        first = self.names.claim_tiers(claims_ok[0]) if claims_ok else []
        preference = [t.label for t in first[0].tiers] if first else ([] if is_dra else [DEVICE_PLUGIN_RESOURCE])
        record = DecisionRecord(
            **self._base(pod, str(_meta(pod).get("uid", "")), count, world),
            time=when,
            claims=[str(_meta(c).get("name", "")) for c in claims_ok],
            claim_uids=uids,
            preference=preference,
            # a device-plugin pod prefers no model (what it asked for is read from the world)
            preferred_model=preference[0] if is_dra and preference else "",
            outcome=Outcome.UNSCHEDULABLE.value,
            retry_class=RetryClass.UNSCHEDULABLE.value,
            wait_ms=_ms_between(str(_meta(pod).get("creationTimestamp", "")), when),
            track=(Track.DRA if is_dra else Track.DEVICE_PLUGIN).value,
            template_version=str((_meta(label_src).get("labels") or {}).get(TEMPLATE_VERSION_LABEL, "")),
            message=message,
            # only what the failed attempt asked for: the pod's later binding must not change it
            input_digest=digest({
                "event": message, "claims": [c.get("spec") for c in claims_ok],
                "pod": _meta(pod).get("uid", ""), "gpus": gpu_limit(pod),
            }),
        )
        return self._emit(record)


MAX_EXEMPLARS = 3


def tier_summaries(evidence: list[Any], node: str, labels: Mapping[str, str], *,
                   multi_claim: bool) -> list[TierSummary]:
    """Per request/subrequest: the re-run's verdicts on the bound node as counts per reason and
    a few exemplars (the selected device first, then the first device of each other reason),
    with the tier's models as the engine labels them (``labels``: by ``Tier.path``, the claim's
    ``<namespace>/<name>`` and the evidence's request)."""
    out: list[TierSummary] = []
    for ev in evidence:
        request = f"{ev.claim.rsplit('/', 1)[-1]}/{ev.request}" if multi_claim else ev.request
        reasons: dict[str, int] = {}
        for v in ev.verdicts:
            reasons[v.reason] = reasons.get(v.reason, 0) + 1
        ordered = sorted(ev.verdicts, key=lambda v: v.reason != "selected")
        exemplars: list[Exemplar] = []
        seen: set[str] = set()
        for v in ordered:
            if v.reason not in seen and len(exemplars) < MAX_EXEMPLARS:
                seen.add(v.reason)
                exemplars.append(Exemplar(device=v.device, node=node, reason=v.reason, detail=v.detail_dict()))
        out.append(
            TierSummary(
                index=ev.subrequest_index,
                request=request,
                model=labels.get(f"{ev.claim}/{ev.request}", NO_MODEL),
                considered=len(ev.verdicts),
                reasons=dict(sorted(reasons.items())),
                exemplars=exemplars,
                nodes_evaluated=1,
            )
        )
    return out


def pinned_node(selector: Mapping[str, Any] | None) -> str:
    """The node an allocation's node selector pins it to (``matchFields metadata.name In [n]``,
    as the scheduler writes for node-local devices), or "" when it is not pinned to one node."""
    terms = (selector or {}).get("nodeSelectorTerms") or []
    if len(terms) != 1 or terms[0].get("matchExpressions"):
        return ""
    fields = terms[0].get("matchFields") or []
    if len(fields) == 1:
        f = fields[0]
        if f.get("key") == "metadata.name" and f.get("operator") == "In" and len(f.get("values") or []) == 1:
            return str(f["values"][0])
    return ""


class _Recent:
    """The last state seen per object key, forgetting the least recently seen beyond ``size``."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, str], dict[str, Any]] = OrderedDict()

    def put(self, key: tuple[str, str], obj: dict[str, Any]) -> None:
        self._items[key] = obj
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def get(self, key: tuple[str, str]) -> dict[str, Any] | None:
        return self._items.get(key)
