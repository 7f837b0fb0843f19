"""What a ResourceClaim's status says about its allocation, read one way wherever it is read: by
the Kubernetes watcher's observer as claims change, and by the sinks as they fold a stored event
log back into the world a restarted watcher goes on from (which pods a claim's allocation has
been reserved for tells which stored decisions are about that allocation)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def allocation(claim: Mapping[str, Any] | None) -> Any:
    """The claim's ``status.allocation`` (None or empty while it is not allocated)."""
    return ((claim or {}).get("status") or {}).get("allocation")


def reserved_pods(claim: Mapping[str, Any] | None) -> list[str]:
    """The uids of the pods ``status.reservedFor`` names, in its order."""
    refs = ((claim or {}).get("status") or {}).get("reservedFor") or []
    return [str(r.get("uid", "")) for r in refs if r.get("resource") == "pods" and not r.get("apiGroup")]


def _uid(claim: Mapping[str, Any] | None) -> str:
    return str(((claim or {}).get("metadata") or {}).get("uid", "") or "")


def same_allocation(previous: Mapping[str, Any] | None, claim: Mapping[str, Any]) -> bool:
    """Whether ``claim`` still holds the allocation ``previous``, its state logged before, held.
    ``status.allocation`` cannot change once set, only be cleared; and the claim controller
    deallocates a claim when its last reserved pod goes, so an allocation that reserves none of
    the pods it reserved before was given up and made again where the log did not look."""
    if previous is None or _uid(previous) != _uid(claim):
        return False
    before, now = allocation(previous), allocation(claim)
    if not before or not now or before != now:
        return False
    held = set(reserved_pods(previous))
    return not held or bool(held & set(reserved_pods(claim)))


def follow_reservations(history: dict[str, list[str]], old: Mapping[str, Any] | None,
                        new: Mapping[str, Any] | None) -> None:
    """Carry ``history`` (claim uid -> the uids of the pods its current allocation has been
    reserved for, in the order they first appeared) over one logged change of a claim from
    ``old`` to ``new`` (None: deleted). A pod the allocation served and that is gone since is
    kept: the allocation's decision may have been recorded for it."""
    if old is not None and (new is None or _uid(old) != _uid(new)):
        history.pop(_uid(old), None)
    if new is None:
        return
    uid = _uid(new)
    if not allocation(new):
        history.pop(uid, None)
        return
    pods = history.get(uid, []) if same_allocation(old, new) else []
    history[uid] = pods + [p for p in reserved_pods(new) if p not in pods]


def reserved_since_allocated(states: Sequence[Mapping[str, Any] | None], *, whole: bool) -> list[str] | None:
    """What ``follow_reservations``, carried over a claim's whole log, holds for the claim as the
    last of ``states`` leaves it: ``states`` are the end of one claim name's logged states, in log
    order (None where it was deleted). Only the states since the change that made its allocation
    count (one after which the claim no longer holds the ``same_allocation``), so this says None
    when that change is not among them and ``whole`` (they are the name's whole log) is not said.
    A claim's uid is its own (the API server never gives one object's uid to another), so the
    states of other names do not change the answer."""
    last = states[-1] if states else None
    begun = next((i for i in range(len(states) - 1, 0, -1) if _begins(states[i - 1], states[i])), None)
    if begun is None:
        if not whole:
            return None
        begun = 0
    history: dict[str, list[str]] = {}
    old = states[begun - 1] if begun > 0 else None
    for new in states[begun:]:
        follow_reservations(history, old, new)
        old = new
    return history.get(_uid(last), []) if last is not None else []


def _begins(before: Mapping[str, Any] | None, claim: Mapping[str, Any] | None) -> bool:
    """Whether the history ``follow_reservations`` keeps starts over at ``claim`` (None: deleted)."""
    return claim is None or not same_allocation(before, claim)
