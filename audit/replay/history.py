"""Splitting recorded history into what the world did and what the decisions did.

Counterfactual replay keeps the world's own events — arrivals (pod and claim creations), device
and node changes, health taints, foreign claims — and regenerates the decisions' effects under
another policy. This module sorts a window of the event log into those two parts:

* **effects** (dropped): a managed pod's claim getting ``status.allocation`` and the pod getting
  ``nodeName`` (bind), the pod turning ``Failed``, the managed pod's and claim's deletion, and
  every Reservation made or released;
* **interference** (held back): the world's events that landed between a decision and its
  bind-time re-check (the record's ``bind_seq``), which re-happen at the same point of the same
  attempt when the counterfactual makes that attempt, and otherwise at their time;
* **external** (kept, in seq order): everything else.

It also derives each job's running time — from its allocation to its deletion — for jobs that
finished in the window; jobs that failed or never ran in the window have no known duration. And
``queue_state`` recovers what the scheduler itself held at a window's start: attempts made,
bind failures, retries due and wake-ups due.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from audit.events import EventType, WorldEvent
from audit.policy import Policy, default_policy, parse_policy
from audit.records import DecisionRecord, Outcome
from audit.replay.verify import bind_seq
from audit.scheduler import reservations
from audit.scheduler.engine import hold_deadline_ms
from audit.scheduler.pending import follow_up
from audit.timestamps import parse_time_ms


@dataclass
class SplitHistory:
    external: list[WorldEvent] = field(default_factory=list)
    interference: dict[tuple[str, int], list[WorldEvent]] = field(default_factory=dict)  # (pod key, attempt)
    effects: int = 0
    durations: dict[str, int] = field(default_factory=dict)  # pod key -> ms from allocation to finish
    finished_at: dict[str, int] = field(default_factory=dict)  # pod key -> ms of its finish
    managed_pods: set[str] = field(default_factory=set)


def _pod_key(ev: WorldEvent) -> str:
    return f"{ev.namespace}/{ev.name}"


def split_history(events: list[WorldEvent], records: list[DecisionRecord]) -> SplitHistory:
    """Sort ``events`` (ascending seq) given the decisions ``records`` made over them."""
    out = SplitHistory()
    claim_owner: dict[str, str] = {}  # "ns/claim" -> pod key
    for r in records:
        key = f"{r.namespace}/{r.pod}"
        out.managed_pods.add(key)
        for c in r.claims:
            claim_owner[f"{r.namespace}/{c}"] = key
    held: dict[int, tuple[str, int]] = {}
    for r in records:
        at = bind_seq(r)
        if at is not None:
            for s in range(r.seq + 1, at + 1):
                held.setdefault(s, (f"{r.namespace}/{r.pod}", r.attempt))
    allocated_at: dict[str, int] = {}
    for r in records:
        if r.outcome == Outcome.ALLOCATED.value:
            allocated_at.setdefault(f"{r.namespace}/{r.pod}", parse_time_ms(r.time))
    failed: set[str] = set()
    for ev in events:
        if _is_effect(ev, out.managed_pods, claim_owner):
            out.effects += 1
            key = _pod_key(ev)
            if ev.object_kind == "Pod" and ev.type == EventType.UPSERT.value and _phase(ev) == "Failed":
                failed.add(key)
            elif ev.object_kind == "Pod" and ev.type == EventType.DELETE.value and key in allocated_at \
                    and key not in failed:
                out.finished_at[key] = parse_time_ms(ev.time)
                out.durations[key] = out.finished_at[key] - allocated_at[key]
            continue
        owner = held.get(ev.seq)
        if owner is not None:
            out.interference.setdefault(owner, []).append(ev)
        else:
            out.external.append(ev)
    return out


def _phase(ev: WorldEvent) -> str:
    return str((ev.payload.get("status") or {}).get("phase", ""))


def _is_effect(ev: WorldEvent, pods: set[str], claim_owner: dict[str, str]) -> bool:
    if ev.object_kind == "Reservation":  # the scheduler's own: regenerated under the replayed policy
        return True
    key = _pod_key(ev)
    if ev.object_kind == "Pod" and key in pods:
        if ev.type == EventType.DELETE.value:
            return True
        return bool((ev.payload.get("spec") or {}).get("nodeName")) or _phase(ev) == "Failed"
    if ev.object_kind == "ResourceClaim" and key in claim_owner:
        if ev.type == EventType.DELETE.value:
            return True
        return bool((ev.payload.get("status") or {}).get("allocation"))
    return False


BIND_RETRY = frozenset({"binding_conflict", "stale_slice", "unhealthy", "node_lost"})


@dataclass
class QueueState:
    """The scheduler's own state at a window's start, recovered from what came before it.

    A window starts between instants, after a completed scheduling pass: every pending pod not
    due for a bind retry is waiting for a change, which the counterfactual restores as it finds
    them (``PendingQueues.park_all``); only what the records alone know is kept here."""

    attempts: dict[str, int] = field(default_factory=dict)  # pod key -> attempts made
    bind_failures: dict[str, int] = field(default_factory=dict)  # pod key -> bind failures so far
    retries: dict[str, int] = field(default_factory=dict)  # pod key -> ms of its pending retry
    # pending wake-ups a decision asked for (``follow_up``: waiting for the preferred model), as
    # (ms, pod key, the decision's attempt)
    wakes: list[tuple[int, str, int]] = field(default_factory=list)
    # pods whose last decision answered their reservation (``reservations.settled``)
    reserve_settled: set[str] = field(default_factory=set)
    # the ends of holds the last policy activation moved (``ClusterLoop.rearm``), as (ms, pod key,
    # the digest of the policy that armed them)
    dues: list[tuple[int, str, str]] = field(default_factory=list)


def activation_dues(events: Iterable[WorldEvent], pending: Mapping[str, int], policy: Policy,
                    since_ms: int) -> list[tuple[int, str, str]]:
    """The ``due`` wakes the cluster loop armed at the last policy activation of ``events`` (the
    log before a window, in seq order) that are still ahead at ``since_ms``: one per pod of
    ``pending`` (pod key -> pending since, at the window's start) created before that activation,
    at the end of its hold under ``policy`` (the one in force at the window's start) — none when a
    later deletion put another policy in force, as those wakes then do nothing."""
    activated: tuple[int, str] | None = None  # (seq, digest) of the last Policy upsert
    first_seen: dict[str, int] = {}
    for ev in events:
        if ev.object_kind == "Policy" and ev.type == EventType.UPSERT.value:
            activated = (ev.seq, parse_policy(ev.payload).digest)
        elif ev.object_kind == "Pod" and ev.type == EventType.UPSERT.value:
            first_seen.setdefault(f"{ev.namespace}/{ev.name}", ev.seq)
    if activated is None or activated[1] != policy.digest:
        return []
    dues = []
    for key, created in sorted(pending.items()):
        end = hold_deadline_ms(policy, created)
        if end is not None and end >= since_ms and first_seen.get(key, activated[0]) < activated[0]:
            dues.append((end, key, policy.digest))
    return dues


def recorded_policies(events: Iterable[WorldEvent]) -> dict[str, Policy]:
    """The policies a log activates, by digest, with the default policy (in force before any):
    what a record's ``policy_digest`` names."""
    default = default_policy()
    out = {default.digest: default}
    for ev in events:
        if ev.object_kind == "Policy" and ev.type == EventType.UPSERT.value:
            policy = parse_policy(ev.payload)
            out.setdefault(policy.digest, policy)
    return out


def queue_state(prior: list[DecisionRecord], since_ms: int, policy: Policy,
                policies: Mapping[str, Policy] | None = None) -> QueueState:
    """``prior``: records before the window, in the order they were made; ``policy``: the one in
    force at the window's start; ``policies`` (``recorded_policies``): those the records were made
    under. A wake-up is read from a record under the policy it was made under, as the cluster loop
    armed it then (a later policy arms wakes of its own, ``dues``, and leaves it); a record whose
    policy is not among ``policies`` is read under ``policy``."""
    state = QueueState()
    last_of_pod: dict[str, DecisionRecord] = {}
    for r in sorted(prior, key=lambda r: r.seq):  # stable: same-seq records keep their order
        key = f"{r.namespace}/{r.pod}"
        state.attempts[key] = max(state.attempts.get(key, 0), r.attempt)
        if bind_seq(r) is not None:
            state.bind_failures[key] = state.bind_failures.get(key, 0) + 1
        last_of_pod[key] = r
        own = policies.get(r.policy_digest, policy) if policies else policy
        for at in follow_up(r, own, parse_time_ms(r.time)).wakes_at_ms:
            if at >= since_ms:
                state.wakes.append((at, key, r.attempt))
    state.reserve_settled = {key for key, r in last_of_pod.items()
                             if reservations.settled(r, policies.get(r.policy_digest, policy) if policies else policy)}
    for key, r in last_of_pod.items():
        if r.retry_class in BIND_RETRY and r.backoff_ms > 0 and parse_time_ms(r.time) + r.backoff_ms >= since_ms:
            state.retries[key] = parse_time_ms(r.time) + r.backoff_ms
    state.wakes.sort(key=lambda w: w[0])  # stable: wakes of one instant in the order they were asked for
    return state
