"""The cluster loop: what happens around decisions, one instant at a time.

The simulator (``ingest/simulate/loop.py``) and counterfactual replay
(``audit/replay/counterfactual.py``) both run this one loop, so the same world and the same
policy give the same decisions whichever of them drives it. At each instant the timed actions due
then run — the loop's own (a job finishing, a bind retry coming due, a wake-up) and the driver's
(arrivals, disruptions, recorded world events) — then one scheduling pass attempts the pending
pods in the queue order (``audit.scheduler.pending``). An attempt is ``decide``, the driver's
chance to change the world between filter and bind (``before_bind``, where real clusters race),
then ``bind``. A placed pod runs for the driver's ``duration_ms``; a failed bind backs off and
retries; a terminal failure fails the pod (phase ``Failed``, then deleted with its claims); node
loss fails the pods running there. What is left unplaced waits in its queue for a change that
may help it (``engine.may_place``), in either queueing mode: a decision nothing could change is not
made again. A held head of a strict queue is also decided again when its hold for its preferred
model is due (an adaptive ``recheck_after_ms``, the end of a ``wait-for-preferred`` wait) or its
tenant may now make it a reservation, as its tenant's whole line waits on it.

Reservations (``audit.scheduler.reservations``): a decision that reserves devices for a pod
returns the Reservation object, which the loop writes as a world event right after the record;
the loop deletes it when the pod binds, fails or is deleted, then wakes the queues (the held
devices are free again). Each pod gets a ``reserve`` action when it has waited ``reserveAfter``:
if its tenant may hold another reservation, the pod is tried at once (a parked pod would
otherwise wait for a change); when a reservation ends, the oldest eligible pod of each tenant with
a free reservation slot is tried the same way, and so, at every wake with best-effort queueing, is
each tenant's oldest eligible pod whose reservation no decision has answered (its tenant could
not reserve when it was asked).

Reclaim (``audit.scheduler.reclaim``): a decision with outcome ``preempted`` names running pods
to evict. The loop evicts them as a cluster does — the pod gets a ``DisruptionTarget`` condition
(reason ``PreemptionByScheduler``) and phase ``Failed``, then it and its claims are deleted, which
frees their devices — tells the driver (``on_preempted``, before the pod goes), then tries the
preemptor again at once, so no other pod takes the devices reclaimed for it. With reclaim on, a
parked pod also goes back to its queue on a wake when ``engine.may_reclaim`` allows it.

Fair-share deferral (``audit.scheduler.fairshare``): a pod deferred because its tenant holds its
share while another tenant below its own waits stays parked through wakes that leave it deferred,
and goes back to its queue as soon as the deferral lifts — also when that comes from a placement or
a pod leaving, which free no devices and so wake nothing else.

A driver subclasses ``ClusterLoop`` and supplies ``apply`` (fold an event into the world and log
it), ``record``, ``duration_ms`` and ``on_action`` for its own timed actions. Pure: no I/O, no
clock; any randomness belongs to the driver.
"""

from __future__ import annotations

import functools
import heapq
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from audit.canonical import digest
from audit.events import EventType, WorldEvent
from audit.records import DecisionRecord, Outcome, RetryClass
from audit.scheduler import engine, reclaim, reservations
from audit.scheduler.adaptive import forget_pod
from audit.scheduler.attempt import forget_claim_entries
from audit.scheduler.fairshare import fair_share_blocker
from audit.scheduler.nodealloc import forget_claims
from audit.scheduler.pending import PendingQueues, follow_up
from audit.scheduler.sole_choice import has_no_other_choice
from audit.timestamps import format_time_ms
from audit.world import World


def _goes_first(world: World, key: str) -> bool:
    """Whether the pod goes ahead of its tenant's flexible pods (``spec.queueing.soleChoiceFirst``),
    read when it joins its queue."""
    return world.policy.sole_choice_first and has_no_other_choice(world, key)


