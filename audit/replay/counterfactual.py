"""Counterfactual replay: the same arrivals and world events, decided under another policy.

Starting from the world at the window's start, the world's own events (``audit.replay.history``)
are re-applied at their times while the pods are scheduled again with the decision engine under
the given policy; the decisions' effects (binds, finishes, failures) are regenerated, so
decisions may diverge from the recorded ones and everything after follows from them. The given
policy is active for the whole window: every Policy activation in it carries that document.

The scheduling loop is the one the simulator runs (``audit.scheduler.loop.ClusterLoop``): after
each instant one pass attempts pending pods in the queue order; what cannot be placed waits until
capacity may have changed (a finish, a taint removed, a node or slice added, a foreign claim
released, a policy activation); failed binds back off and retry; terminal failures fail the pod;
node loss fails the pods running there. This module feeds it the recorded world events, and the
events that raced with a recorded bind at the same point of the same attempt. At the window's
start the scheduler's own state — pending pods waiting for a change, retries due, attempts and
bind failures made — is recovered from the world and the records before it
(``audit.replay.history.queue_state``). A job runs as long as it ran in the recorded history;
jobs without a known running time (they failed or never ran) hold their devices to the window's
end. With the recorded policy this reproduces the recorded decisions; with another it shows
what that policy would have done. Pure: no clock, no randomness.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from audit.events import EventType, WorldEvent
from audit.policy import Policy, parse_policy
from audit.records import DecisionRecord
from audit.replay.history import QueueState, SplitHistory
from audit.scheduler import engine
from audit.scheduler.loop import ClusterLoop, PodState
from audit.timestamps import parse_time_ms
from audit.world import World


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


def quota_violations(world: World, policy: Policy, tenant: str, models: set[str], time: str) -> list[QuotaViolation]:
    """Models where the tenant now holds more than nominal + borrowing limit."""
    out = []
    for m in sorted(models):
        q = policy.quota(tenant, m)
        if q is not None and q.limit is not None and world.model_in_use(tenant, m) > q.limit:
            out.append(QuotaViolation(time, tenant, m, world.model_in_use(tenant, m), q.limit))
    return out


class Counterfactual(ClusterLoop):
    """One counterfactual run over a window; see the module docstring."""

    own_order_base = 1 << 62  # own actions sort after the world's events (ordered by seq) of an instant

    def __init__(self, world: World, history: SplitHistory, policy_doc: dict[str, Any], end_ms: int,
                 start: QueueState | None = None) -> None:
        super().__init__(world, world.time_ms)
        self.history = history
        self.policy_doc = policy_doc
        self.policy = parse_policy(policy_doc)
        self.end_ms = end_ms
        self.records: list[DecisionRecord] = []
        self.events: list[WorldEvent] = []
        self.violations: list[QuotaViolation] = []
        self.unknown_durations = 0
        self._interference = {k: list(v) for k, v in history.interference.items()}
        self._late: list[tuple[str, int]] = []
        self._adopt(start or QueueState())

    # ---- setup ----------------------------------------------------------------------------------

    def _adopt(self, start: QueueState) -> None:
        """Pods already in the world at the start: pending ones queue (or wait for their retry),
        running ones keep running; waiting tenants keep waiting."""
        # another policy than the one in force comes in force at the start, as a live activation
        activated = self.world.seq >= 0 and self.world.policy.digest != self.policy.digest
        if activated:
            name = str(self.policy_doc.get("metadata", {}).get("name", "counterfactual"))
            self.apply(WorldEvent(self.world.cluster, self.world.seq + 1, self.world.time, EventType.UPSERT.value,
                                  "Policy", "", name, self.policy_doc))
        running = []
        for key, pod in sorted(self.world.objects.get("Pod", {}).items()):
            if key not in self.history.managed_pods:
                continue
            node = (pod.get("spec") or {}).get("nodeName", "")
            st = self.pods[key] = PodState(start.attempts.get(key, 0), node,
                                           not (pod.get("spec") or {}).get("resourceClaims"),
                                           start.bind_failures.get(key, 0),
                                           reserve_settled=key in start.reserve_settled)
            if key in self.world.pending and key in start.retries:
                self.schedule(start.retries[key], "retry", key)
            elif key in self.world.pending:
                self.enqueue(key, self.world.pending[key])
            if key in self.world.pending:
                if not activated:
                    self.arm(key, self.world.pending[key])
            elif st.node:
                if key in self.history.finished_at:
                    running.append(key)
                else:
                    self.unknown_durations += 1
        # in the order the recorded run ended them (``finished_at`` keeps the log's order): pods
        # that end at one instant end in the order they were placed, whatever their names
        ended = {key: i for i, key in enumerate(self.history.finished_at)}
        for key in sorted(running, key=ended.__getitem__):
            self.schedule(self.history.finished_at[key], "finish", key)
        self.pending.park_all(strict=self.world.policy.queueing_mode == "strict",
                              group=lambda key: str(self._shape(key)[1]))
        for at, key, attempt in start.wakes:
            self.schedule(at, "wake", (key, attempt))
        if activated:
            self.rearm()
        else:
            for at, key, armed_under in start.dues:
                self.schedule(at, "due", (key, armed_under))
        for ev in self.history.external:
            self.push(parse_time_ms(ev.time), ev.seq, "world", ev)
        for (key, _attempt), evs in sorted(self._interference.items()):
            self.push(parse_time_ms(evs[0].time), evs[0].seq, "late", (key, _attempt))

    # ---- the world ------------------------------------------------------------------------------

    def apply(self, ev: WorldEvent) -> None:
        """Fold an event in at the next seq; a policy activation carries the counterfactual policy."""
        ev = WorldEvent(ev.cluster, self.world.seq + 1, ev.time, ev.type, ev.object_kind, ev.namespace, ev.name,
                        self.policy_doc if ev.object_kind == "Policy" and ev.type == EventType.UPSERT.value
                        else ev.payload, ev.resource_version)
        self.world.apply(ev)
        self.events.append(ev)

    def _world_events(self, events: list[WorldEvent]) -> None:
        """Apply the world's events with the reactions the cluster has to them."""
        pending = list(events)
        while pending:
            ev = pending.pop(0)
            if ev.object_kind == "Node" and ev.type == EventType.DELETE.value:
                self.apply(ev)
                self._lose(ev.name, pending)
                continue
            wakes = ((ev.object_kind == "DeviceTaintRule" and ev.type == EventType.DELETE.value)
                     or (ev.object_kind in ("Node", "ResourceSlice", "Policy") and ev.type == EventType.UPSERT.value)
                     or (ev.object_kind == "ResourceClaim" and ev.type == EventType.DELETE.value))
            created = (ev.object_kind == "Pod" and ev.type == EventType.UPSERT.value
                       and self.world.get("Pod", ev.namespace, ev.name) is None)
            deleted = (ev.object_kind == "Pod" and ev.type == EventType.DELETE.value
                       and f"{ev.namespace}/{ev.name}" in self.pods)
            self.apply(ev)
            if deleted:  # a recorded deletion of a pod this run schedules: it waits no more
                self.forget(f"{ev.namespace}/{ev.name}")
            if created:
                self.manage(f"{ev.namespace}/{ev.name}", not (ev.payload.get("spec") or {}).get("resourceClaims"),
                            self.now)
            if wakes:
                self.wake(everything=ev.object_kind == "Policy")

    def _slice_of(self, ev: WorldEvent, node: str) -> bool:
        if ev.object_kind != "ResourceSlice" or ev.type != EventType.DELETE.value:
            return False
        sl = self.world.get("ResourceSlice", ev.namespace, ev.name)
        return sl is not None and (sl.get("spec") or {}).get("nodeName") == node

    def _lose(self, node: str, following: list[WorldEvent]) -> None:
        """Node loss: its slice goes with it (the next event), then the pods running there fail."""
        if following and self._slice_of(following[0], node):
            self.apply(following.pop(0))
        else:
            nxt = self.peek_now()
            if nxt is not None and nxt[0] == "world" and self._slice_of(nxt[1], node):
                due = self.due_now()
                assert due is not None
                self.apply(due[1])
        self.fail_running_on(node)

    # ---- the loop's hooks -----------------------------------------------------------------------

    def run(self) -> CounterfactualRun:
        self.run_until(self.end_ms)
        return CounterfactualRun(self.records, self.events, self.world, self.violations, self.unknown_durations)

    def on_action(self, kind: str, data: Any) -> None:
        if kind == "world":
            self._world_events([data])
        elif kind == "late":
            self._late.append(data)
        else:
            raise ValueError(f"unknown action {kind!r}")

    def after_pass(self) -> None:
        late, self._late = self._late, []
        for attempt in late:
            # the attempt these events raced with did not happen here: they happen after the pass
            self._world_events(self._interference.pop(attempt, []))

    def before_bind(self, key: str, attempt: int, decision: engine.Decision) -> None:
        self._world_events(self._interference.pop((key, attempt), []))

    def record(self, rec: DecisionRecord) -> None:
        self.records.append(rec)

    def on_placed(self, key: str, rec: DecisionRecord) -> None:
        models = {dev.model for dev in rec.devices} or {rec.allocated_model}
        self.violations += quota_violations(self.world, self.world.policy, rec.tenant, models, rec.time)

    def duration_ms(self, key: str) -> int | None:
        duration = self.history.durations.get(key)
        if duration is None:
            self.unknown_durations += 1
        return duration
