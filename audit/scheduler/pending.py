"""Pending work between attempts: per-tenant queues, the fairness pick, and what follows an attempt.

The cluster loop (``audit.scheduler.loop``) keeps its pending pods here. Queues hold
``(created, pod key)`` in the tenant's line order: by creation, then by pod key, after the pods
with no other choice when the caller says which they are (``first``: the loop does under
``spec.queueing.soleChoiceFirst``, ``audit.scheduler.sole_choice``); each pick takes, among the tenants' first pods, the one first in the fairness order
(``audit.scheduler.queue``). What happens to a pod that could not be
placed depends on the policy's ``spec.queueing.mode``, as Kueue's two queueing strategies:

* ``best-effort`` (the default): the pod alone is parked until the world changes (a wake), and
  the tenant's later pods are still tried — a blocked head does not stop smaller pods that fit;
* ``strict``: the pod goes back to the head of its queue and the whole tenant waits for a wake.

Either way a pass never spins on the same pod: it is tried again only after a change that may
help it (the cluster loop asks ``engine.may_place``), or, held at the head of a strict queue for
its preferred model, when its hold is due.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass, field

from audit.policy import Policy
from audit.records import DecisionRecord, Outcome, RetryClass
from audit.scheduler.adaptive import has_recheck, hold_wakes_after_ms
from audit.scheduler.queue import order_key, tenant_share
from audit.world import World

# Failures found at bind time retry after their backoff; everything else waits for a change.
BIND_RETRY_CLASSES = frozenset({RetryClass.BINDING_CONFLICT.value, RetryClass.STALE_SLICE.value,
                                RetryClass.UNHEALTHY.value, RetryClass.NODE_LOST.value})


@dataclass(frozen=True)
class FollowUp:
    """What happens to a pod after an attempt that placed nothing.

    ``retry`` at ``retry_at_ms``; ``fail`` for good; or ``wait`` in its queue until the world
    changes, with ``wakes_at_ms`` when the end of a wait for the preferred model (an adaptive
    recheck, its ``maxWait``, a ``wait-for-preferred`` wait running out) wakes the queues by itself.
    """

    action: str
    retry_at_ms: int = 0
    wakes_at_ms: tuple[int, ...] = ()


def follow_up(record: DecisionRecord, policy: Policy, now_ms: int) -> FollowUp:
    if record.retry_class in BIND_RETRY_CLASSES and record.backoff_ms > 0:
        return FollowUp("retry", retry_at_ms=now_ms + record.backoff_ms)
    if record.retry_class == RetryClass.TERMINAL.value:
        return FollowUp("fail")
    if record.outcome == Outcome.DEFERRED.value and (record.retry_class == RetryClass.UNSCHEDULABLE.value
                                                     or has_recheck(record) or _quota_while_waiting(record, policy)):
        return FollowUp("wait", wakes_at_ms=tuple(now_ms + after for after in
                                                  hold_wakes_after_ms(record, policy.fallback_wait_ms)))
    return FollowUp("wait")


def _quota_while_waiting(record: DecisionRecord, policy: Policy) -> bool:
    """A pod deferred on quota while ``wait-for-preferred`` keeps its later tiers shut: they open
    when its wait runs out, which no release need coincide with."""
    return (record.retry_class == RetryClass.QUOTA.value and policy.fallback_mode == "wait-for-preferred"
            and record.wait_ms < policy.fallback_wait_ms and any(t.index > 0 for t in record.tiers))


@dataclass
class PendingQueues:
    queues: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    blocked: set[str] = field(default_factory=set)  # strict: tenants waiting for a change
    # best-effort: pods waiting, per (tenant, group) by creation — the group is the caller's (pods
    # of one shape, so by creation is their order in line)
    parked: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    # best-effort: pods a wake let through whose turn has not come, per (tenant, group) by
    # creation; the group's ``_lead`` stands in the queue for them (see ``unpark``)
    behind: dict[tuple[str, str], list[tuple[int, str]]] = field(default_factory=dict)
    _lead: dict[str, tuple[str, str]] = field(default_factory=dict)
    # groups holding pods ``park_all`` parked, which may never have been tried
    _untried: set[tuple[str, str]] = field(default_factory=set)
    # Pod shapes found unplaceable since the last change (see ``ClusterLoop.schedule_pass``).
    unfit: set[tuple[object, ...]] = field(default_factory=set)
    # Tenant shares for one (world seq, time, policy): a pass picks many pods between changes.
    _shares: dict[str, float] = field(default_factory=dict)
    _shares_at: tuple[int, int, str] = (-2, 0, "")
    # whether a pod goes ahead of the flexible pods of its tenant (``sole_choice``); read when the
    # pod joins a queue and kept while it is there, so a queue stays sorted
    first: Callable[[str], bool] | None = None
    _first: dict[str, bool] = field(default_factory=dict)

    def line_key(self, pod: tuple[int, str]) -> tuple[bool, int, str]:
        """A queued pod's place in its tenant's line: no other choice first, then age, then key."""
        return (not self._first.get(pod[1], False), pod[0], pod[1])

    def _joins(self, key: str) -> None:
        if self.first is not None:
            self._first[key] = self.first(key)

    def add(self, tenant: str, created: int, key: str) -> None:
        self._joins(key)
        bisect.insort(self.queues.setdefault(tenant, []), (created, key), key=self.line_key)

    def put_back(self, tenant: str, created: int, key: str, strict: bool, group: str = "") -> None:
        """A pod that could not be placed waits for a change: alone (best-effort), or at the head
        of its queue holding its whole tenant (strict)."""
        if strict:
            self._joins(key)
            self.queues[tenant].insert(0, (created, key))
            self.blocked.add(tenant)
        else:
            bisect.insort(self.parked.setdefault((tenant, group), []), (created, key))
            led = self._lead.pop(key, None)
            if led is not None:  # the pods it stood for wait with it, as they would have in the queue
                self._merge_parked(led, self.behind.pop(led, []))

    def _merge_parked(self, group: tuple[str, str], pods: list[tuple[int, str]]) -> None:
        """Add ``pods`` (by creation) to the group's parked ones, the shorter list into the longer."""
        mine = self.parked.get(group, [])
        longer, shorter = (pods, mine) if len(pods) >= len(mine) else (mine, pods)
        for item in shorter:
            bisect.insort(longer, item)
        if longer:
            self.parked[group] = longer

    def wake(self, admit: Callable[[str, list[tuple[int, str]]], list[tuple[int, str]]] | None = None,
             alike: Callable[[str], bool] | None = None) -> None:
        """Capacity may have grown: waiting tenants and pods may be tried again — every parked pod,
        or those ``admit(tenant, pods of one group)`` lets through (a cheap necessary condition;
        the others stay parked, as trying them could only fail)."""
        self.blocked.clear()
        self.unfit.clear()
        self.unpark(admit, alike)

    def unpark(self, admit: Callable[[str, list[tuple[int, str]]], list[tuple[int, str]]] | None = None,
               alike: Callable[[str], bool] | None = None) -> None:
        """Parked pods ``admit`` lets through go back to their queues; what the pass has found
        unplaceable so far stays known. With no ``admit`` every waiting pod goes back.

        When ``admit`` lets a whole group through and ``alike(tenant)`` says that the tenant's
        pods of one group stay alike until their turns (nothing but the world decides what
        happens to them, and each was tried before), only the group's first pod in line goes to
        the queue, as its lead; the others wait behind it. When the lead leaves the queue
        (``pop_next``, ``discard``) the next one takes its place; when it is parked
        (``put_back``) they are parked with it, as they would have been beside it. No pod of
        another group falls between two of a group in their tenant's line without falling behind
        the lead too, so every pick is the one it would be with all of them queued. Under
        contention a release wakes hundreds of pods of one shape, of which the first takes what
        was freed and the rest would only be queued to be parked again."""
        back: dict[str, list[tuple[int, str]]] = {}
        for (tenant, group), waiting in list(self.parked.items()):
            going = waiting if admit is None else admit(tenant, waiting)
            if not going:
                continue
            if len(going) == len(waiting):
                del self.parked[(tenant, group)]
                if (alike is not None and len(going) > 1 and (tenant, group) not in self._untried
                        and (tenant, group) not in self.behind and alike(tenant)):
                    lead = going[0]  # (a group's pods share their place in line but for age)
                    self.behind[(tenant, group)] = going[1:]
                    self._lead[lead[1]] = (tenant, group)
                    going = [lead]
                self._untried.discard((tenant, group))
            else:
                gone = set(going)
                self.parked[(tenant, group)] = [p for p in waiting if p not in gone]
            back.setdefault(tenant, []).extend(going)
        if admit is None:  # every pod: those behind a lead too
            for (tenant, _), rest in sorted(self.behind.items()):
                back.setdefault(tenant, []).extend(rest)
            self.behind.clear()
            self._lead.clear()
        for tenant, pods in sorted(back.items()):
            for _, key in pods:
                self._joins(key)
            line = self.queues.get(tenant, []) + pods
            # with no pod going first the line is the tuples' own (created, key) order, which sorts
            # without a key function: a wake under contention brings hundreds of pods back
            self.queues[tenant] = sorted(line, key=self.line_key) if True in self._first.values() else sorted(line)

    def park_all(self, strict: bool, group: Callable[[str], str] | None = None) -> None:
        """Everything queued waits for a change, as after a completed pass (a window's start)."""
        if strict:
            self.blocked = {t for t, q in self.queues.items() if q}
            return
        for tenant, q in self.queues.items():
            for created, key in q:
                name = group(key) if group else ""
                self.put_back(tenant, created, key, strict=False, group=name)
                self._untried.add((tenant, name))
            q.clear()

    def _promote(self, key: str) -> None:
        """``key`` left its queue: the next pod it led, if any, joins the queue and leads the rest."""
        group = self._lead.pop(key, None)
        rest = self.behind.get(group) if group is not None else None
        if not rest or group is None:
            return
        nxt = rest.pop(0)
        if rest:
            self._lead[nxt[1]] = group
        else:
            del self.behind[group]
        self._joins(nxt[1])
        bisect.insort(self.queues.setdefault(group[0], []), nxt, key=self.line_key)

    def discard(self, key: str) -> None:
        """The pod is gone (deleted by someone else): it waits nowhere any more."""
        self._promote(key)
        self._first.pop(key, None)
        for q in self.queues.values():
            q[:] = [p for p in q if p[1] != key]
        for group, rest in list(self.behind.items()):
            left = [p for p in rest if p[1] != key]
            if left:
                self.behind[group] = left
            else:  # the lead stays queued, leading nothing
                del self.behind[group]
        for group, waiting in list(self.parked.items()):
            left = [p for p in waiting if p[1] != key]
            if left:
                self.parked[group] = left
            else:  # a wake asks about each group's first pod: an empty group must not stay
                del self.parked[group]

    def waiting(self) -> int:
        return sum(len(q) for q in (*self.queues.values(), *self.parked.values(), *self.behind.values()))

    def pop_next(self, world: World, policy: Policy, now_ms: int) -> tuple[str, str] | None:
        """The next ``(tenant, pod key)`` in fairness order among unblocked tenants' head pods."""
        best: tuple[tuple[float, int, str], str] | None = None
        at = (world.seq, now_ms, policy.digest)
        if at != self._shares_at:
            self._shares, self._shares_at = {}, at
        for tenant in sorted(self.queues):
            q = self.queues[tenant]
            if not q or tenant in self.blocked:
                continue
            share = self._shares.get(tenant)
            if share is None and policy.fairness_mode != "off":
                share = self._shares[tenant] = tenant_share(world, policy, tenant, now_ms)
            k = order_key(world, policy, q[0][1], now_ms, share)
            if best is None or k < best[0]:
                best = (k, tenant)
        if best is None:
            return None
        _, key = self.queues[best[1]].pop(0)
        self._first.pop(key, None)
        self._promote(key)
        return best[1], key
