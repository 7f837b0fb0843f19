"""Fallback regret: could the pod's first choice alone have been allocated soon after it fell back?

A pod that fell back (some request got a later ``firstAvailable`` subrequest) is *regretted* when,
at the end of some instant within the policy's ``fallback.regretWindow`` (default 10 min) after
its bind, the claims reduced to their first alternatives would have been allocated on some node
by the real per-node allocator (the kube-scheduler 1.36 algorithm, against the devices allocated
at that moment), the pod would have passed the node filter there, and the devices that
allocation takes stay within the tenant's quota at that moment. A cluster-wide free count is not
enough: eight free H100s spread over four nodes do not fit a pod asking for eight on one node.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Set
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from audit.allocator.outcome import Status
from audit.scheduler.attempt import model_matcher
from audit.scheduler.filters import node_filter
from audit.scheduler.nodealloc import allocate_on_node
from audit.scheduler.quota import check_quota
from audit.scheduler.tiers import claim_tiers
from audit.world import World

if TYPE_CHECKING:
    from audit.metrics.lifecycle import PodLife


# (models, count) per first alternative of a candidate's claims
Needs = tuple[tuple[tuple[str, ...], int], ...]


@dataclass
class RegretCandidate:
    life: PodLife
    pod: dict[str, Any]
    claims: list[dict[str, Any]]  # the pod's claims reduced to their first alternatives, unallocated
    deadline_ms: int
    # (models, count) per first alternative, as the world's device signatures stood when read
    needs: Needs = ()
    needs_version: tuple[int, int] = (-1, -1)
    models: frozenset[str] = frozenset()  # every model of ``needs``
    serial: int = -1  # its place in the order candidates appeared in (``RegretWatch.add``)


# Entries ``RegretWatch`` may keep for candidates done since, beyond four per open one, before it
# files the open ones anew: a model nothing is given back for would otherwise keep them all.
REINDEX_SLACK = 4096


class RegretWatch:
    """The fallbacks inside their regret window, and which of them to judge at an instant's end.

    A candidate is judged at the end of the instant it appeared in. If its first choice did not
    fit then, it can come to fit only through an instant that gave back devices or quota of one of
    the models that choice asks for, or that changed the inventory or policy: allocations only take
    devices and quota, its first alternatives select no device of another model, and quota is
    counted per model. So after its first judgment it waits under those models and is judged again
    only when one of them is given back (or anything changed), rather than at every instant.
    """

    def __init__(self) -> None:
        self._open: deque[RegretCandidate] = deque()  # in the order they appeared, not yet regretted
        self._fresh: list[RegretCandidate] = []  # not judged yet
        self._wanting: dict[str, dict[int, RegretCandidate]] = {}  # model -> judged candidates, by serial
        self._indexed = 0  # entries in ``_wanting``, those of candidates done since included
        self._serial = 0

    def add(self, c: RegretCandidate) -> None:
        c.serial, self._serial = self._serial, self._serial + 1
        self._open.append(c)
        self._fresh.append(c)

    def __len__(self) -> int:
        return len(self._open)

    def fork(self, life_of: Callable[[PodLife], PodLife]) -> RegretWatch:
        """The same watch for a fold whose rows are copies (``life_of`` gives a row's copy): each
        candidate copied once, wherever this watch files it, since judging one changes it (its
        row's ``regretted``, its cached ``needs``)."""
        copies: dict[int, RegretCandidate] = {}

        def copy_of(c: RegretCandidate) -> RegretCandidate:
            found = copies.get(c.serial)
            if found is None:
                found = copies[c.serial] = replace(c, life=life_of(c.life))
            return found

        w = RegretWatch.__new__(RegretWatch)
        w._open = deque(copy_of(c) for c in self._open)
        w._fresh = [copy_of(c) for c in self._fresh]
        w._wanting = {model: {serial: copy_of(c) for serial, c in waiting.items()}
                      for model, waiting in self._wanting.items()}
        w._indexed, w._serial = self._indexed, self._serial
        return w

    def due(self, t: int, changed: bool, freed: Set[str]) -> list[RegretCandidate]:
        """Those to judge at the end of instant ``t`` (in the order they appeared), after an instant
        that gave back devices or quota of the models ``freed``, and changed the inventory or the
        policy if ``changed``. Pass each of them to ``judged`` afterwards."""
        pending = self._open
        while pending and (pending[0].life.regretted or t > pending[0].deadline_ms):
            pending.popleft()
        if changed:
            self._wanting.clear()
            self._indexed = 0
            found = list(pending)
        else:
            by_serial = {c.serial: c for c in self._fresh}
            for model in freed:
                waiting = self._wanting.pop(model, {})
                self._indexed -= len(waiting)
                by_serial.update(waiting)
            found = [by_serial[s] for s in sorted(by_serial)]
        self._fresh = []
        return [c for c in found if not c.life.regretted and t <= c.deadline_ms]

    def judged(self, t: int, cs: list[RegretCandidate]) -> None:
        """File the candidates ``due`` gave, once judged at the end of ``t``, under the models their
        first choice asks for (``models``, read by the judgment), to be found when one is given back."""
        if self._indexed > 4 * len(self._open) + REINDEX_SLACK:  # many entries of candidates done since
            # (regretted or past their window under models nothing was given back for): file anew
            self._wanting.clear()
            self._indexed = 0
            cs = [c for c in self._open if not c.life.regretted and t <= c.deadline_ms]
        for c in cs:
            if not c.life.regretted:
                for model in c.models:
                    waiting = self._wanting.setdefault(model, {})
                    if c.serial not in waiting:
                        waiting[c.serial] = c
                        self._indexed += 1


def reduced_to_first_choice(claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each claim with every ``firstAvailable`` request cut to its first subrequest, status dropped.
    Only the dicts on the way to a cut request are new; the rest is shared with the claim as the
    world holds it, which is never changed in place (``World.apply`` replaces an object whole)."""
    out = []
    for claim in claims:
        c = {k: v for k, v in claim.items() if k != "status"}
        spec = c.get("spec") or {}
        devices = spec.get("devices") or {}
        requests = devices.get("requests") or []
        if any(r.get("firstAvailable") for r in requests):
            cut = [{**r, "firstAvailable": r["firstAvailable"][:1]} if r.get("firstAvailable") else r
                   for r in requests]
            c["spec"] = {**spec, "devices": {**devices, "requests": cut}}
        out.append(c)
    return out


def _candidate_nodes(world: World, c: RegretCandidate,
                     no_room: set[Needs] | None = None) -> list[str]:
    """Nodes with enough free healthy devices of a model each first alternative can match (a
    necessary condition; the allocator decides). ``no_room`` holds the needs found to have no
    such node in the world as it is now, for the caller to keep while the world stays the same."""
    version = (world.signature_version, world.class_version)
    if c.needs_version != version:
        matcher = model_matcher(world)
        c.needs = tuple((rt.tiers[0].models, rt.tiers[0].count)
                        for claim in c.claims for rt in claim_tiers(claim, matcher) if rt.tiers)
        c.models = frozenset(m for models, _ in c.needs for m in models)
        c.needs_version = version
    if no_room is None:
        return _nodes_with_room(world, c.needs)
    if c.needs in no_room:
        return []
    nodes = _nodes_with_room(world, c.needs)
    if not nodes:
        no_room.add(c.needs)
    return nodes


def _nodes_with_room(world: World, needs: Needs) -> list[str]:
    if len(needs) == 1 and len(needs[0][0]) == 1:
        # the common case, one request of one model: the world keeps that list sorted already
        (((model,), count),) = needs
        return world.nodes_with_free(model, count)
    nodes: set[str] | None = None
    for models, count in needs:
        here = {n for m in models for n in world.nodes_with_free(m, count)}
        nodes = here if nodes is None else nodes & here
        if not nodes:
            return []
    return sorted(nodes or ())


def first_choice_allocatable(world: World, c: RegretCandidate,
                             no_room: set[Needs] | None = None) -> bool:
    """Whether the candidate's first alternatives alone are allocatable on one node within its
    tenant's quota now. ``no_room``: as ``_candidate_nodes`` takes it — at the end of an instant
    every candidate is judged against the same world, and most have needs no node has room for."""
    nodes = _candidate_nodes(world, c, no_room)
    if not nodes:  # asked of every candidate at the end of nearly every instant: the usual answer
        return False
    policy = world.policy
    tenant = policy.tenant_for(c.life.namespace)  # quota as the policy in force names the tenant
    for node in nodes:
        if node_filter(world, node, c.pod) is not None:
            continue
        outcome = allocate_on_node(world, node, c.claims, policy, explain=False)
        if outcome.status != Status.SUCCESS:
            continue
        per_model: dict[str, int] = {}
        for alloc in outcome.allocations:
            for r in alloc.results:
                dev = world.devices.get(f"{r.get('driver', '')}/{r.get('pool', '')}/{r.get('device', '')}")
                model = dev.model if dev is not None else "unknown"
                per_model[model] = per_model.get(model, 0) + 1
        if all(check_quota(world, policy, tenant, m, n).fits for m, n in sorted(per_model.items())):
            return True
    return False
