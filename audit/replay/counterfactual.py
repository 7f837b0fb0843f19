"""Counterfactual replay: the same arrivals and world events, decided under another policy.

Starting from the world at the window's start, the world's own events (``audit.replay.history``)
are re-applied at their times while the pods are scheduled again with the decision engine under
the given policy; the decisions' effects (binds, finishes, failures) are regenerated, so
decisions may diverge from the recorded ones and everything after follows from them. The given
policy is active for the whole window: every Policy activation in it carries that document.

The scheduling loop follows the cluster model the simulator records (ingest/simulate/loop.py) and
shares its queues (``audit.scheduler.pending``): after each instant one pass attempts pending pods
in the fairness order, one tenant's head at a time, FIFO within a tenant; a tenant whose head cannot be placed waits until
capacity may have changed (a finish, a taint removed, a node or slice added, a foreign claim
released, a policy activation); failed binds back off and retry; terminal failures fail the pod;
node loss fails the pods running there. At the window's start the scheduler's own state — pending
pods, retries due, tenants waiting for a change, attempts made — is recovered from the records and
events before it (``audit.replay.history.queue_state``). A job runs as long as it ran in the
recorded history;
jobs without a known running time (they failed or never ran) hold their devices to the window's
end. With the recorded policy this reproduces the recorded decisions; with another it shows
what that policy would have done. Pure: no clock, no randomness.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any

from audit.events import EventType, WorldEvent
from audit.policy import Policy, parse_policy
from audit.records import DecisionRecord
from audit.replay.history import QueueState, SplitHistory
from audit.scheduler import engine
from audit.scheduler.pending import PendingQueues, follow_up
from audit.timestamps import format_time_ms, parse_time_ms
from audit.world import World

_OWN = 1 << 62  # own actions sort after the world's events of the same instant


@dataclass
class QuotaViolation:
    time: str
    tenant: str
    model: str
    in_use: int
    limit: int


@dataclass
class CounterfactualRun:
    records: list[DecisionRecord]
    events: list[WorldEvent]  # the counterfactual world's log over the window
    world: World
    violations: list[QuotaViolation] = field(default_factory=list)
    unknown_durations: int = 0  # jobs that ran here without a recorded running time


@dataclass
class _Pod:
    attempts: int = 0
    node: str = ""
    device_plugin: bool = False


def quota_violations(world: World, policy: Policy, tenant: str, models: set[str], time: str) -> list[QuotaViolation]:
    """Models where the tenant now holds more than nominal + borrowing limit."""
    out = []
    for m in sorted(models):
        q = policy.quota(tenant, m)
        if q is not None and q.limit is not None and world.model_in_use(tenant, m) > q.limit:
            out.append(QuotaViolation(time, tenant, m, world.model_in_use(tenant, m), q.limit))
    return out


class Counterfactual:
    """One counterfactual run over a window; see the module docstring."""

    def __init__(self, world: World, history: SplitHistory, policy_doc: dict[str, Any], end_ms: int,
                 start: QueueState | None = None) -> None:
        self.world = world
        self.history = history
        self.policy_doc = policy_doc
        self.policy = parse_policy(policy_doc)
        self.end_ms = end_ms
        self.now = world.time_ms
        self.records: list[DecisionRecord] = []
        self.events: list[WorldEvent] = []
        self.violations: list[QuotaViolation] = []
        self.unknown_durations = 0
        self._heap: list[tuple[int, int, str, Any]] = []
        self._order = 0
        self.pods: dict[str, _Pod] = {}
        self.pending = PendingQueues()
        self._interference = {k: list(v) for k, v in history.interference.items()}
        self._adopt(start or QueueState())

    # ---- setup ----------------------------------------------------------------------------------

    def _adopt(self, start: QueueState) -> None:
        """Pods already in the world at the start: pending ones queue (or wait for their retry),
        running ones keep running; waiting tenants keep waiting."""
        if self.world.seq >= 0 and self.world.policy.digest != self.policy.digest:
            name = str(self.policy_doc.get("metadata", {}).get("name", "counterfactual"))
            self._emit(WorldEvent(self.world.cluster, self.world.seq + 1, self.world.time, EventType.UPSERT.value,
                                  "Policy", "", name, self.policy_doc))
        for key, pod in sorted(self.world.objects.get("Pod", {}).items()):
            if key not in self.history.managed_pods:
                continue
            node = (pod.get("spec") or {}).get("nodeName", "")
            st = self.pods[key] = _Pod(start.attempts.get(key, 0), node,
                                       not (pod.get("spec") or {}).get("resourceClaims"))
            if key in self.world.pending and key in start.retries:
                self._schedule(start.retries[key], "retry", key)
            elif key in self.world.pending:
                self._enqueue(key, self.world.pending[key])
            elif st.node:
                at = self.history.finished_at.get(key)
                if at is None:
                    self.unknown_durations += 1
                else:
                    self._schedule(at, "finish", key)
        self.pending.blocked = set(start.blocked)
        for at in start.wakes:
            self._schedule(at, "wake", None)
        for ev in self.history.external:
            self._push(_time(ev), ev.seq, "world", ev)
        for (key, _attempt), evs in sorted(self._interference.items()):
            self._push(_time(evs[0]), evs[0].seq, "late", (key, _attempt))

    def _push(self, at: int, order: int, kind: str, data: Any) -> None:
        heapq.heappush(self._heap, (at, order, kind, data))

    def _schedule(self, at: int, kind: str, data: Any) -> None:
        self._order += 1
        self._push(at, _OWN + self._order, kind, data)

    # ---- the world ------------------------------------------------------------------------------

    def _emit(self, ev: WorldEvent) -> None:
        ev = WorldEvent(ev.cluster, self.world.seq + 1, ev.time, ev.type, ev.object_kind, ev.namespace, ev.name,
                        self.policy_doc if ev.object_kind == "Policy" and ev.type == EventType.UPSERT.value
                        else ev.payload, ev.resource_version)
        self.world.apply(ev)
        self.events.append(ev)

    def _own(self, kind: str, namespace: str, name: str, payload: dict[str, Any] | None,
             type_: str = EventType.UPSERT.value) -> None:
        self._emit(WorldEvent(self.world.cluster, 0, format_time_ms(self.now), type_, kind, namespace, name,
                              payload or {}))

    def _world_events(self, events: list[WorldEvent]) -> None:
        """Apply the world's events with the reactions the cluster has to them."""
        pending = list(events)
        while pending:
            ev = pending.pop(0)
            if ev.object_kind == "Node" and ev.type == EventType.DELETE.value:
                self._emit(ev)
                self._lose(ev.name, pending)
                continue
            wakes = ((ev.object_kind == "DeviceTaintRule" and ev.type == EventType.DELETE.value)
                     or (ev.object_kind in ("Node", "ResourceSlice", "Policy") and ev.type == EventType.UPSERT.value)
                     or (ev.object_kind == "ResourceClaim" and ev.type == EventType.DELETE.value))
            created = (ev.object_kind == "Pod" and ev.type == EventType.UPSERT.value
                       and self.world.get("Pod", ev.namespace, ev.name) is None)
            self._emit(ev)
            if created:
                key = f"{ev.namespace}/{ev.name}"
                self.pods[key] = _Pod(device_plugin=not (ev.payload.get("spec") or {}).get("resourceClaims"))
                self._enqueue(key, self.now)
            if wakes:
                self.pending.wake()

    def _slice_of(self, ev: WorldEvent, node: str) -> bool:
        if ev.object_kind != "ResourceSlice" or ev.type != EventType.DELETE.value:
            return False
        sl = self.world.get("ResourceSlice", ev.namespace, ev.name)
        return sl is not None and (sl.get("spec") or {}).get("nodeName") == node

    def _lose(self, node: str, following: list[WorldEvent]) -> None:
        """Node loss: its slice goes with it (the next event), then the pods running there fail."""
        if following and self._slice_of(following[0], node):
            self._emit(following.pop(0))
        elif (self._heap and self._heap[0][0] == self.now and self._heap[0][2] == "world"
              and self._slice_of(self._heap[0][3], node)):
            self._emit(heapq.heappop(self._heap)[3])
        for key, st in sorted(self.pods.items()):
            if st.node == node:
                self._fail(key)

    # ---- pods ----------------------------------------------------------------------------------

    def _enqueue(self, key: str, created: int) -> None:
        self.pending.add(self.world.policy.tenant_for(key.split("/", 1)[0]), created, key)

    def _schedule_finish(self, key: str) -> None:
        duration = self.history.durations.get(key)
        if duration is None:
            self.unknown_durations += 1
            return
        self._schedule(self.now + duration, "finish", key)

    def _remove(self, key: str) -> None:
        """The pod goes, and with it the claims generated for it (``status.resourceClaimStatuses``)."""
        ns, name = key.split("/", 1)
        pod = self.world.get("Pod", ns, name) or {}
        claims = [str(s.get("resourceClaimName", "")) for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []]
        self.pods.pop(key)
        self._own("Pod", ns, name, None, EventType.DELETE.value)
        for claim in claims:
            if claim and self.world.get("ResourceClaim", ns, claim) is not None:
                self._own("ResourceClaim", ns, claim, None, EventType.DELETE.value)

    def _fail(self, key: str) -> None:
        ns, name = key.split("/", 1)
        pod = self.world.get("Pod", ns, name)
        if pod is not None:
            self._own("Pod", ns, name, {**pod, "status": {**(pod.get("status") or {}), "phase": "Failed"}})
        self._remove(key)

    # ---- the loop -------------------------------------------------------------------------------

    def run(self) -> CounterfactualRun:
        while self._heap and self._heap[0][0] < self.end_ms:
            self.now = self._heap[0][0]
            late: list[tuple[str, int]] = []
            while self._heap and self._heap[0][0] == self.now:
                _, _, kind, data = heapq.heappop(self._heap)
                if kind == "late":
                    late.append(data)
                else:
                    self._act(kind, data)
            self._pass()
            for attempt in late:
                # the attempt these events raced with did not happen here: they happen after the pass
                self._world_events(self._interference.pop(attempt, []))
        return CounterfactualRun(self.records, self.events, self.world, self.violations, self.unknown_durations)

    def _act(self, kind: str, data: Any) -> None:
        if kind == "world":
            self._world_events([data])
        elif kind == "finish":
            st = self.pods.get(data)
            if st is not None and st.node:
                self._remove(data)
                self.pending.wake()
        elif kind == "retry":
            if data in self.pods:
                self._enqueue(data, self.world.pending.get(data, self.now))
        elif kind == "wake":
            self.pending.wake()

    def _pass(self) -> None:
        while (picked := self.pending.pop_next(self.world, self.world.policy, self.now)) is not None:
            tenant, key = picked
            self._attempt(key, tenant)

    def _attempt(self, key: str, tenant: str) -> None:
        st = self.pods[key]
        st.attempts += 1
        d = engine.decide(self.world, key, st.attempts, self.now)
        if d.proposal is not None:
            self._world_events(self._interference.pop((key, st.attempts), []))
            d = engine.bind(self.world, d, self.now)
        self.records.append(d.record)
        rec = d.record
        if d.events:
            for ev in d.events:
                self._emit(ev)
            st.node = rec.node
            models = {dev.model for dev in rec.devices} or {rec.allocated_model}
            self.violations += quota_violations(self.world, self.world.policy, rec.tenant, models, rec.time)
            self._schedule_finish(key)
            return
        if key not in self.pods:
            return  # failed while binding (its node was lost)
        then = follow_up(rec, self.world.policy, self.now)
        if then.action == "retry":
            self._schedule(then.retry_at_ms, "retry", key)
        elif then.action == "fail":
            self._fail(key)
        else:
            self.pending.put_back(tenant, self.world.pending.get(key, self.now), key)
            if then.wake_at_ms is not None:
                self._schedule(then.wake_at_ms, "wake", None)


def _time(ev: WorldEvent) -> int:
    return parse_time_ms(ev.time)