# The loop's own actions; any other kind is the driver's.
OWN_ACTIONS = ("finish", "retry", "wake", "reserve", "due")
# Failures that hold for every pod of the same shape until capacity grows (a fair-share deferral
# does not: another tenant's placement in the same pass may lift it).
UNFIT_CLASSES = frozenset({RetryClass.UNSCHEDULABLE.value, RetryClass.QUOTA.value})
# enum values read once (``.value`` is a property call), for what every pass and removal writes
_ALLOCATED = Outcome.ALLOCATED.value
_DELETE = EventType.DELETE.value


@dataclass
class PodState:
    """What the loop knows of a pod it manages: attempts made (every pass that tried it), bind
    failures (what the retry budget counts), where it runs (empty while pending)."""

    attempts: int = 0
    node: str = ""
    device_plugin: bool = False
    bind_failures: int = 0
    shape: tuple[str, str, str] | None = None  # (policy digest, tenant, spec digest): ``ClusterLoop._shape``
    # whether its last decision answered its reservation (``reservations.settled``)
    reserve_settled: bool = False


class ClusterLoop:
    """One cluster's scheduling loop over simulated time; see the module docstring."""

    # Added to the order of the loop's own timed actions: a driver whose world events are ordered
    # by seq sets it high so its own actions sort after the world's events of the same instant.
    own_order_base = 0

    def __init__(self, world: World, now_ms: int) -> None:
        self.world = world
        self.now = now_ms
        self.pods: dict[str, PodState] = {}
        # a function of the world alone: a bound method here would make the loop a reference cycle
        self.pending = PendingQueues(first=functools.partial(_goes_first, world))
        self._heap: list[tuple[int, int, str, Any]] = []  # (time, order, action, data)
        # actions scheduled ahead in (time, order) order (``schedule_in_order``): taken from the
        # front, merged with the heap by (time, order)
        self._ahead: deque[tuple[int, int, str, Any]] = deque()
        self._order = 0
        self._forced: set[str] = set()  # pods to try in the next pass whatever may_place says
        # tenants with pods parked because ``engine.fair_share_deferred`` held them back
        self._deferred: set[str] = set()

    # ---- what a driver supplies ---------------------------------------------------------------

    def apply(self, ev: WorldEvent) -> None:
        """Fold ``ev`` into the world and log it."""
        raise NotImplementedError

    def record(self, rec: DecisionRecord) -> None:
        raise NotImplementedError

    def duration_ms(self, key: str) -> int | None:
        """How long the pod runs once placed; None when unknown (it then holds its devices)."""
        raise NotImplementedError

    def on_action(self, kind: str, data: Any) -> None:
        raise NotImplementedError(kind)

    def before_bind(self, key: str, attempt: int, decision: engine.Decision) -> None:
        """Between filter and bind: where a driver lets the world change under the proposal."""

    def after_pass(self) -> None:
        """After the instant's scheduling pass."""

    def on_placed(self, key: str, rec: DecisionRecord) -> None:
        """A pod was bound (its allocation events are applied)."""

    def on_finished(self, key: str) -> None:
        """A placed pod ran to its end and is gone."""

    def on_failed(self, key: str) -> None:
        """A pod failed for good and is gone."""

    def on_preempted(self, key: str) -> None:
        """A running pod is being evicted by a reclaim; it and its claims are deleted right after."""

    # ---- timed actions ------------------------------------------------------------------------

    def push(self, at: int, order: int, kind: str, data: Any) -> None:
        heapq.heappush(self._heap, (at, order, kind, data))

    def schedule(self, at: int, kind: str, data: Any = None) -> None:
        self._order += 1
        self.push(at, self.own_order_base + self._order, kind, data)

    def schedule_in_order(self, actions: Iterable[tuple[int, str, Any]]) -> None:
        """``schedule`` each ``(time, kind, data)`` in turn. A workload's arrivals are known ahead
        and come in time order: those wait in a plain queue instead of the heap, so the heap holds
        only what the run adds (finishes, retries, wakes) and each pop walks a shallower tree.
        Actions run in exactly the order ``schedule`` gives them, (time, order); orders are never
        shared, so comparing two entries never reaches their kinds and data."""
        ahead = self._ahead
        for at, kind, data in actions:
            self._order += 1
            entry = (at, self.own_order_base + self._order, kind, data)
            if ahead and at < ahead[-1][0]:
                heapq.heappush(self._heap, entry)  # out of time order: the heap keeps it in place
            else:
                ahead.append(entry)

    def _first(self) -> tuple[int, int, str, Any] | None:
        """The next timed action, from the heap or the queue ahead, without taking it."""
        heap, ahead = self._heap, self._ahead
        if ahead and (not heap or ahead[0] < heap[0]):
            return ahead[0]
        return heap[0] if heap else None

    def due_now(self) -> tuple[str, Any] | None:
        """The next action of the current instant, if any (taken off the heap or the queue ahead)."""
        heap, ahead = self._heap, self._ahead
        if ahead and (not heap or ahead[0] < heap[0]):
            if ahead[0][0] == self.now:
                _, _, kind, data = ahead.popleft()
                return kind, data
            return None
        if heap and heap[0][0] == self.now:
            _, _, kind, data = heapq.heappop(heap)
            return kind, data
        return None

    def peek_now(self) -> tuple[str, Any] | None:
        """The next action of the current instant without taking it."""
        first = self._first()
        if first is not None and first[0] == self.now:
            return first[2], first[3]
        return None

    def run_until(self, end_ms: int) -> None:
        """Every instant before ``end_ms``: its actions, then a scheduling pass."""
        while (first := self._first()) is not None and first[0] < end_ms:
            self.now = first[0]
            while (due := self.due_now()) is not None:
                self.act(*due)
            self.schedule_pass()
            self.after_pass()

    def act(self, kind: str, data: Any) -> None:
        if kind == "finish":
            st = self.pods.get(data)
            if st is not None and st.node:
                self.remove(data)
                self.on_finished(data)
                self.wake()
        elif kind == "retry":
            if data in self.pods:
                self.enqueue(data, self.world.pending.get(data, self.now))
        elif kind == "wake":
            if data is not None:
                self._recheck(*data)
            self.wake()
        elif kind == "reserve":
            key, armed_under = data
            if armed_under == self.world.policy.digest:  # else the policy in force armed its own
                self.try_to_reserve(key)
        elif kind == "due":
            key, armed_under = data
            st = self.pods.get(key)
            if armed_under == self.world.policy.digest and st is not None and key in self.world.pending:
                self._recheck(key, st.attempts)
                self.wake()
        else:
            self.on_action(kind, data)

    # ---- pods ---------------------------------------------------------------------------------

    def emit(self, kind: str, namespace: str, name: str, payload: dict[str, Any] | None,
             type_: str = EventType.UPSERT.value) -> None:
        """An event of the loop's own (or the driver's) at the current instant."""
        self.apply(WorldEvent(self.world.cluster, self.world.seq + 1, format_time_ms(self.now), type_, kind,
                              namespace, name, payload or {}))

    def enqueue(self, key: str, created: int) -> None:
        self.pending.add(self.world.policy.tenant_for(key.split("/", 1)[0]), created, key)

    def manage(self, key: str, device_plugin: bool, created: int) -> None:
        """A new pod to schedule."""
        self.pods[key] = PodState(device_plugin=device_plugin)
        self.enqueue(key, created)
        self.arm(key, created)

    def forget(self, key: str) -> None:
        """The pod was deleted by someone else (a recorded event): stop scheduling it."""
        del self.pods[key]
        self.pending.discard(key)
        self._forced.discard(key)
        self.release(key)

    # ---- reservations -------------------------------------------------------------------------

    def arm(self, key: str, created: int, activation: bool = False) -> None:
        """A ``reserve`` action when the pod will have waited ``reserveAfter`` (not in the past:
        a window's replay starts after the actions before it happened), under the policy in
        force; an action armed under another policy does nothing. At a policy's ``activation`` a
        pod that has already waited that long is tried now."""
        policy = self.world.policy
        after = policy.reserve_after_ms
        if after is not None and (activation or created + after >= self.now):
            self.schedule(max(created + after, self.now), "reserve", (key, policy.digest))

    def rearm(self) -> None:
        """A policy came in force: each pending pod's deadlines are the new policy's. The end of
        its hold for the preferred model (``engine.hold_deadline_ms``) becomes a ``due`` wake, and
        the time it may reserve a ``reserve`` action (``arm``); both are marked with the policy, so
        those the pod's earlier decisions and policies armed do nothing now. A window's replay
        restores the wakes of the last activation before it (``audit.replay.history.activation_dues``)."""
        policy = self.world.policy
        for key, created in sorted(self.world.pending.items()):
            st = self.pods.get(key)
            if st is None or st.node:
                continue
            self.arm(key, created, activation=True)
            end = engine.hold_deadline_ms(policy, created)
            if end is not None and end > self.now:
                self.schedule(end, "due", (key, policy.digest))

    def try_to_reserve(self, key: str) -> None:
        """Try a pending pod now if it has waited ``reserveAfter``, holds no reservation and its
        tenant may make another (``reservations.tenant_cause``): its decision makes the
        reservation, or says why it could not."""
        world, policy = self.world, self.world.policy
        st = self.pods.get(key)
        created = world.pending.get(key)
        if (st is None or st.node or created is None or key in world.reserved_node or key in self._forced
                or not reservations.eligible(policy, self.now - created)):
            return
        tenant = policy.tenant_for(key.split("/", 1)[0])
        if reservations.tenant_cause(world, policy, tenant, self.now):
            return
        if policy.queueing_mode == "strict":
            self._force_head(tenant, key)
            return
        queued = any(k == key for _, k in self.pending.queues.get(tenant) or [])
        if not queued:
            parked = any(k == key for (t, _), waiting in self.pending.parked.items() if t == tenant for _, k in waiting)
            if not parked:
                return  # waiting for a bind retry, which tries it anyway
            self.pending.discard(key)
            self.enqueue(key, created)
        self._forced.add(key)

    def _may_reserve(self, tenant: str, key: str) -> bool:
        """Strict queueing: whether the head, pending ``reserveAfter`` and holding no reservation,
        may make one now (``reservations.tenant_cause``). Its tenant's share moves with placements
        and releases anywhere and with time, none of which need wake it, so the head is decided
        again at the first wake at which its tenant may reserve. (A best-effort pod is tried for a
        reservation by its ``reserve`` action and when a reservation ends, ``release``.)"""
        world, policy = self.world, self.world.policy
        created = world.pending.get(key)
        return (created is not None and key not in world.reserved_node
                and reservations.eligible(policy, self.now - created)
                and not reservations.tenant_cause(world, policy, tenant, self.now))

    def _force_head(self, tenant: str, key: str) -> None:
        """Strict queueing: try the pod in the next pass if it is its tenant's head (only the head
        may be tried), whatever ``may_place`` says."""
        queue = self.pending.queues.get(tenant) or []
        if queue and queue[0][1] == key:
            self.pending.blocked.discard(tenant)
            self._forced.add(key)

    def _recheck(self, key: str, attempts: int) -> None:
        """A wake the pod's decision asked for (``FollowUp.wakes_at_ms``: its adaptive hold's
        ``recheck_after_ms`` or ``maxWait``, its wait-for-preferred wait running out). With strict
        queueing the head is decided again then if that decision is still its last: the tenant's
        whole line waits on the hold, which must end when it is due, not at the next release that
        lets ``may_place`` through. (A best-effort pod waits alone: the wake asks ``may_place`` of
        it as of every parked pod.)"""
        st = self.pods.get(key)
        if (self.world.policy.queueing_mode == "strict" and st is not None and not st.node
                and st.attempts == attempts and key in self.world.pending):
            self._force_head(self.world.policy.tenant_for(key.split("/", 1)[0]), key)

    def release(self, key: str) -> None:
        """The pod's reservation, if any, ends: its object goes, held devices are free again, and
        tenants with a free reservation slot try their oldest eligible pod."""
        ns, name = key.split("/", 1)
        if self.world.get("Reservation", ns, name) is None:
            return
        self.emit("Reservation", ns, name, None, _DELETE)
        self.wake()
        policy = self.world.policy
        if policy.reserve_after_ms is None:
            return
        for _, order in sorted(self.world.pending_order.items()):
            for created, other in order:
                if self.now - created < policy.reserve_after_ms:
                    break
                if other in self.pods and other not in self.world.reserved_node:
                    self.try_to_reserve(other)
                    break

    def remove(self, key: str) -> None:
        """The pod goes, and with it the claims generated for it (``status.resourceClaimStatuses``)."""
        ns, name = key.split("/", 1)
        pod = self.world.get("Pod", ns, name) or {}
        claims = [str(s.get("resourceClaimName", ""))
                  for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []]
        del self.pods[key]
        self._forced.discard(key)
        self.release(key)
        self.emit("Pod", ns, name, None, _DELETE)
        gone = []
        for claim in claims:
            obj = self.world.get("ResourceClaim", ns, claim) if claim else None
            if obj is not None:
                gone.append(obj)
                self.emit("ResourceClaim", ns, claim, None, _DELETE)
        forget_claims(self.world, gone)
        forget_claim_entries(self.world, gone)
        forget_pod(self.world, key)
        self._reopen()

    def fail(self, key: str) -> None:
        ns, name = key.split("/", 1)
        pod = self.world.get("Pod", ns, name)
        if pod is not None:
            self.emit("Pod", ns, name, {**pod, "status": {**(pod.get("status") or {}), "phase": "Failed"}})
        self.on_failed(key)
        self.remove(key)

    def preempt(self, key: str, preemptor: str) -> None:
        """Evict a running pod for ``preemptor``: its disruption condition and phase, then it goes."""
        ns, name = key.split("/", 1)
        pod = self.world.get("Pod", ns, name)
        if pod is None or key not in self.pods:
            return
        status = dict(pod.get("status") or {})
        owed = "fair share" if reclaim.fair_share(self.world.policy) else "nominal quota"
        status["conditions"] = [*(status.get("conditions") or []), {
            "type": reclaim.DISRUPTION_CONDITION, "status": "True", "reason": reclaim.DISRUPTION_REASON,
            "message": f"preempted to reclaim {owed} for pod {preemptor}",
            "lastTransitionTime": format_time_ms(self.now)}]
        status["phase"] = "Failed"
        self.emit("Pod", ns, name, {**pod, "status": status})
        self.on_preempted(key)
        self.remove(key)

    def fail_running_on(self, node: str) -> None:
        """Node loss: the pods running on ``node`` fail, in pod key order."""
        for key in sorted(key for key, st in self.pods.items() if st.node == node):
            self.fail(key)

    # ---- the scheduling pass ------------------------------------------------------------------

    def schedule_pass(self) -> None:
        """Attempt pending pods in the queue order until every one left waits for a change.

        A pod that already failed is tried again only if ``engine.may_place`` allows it (or it is
        forced: a reservation to make, a strict head's hold due; or, a strict head, it may make a
        reservation now, ``_may_reserve``), whatever the queueing mode: a decision it cannot
        change would only be written again. With best-effort queueing, also only if nothing of its
        shape (tenant, pod spec, claim specs, whether it still holds out for its preferred model)
        was found unplaceable since the last change: within a pass capacity only shrinks, so such
        a try could only fail again. Skipping writes nothing and changes nothing, so once a shape
        is found unfit the tenant's queued pods of it are parked at once (``_park_skipped``). With
        strict queueing a skipped head goes back to the head of its queue and holds its tenant, as
        a failed attempt would have left it, so the tenant's younger pods still wait behind it
        (Kueue's StrictFIFO) and a held head writes one record per change that could help it, not
        one per wake. A pod's first attempt is always made, so every pending pod that has reached
        its turn has a record saying why it waits.
        """
        self.pending.unfit.clear()
        while (picked := self.pending.pop_next(self.world, self.world.policy, self.now)) is not None:
            tenant, key = picked
            policy = self.world.policy
            tried = self.pods[key].attempts > 0 and key not in self._forced
            if policy.queueing_mode == "strict":
                if tried and not self._may_place(key) and not self._may_reserve(tenant, key):
                    self._wait(tenant, key)
                else:
                    self.attempt(key, tenant)
                continue
            if tried:
                shape = self._shape(key)
                if shape in self.pending.unfit or not self._may_place(key):
                    self.pending.unfit.add(shape)
                    self._park(tenant, key, shape)
                    self._park_skipped(tenant)
                    continue
            rec = self.attempt(key, tenant)
            if rec.outcome != _ALLOCATED and rec.retry_class in UNFIT_CLASSES and key in self.pods:
                self.pending.unfit.add(self._shape(key))
                if policy.fallback_mode != "adaptive":  # (see ``_park_skipped``)
                    self._park_skipped(tenant)

    def _park_skipped(self, tenant: str) -> None:
        """Park now the tenant's queued pods this pass would skip when their turn came: tried
        before, not forced, of a shape found unfit. Parking one now or when its turn comes is the
        same: within a pass capacity only shrinks, and a wake in between (a reservation ending, a
        preemption) asks ``_admit`` about it as its turn would have asked ``_may_place``. One walk
        of the queue costs a shape check per pod, where parking each at the head cost two and a
        list shift; under contention a release wakes hundreds of parked pods of a few shapes, and
        most of them go straight back.

        Only while a pod's shape cannot change within the pass: an adaptive hold is read from the
        world as it is when the pod's turn comes, so there only the pods at the head of the queue
        right after a skip are parked, the world unchanged since."""
        queue = self.pending.queues.get(tenant)
        if not queue:
            return
        unfit, forced, pods = self.pending.unfit, self._forced, self.pods
        if self.world.policy.fallback_mode == "adaptive":
            while queue and pods[queue[0][1]].attempts > 0 and queue[0][1] not in forced \
                    and self._shape(queue[0][1]) in unfit:
                self._park(tenant, queue.pop(0)[1])
            return
        kept = []
        for item in queue:
            key = item[1]
            if pods[key].attempts > 0 and key not in forced and (shape := self._shape(key)) in unfit:
                self._park(tenant, key, shape)
            else:
                kept.append(item)
        if len(kept) != len(queue):
            queue[:] = kept

    def _wait(self, tenant: str, key: str) -> None:
        """The unplaced pod waits for a change: at the head of its queue, holding its tenant
        (strict), or parked alone (best-effort)."""
        if self.world.policy.queueing_mode == "strict":
            self.pending.put_back(tenant, self.world.pending.get(key, self.now), key, strict=True)
        else:
            self._park(tenant, key)

    def _park(self, tenant: str, key: str, shape: tuple[object, ...] | None = None) -> None:
        """``shape``: the pod's ``_shape`` when the caller has just read it."""
        group = str((shape or self._shape(key))[1])  # the spec digest: a wake asks once per tenant and spec
        self.pending.put_back(tenant, self.world.pending.get(key, self.now), key, strict=False, group=group)

    def wake(self, everything: bool = False) -> None:
        """Capacity may have grown (a release, a repair, a taint removed, a deadline reached):
        parked pods whose shape ``engine.may_place`` now allows go back to their queues — the
        rest could only fail again, and every change that could help them wakes again — and
        waiting tenants of strict queues may be picked again (their heads are asked the same when
        their turn comes, ``schedule_pass``). A policy activation (``everything``) brings every
        pod back, as tenants and gates may differ, and moves their deadlines (``rearm``)."""
        if everything:
            self.pending.wake()
            self.rearm()
        else:
            self.pending.wake(self._admit, self._alike)
            self._reserve_when_tenant_may()

    def _reserve_when_tenant_may(self) -> None:
        """Best-effort queueing: each tenant's oldest pod past ``reserveAfter`` whose reservation
        no decision has answered (``reservations.settled``: none since it became eligible — its
        ``reserve`` action found its tenant may not reserve and decided nothing — or one that found
        so) is tried for one (``try_to_reserve``, which asks the tenant first). What lifts such a
        cause — the tenant's pods ending, its share decaying — comes with a wake or with time, and
        a parked pod would otherwise wait for a change that lets it fit. (A strict head is asked
        the same by ``_may_reserve``.)"""
        policy = self.world.policy
        after = policy.reserve_after_ms
        if after is None or policy.queueing_mode == "strict":
            return
        for _, order in sorted(self.world.pending_order.items()):
            for created, key in order:
                if self.now - created < after:
                    break
                st = self.pods.get(key)
                if st is None or st.node or st.reserve_settled or key in self.world.reserved_node:
                    continue
                self.try_to_reserve(key)
                break

    def _admit(self, tenant: str, pods: list[tuple[int, str]]) -> list[tuple[int, str]]:
        """Of parked pods of one tenant and spec, those ``may_place`` allows; one question per
        fallback hold and reservation owner (the only things besides the world that differ
        between them)."""
        policy = self.world.policy
        if policy.fallback_mode not in ("wait-for-preferred", "adaptive") and not self.world.reserved_node:
            return pods if self._may_place(pods[0][1]) else []
        answers: dict[object, bool] = {}
        out = []
        # adaptive: each pod holds while its wait is below its own threshold (the pods ahead of it
        # take the first releases, so pods of one group differ)
        adaptive = policy.fallback_mode == "adaptive"
        if adaptive:
            owner = any(key in self.world.reserved_node for _, key in pods)
            if not owner and not engine.may_place(self.world, pods[0][1], self.now, policy, hold=False):
                # nothing fits even with every tier open: no wait makes a difference (a pod that
                # owns a reservation may still fit on the devices held for it alone)
                return []
        for created, key in pods:
            shape: object = self._shape(key) if not adaptive else (
                self._adaptive_holding(key), key if key in self.world.reserved_node else "")
            ok = answers.get(shape)
            if ok is None:
                ok = answers[shape] = self._may_place(key)
            if ok:
                out.append((created, key))
        return out

    def _alike(self, tenant: str) -> bool:
        """Whether the tenant's parked pods of one spec stay alike until their turns, so that one
        of them in the queue may stand for the rest (``PendingQueues.unpark``): no fallback hold
        or reservation tells them apart, no pod is forced, and their place in line does not
        depend on when they join it (``soleChoiceFirst`` reads the inventory then). (Every pod
        parked here was tried before: a first attempt is always made.)"""
        policy = self.world.policy
        return (policy.queueing_mode == "best-effort" and policy.fallback_mode not in ("wait-for-preferred", "adaptive")
                and policy.reserve_after_ms is None and not policy.sole_choice_first
                and not self.world.reserved_node and not self._forced)

    def _adaptive_holding(self, key: str) -> bool:
        """Whether the pod holds out for its first choice now (a pod that has waited maxWait holds
        for no estimate: none is asked)."""
        wait = self.now - self.world.pending.get(key, self.now)
        policy = self.world.policy
        return wait < policy.fallback_max_wait_ms and wait < engine.holding_below(self.world, key, self.now, policy)

    def _may_place(self, key: str) -> bool:
        """``engine.may_place``, or with reclaim on ``engine.may_reclaim``: a pod that could preempt
        is worth a try whenever the world changed. Never while ``engine.fair_share_deferred``
        holds the pod back (its tenant is noted, for ``_reopen``)."""
        policy = self.world.policy
        if policy.defer_above_share and engine.fair_share_deferred(self.world, key, policy):
            self._deferred.add(policy.tenant_for(key.split("/", 1)[0]))
            return False
        return (engine.may_place(self.world, key, self.now, policy)
                or (policy.preemption and engine.may_reclaim(self.world, key, self.now, policy)))

    def _reopen(self) -> None:
        """Pods parked by a fair-share deferral go back to their queues once their tenant is no
        longer deferred (with strict queueing, the tenant's head is tried again). A wake on a
        release asks anyway; this is for what opens the deferral without freeing devices: a
        placement that lifts the waiting tenant to its share or leaves it nothing pending, a
        pending pod that goes."""
        if not self._deferred:
            return
        opened = {t for t in self._deferred if fair_share_blocker(self.world, self.world.policy, t) is None}
        if opened:
            self._deferred -= opened
            self.pending.blocked -= opened
            self.pending.unpark(lambda tenant, pods: self._admit(tenant, pods) if tenant in opened else [], self._alike)

    def _shape(self, key: str) -> tuple[object, ...]:
        """What decides whether the pod can be placed, besides the world: its tenant, pod spec and
        claim specs (fixed while it is pending, computed once), its fallback hold and whether it
        owns a reservation (it alone may use the devices held for it)."""
        st = self.pods[key]
        policy = self.world.policy
        if st.shape is None or st.shape[0] != policy.digest:
            ns, name = key.split("/", 1)
            pod = self.world.get("Pod", ns, name) or {}
            claims = [self.world.get("ResourceClaim", ns, str(c.get("resourceClaimName", "")))
                      for c in (pod.get("status") or {}).get("resourceClaimStatuses") or []]
            st.shape = (policy.digest, policy.tenant_for(ns),
                        digest({"pod": pod.get("spec"), "claims": [(c or {}).get("spec") for c in claims]}))
        owner = key if key in self.world.reserved_node else ""
        return (st.shape[1], st.shape[2], engine.holding_for_preferred(self.world, key, self.now, policy), owner)

    def attempt(self, key: str, tenant: str, reclaimed: bool = False) -> DecisionRecord:
        st = self.pods[key]
        st.attempts += 1
        self._forced.discard(key)
        d = engine.decide(self.world, key, st.attempts, self.now)
        if d.preempts:
            self.record(d.record)
            for victim in d.preempts:
                self.preempt(victim, key)
            self.wake()
            if not reclaimed:
                return self.attempt(key, tenant, reclaimed=True)
            # a second reclaim in a row: wait for a change like any other unplaced pod
            self._wait(tenant, key)
            return d.record
        if d.proposal is not None:
            self.before_bind(key, st.attempts, d)
            d = engine.bind(self.world, d, self.now, failures_before=st.bind_failures)
            if d.proposal is None:
                st.bind_failures += 1
        self.record(d.record)
        rec = d.record
        st.reserve_settled = reservations.settled(rec, self.world.policy)
        if d.reservation is not None and key in self.pods:
            ns, name = key.split("/", 1)
            self.emit("Reservation", ns, name, d.reservation)
        if d.events:
            # binding replaces the pod's pending claim objects: the caches may let go of them
            replaced = [old for ev in d.events if ev.object_kind == "ResourceClaim"
                        and (old := self.world.get("ResourceClaim", ev.namespace, ev.name)) is not None]
            for ev in d.events:
                self.apply(ev)
            forget_claims(self.world, replaced)
            forget_claim_entries(self.world, replaced)
            st.node = rec.node
            self.release(key)
            self._reopen()
            self.on_placed(key, rec)
            duration = self.duration_ms(key)
            if duration is not None:
                self.schedule(self.now + duration, "finish", key)
            return rec
        if key not in self.pods:
            return rec  # failed while binding (its node was lost)
        then = follow_up(rec, self.world.policy, self.now)
        if then.action == "retry":
            self.schedule(then.retry_at_ms, "retry", key)
        elif then.action == "fail":
            self.fail(key)
        else:
            # unschedulable, quota, fair share or waiting for the preferred model: wait for a change
            self._wait(tenant, key)
            if rec.retry_class == RetryClass.FAIR_SHARE.value:
                self._deferred.add(tenant)
            for at in then.wakes_at_ms:
                self.schedule(at, "wake", (key, st.attempts))
        return rec
