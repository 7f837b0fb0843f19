"""Pending work between attempts: per-tenant queues, the fairness pick, and what follows an attempt.

The simulator and counterfactual replay both drive the engine through this one component, so a
window replayed under the recorded policy orders and re-queues pods exactly as the recorded run
did. Queues hold ``(created, pod key)`` sorted by creation; a tenant whose head pod could not be
placed is blocked until the world changes (a wake), so a pass never spins on the same pod.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from audit.policy import Policy
from audit.records import DecisionRecord, Outcome, RetryClass
from audit.scheduler.queue import order_key
from audit.world import World

# Failures found at bind time retry after their backoff; everything else waits for a change.
BIND_RETRY_CLASSES = frozenset({RetryClass.BINDING_CONFLICT.value, RetryClass.STALE_SLICE.value,
                                RetryClass.UNHEALTHY.value, RetryClass.NODE_LOST.value})


@dataclass(frozen=True)
class FollowUp:
    """What happens to a pod after an attempt that placed nothing.

    ``retry`` at ``retry_at_ms``; ``fail`` for good; or ``wait`` in its queue until the world
    changes, with ``wake_at_ms`` set when a wait-for-preferred deadline wakes the queues by itself.
    """

    action: str
    retry_at_ms: int = 0
    wake_at_ms: int | None = None


def follow_up(record: DecisionRecord, policy: Policy, now_ms: int) -> FollowUp:
    if record.retry_class in BIND_RETRY_CLASSES and record.backoff_ms > 0:
        return FollowUp("retry", retry_at_ms=now_ms + record.backoff_ms)
    if record.retry_class == RetryClass.TERMINAL.value:
        return FollowUp("fail")
    if record.outcome == Outcome.DEFERRED.value and record.retry_class == RetryClass.UNSCHEDULABLE.value:
        return FollowUp("wait", wake_at_ms=now_ms + max(1, policy.fallback_wait_ms - record.wait_ms))
    return FollowUp("wait")


@dataclass
class PendingQueues:
    queues: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    blocked: set[str] = field(default_factory=set)

    def add(self, tenant: str, created: int, key: str) -> None:
        bisect.insort(self.queues.setdefault(tenant, []), (created, key))

    def put_back(self, tenant: str, created: int, key: str) -> None:
        """Return a pod that could not be placed to the head of its queue and block the tenant."""
        self.queues[tenant].insert(0, (created, key))
        self.blocked.add(tenant)

    def wake(self) -> None:
        self.blocked.clear()

    def pop_next(self, world: World, policy: Policy, now_ms: int) -> tuple[str, str] | None:
        """The next ``(tenant, pod key)`` in fairness order among unblocked tenants' head pods."""
        best: tuple[tuple[float, int, str], str] | None = None
        for tenant in sorted(self.queues):
            q = self.queues[tenant]
            if not q or tenant in self.blocked:
                continue
            k = order_key(world, policy, q[0][1], now_ms)
            if best is None or k < best[0]:
                best = (k, tenant)
        if best is None:
            return None
        _, key = self.queues[best[1]].pop(0)
        return best[1], key
