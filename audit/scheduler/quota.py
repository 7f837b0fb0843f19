"""Tenant quota per device model: nominal plus borrowing, never bypassed by fallback.

Semantics follow Kueue's ClusterQueue rules (kueue.sigs.k8s.io, "Cluster Queue"): a request fits if the
tenant's usage of the model plus the request stays within its nominal quota; beyond nominal it
may borrow up to ``borrowingLimit`` (unlimited when null) but only from nominal quota other
tenants leave unused. A tenant with no quota entry for a model is not limited on that model.
Quota is counted in devices of the model, from the world's allocation index.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from audit.frozen import fast_init
from audit.policy import Policy
from audit.world import World


@fast_init
@dataclass(frozen=True)
class QuotaCheck:
    fits: bool
    model: str
    used: int
    requested: int
    nominal: int | None = None
    limit: int | None = None
    lendable: int | None = None

    def detail(self) -> dict[str, int | str | None]:
        return {"model": self.model, "used": self.used, "requested": self.requested, "nominal": self.nominal,
                "limit": self.limit, "lendable": self.lendable}


def check_quota(world: World, policy: Policy, tenant: str, model: str, count: int) -> QuotaCheck:
    """Whether ``count`` more devices of ``model`` fit the tenant's quota in the world as it is.

    Kept per world state (its seq) and policy: one attempt asks the same question for every gate,
    candidate check and node, and the answer changes only when an event is folded."""
    answers: dict[tuple[str, str, int], QuotaCheck] = world.derived_at("quota", (world.seq, policy.digest))
    key = (tenant, model, count)
    found = answers.get(key)
    if found is None:
        found = answers[key] = _check(world, policy, tenant, model, count)
    return found


def _check(world: World, policy: Policy, tenant: str, model: str, count: int) -> QuotaCheck:
    return quota_rule(policy, tenant, model, count, lambda name: world.model_in_use(name, model))


def quota_rule(policy: Policy, tenant: str, model: str, count: int, in_use: Callable[[str], int]) -> QuotaCheck:
    """The quota rule itself, over ``in_use`` (a tenant's name -> its devices of ``model`` in use):
    the engine reads the world's allocation index, ``why`` the objects of a cluster view."""
    q = policy.quota(tenant, model)
    used = in_use(tenant)
    if q is None:
        return QuotaCheck(True, model, used, count)
    want = used + count
    if want <= q.nominal:
        return QuotaCheck(True, model, used, count, q.nominal, q.limit)
    lendable = 0
    for other in policy.tenants:
        if other.name == tenant:
            continue
        oq = other.quotas.get(model)
        if oq is not None:
            lendable += max(0, oq.nominal - in_use(other.name))
    borrow = want - q.nominal
    borrowed_by_others = sum(
        max(0, in_use(o.name) - o.quotas[model].nominal)
        for o in policy.tenants if o.name != tenant and model in o.quotas)
    room = lendable - borrowed_by_others
    fits = borrow <= room and (q.limit is None or want <= q.limit)
    return QuotaCheck(fits, model, used, count, q.nominal, q.limit, max(0, room))


# (model, count) -> whether the tenant's quota takes ``count`` more devices of the model: the
# engine asks ``check_quota`` on its world, ``why`` ``quota_rule`` over a cluster view.
QuotaAsk = Callable[[str, int], QuotaCheck]


def tier_quota(models: Sequence[str], count: int, ask: QuotaAsk) -> tuple[bool, list[QuotaCheck]]:
    """Whether the tenant's quota closes a tier of ``count`` devices of any of ``models``, with the
    check of each model for the whole count. A tier of several models (``A100|H100|L40S``) is
    closed only when none of them fits: one that does may take the whole tier, and what a node
    gives the tier is then checked model by model (``placement_quota``). A tier asking for no
    model (a NIC) is never closed."""
    checks = [ask(m, count) for m in models]
    return bool(checks) and not any(c.fits for c in checks), checks


def closed_details(closed: Sequence[tuple[QuotaCheck, int]]) -> list[dict[str, int | str | None]]:
    """The details of the ``quota_exhausted`` blockers of a tier the tenant's quota closed, one per
    model whose quota closed it, in the order given: ``closed`` holds each model's check with its
    part of the tier's ``quota_exhausted`` count. A tier closed on one model's quota has one
    blocker, its check's detail alone (its part is the whole count); with several, each carries
    ``over_quota``, its part, so what each model's quota turned down adds up to the count. The decision
    engine's records (a DRA tier of several models, ``tier_quota``; a device-plugin pod turned
    away by several models' quotas, ``audit.scheduler.deviceplugin``) and ``why``'s "if scheduled
    now" give a tier's quota blockers so, and ``why`` reads each as its model's."""
    if len(closed) == 1:
        return [closed[0][0].detail()]
    return [{**q.detail(), "over_quota": part} for q, part in closed]


def placement_quota(counts: Mapping[str, int], ask: QuotaAsk) -> QuotaCheck | None:
    """The check of the first model (by name) of a node's placement (``counts``: devices per
    model) that the tenant's quota cannot take, or None when it takes them all."""
    for model, n in sorted(counts.items()):
        q = ask(model, n)
        if not q.fits:
            return q
    return None


@dataclass(frozen=True)
class QuotaGap:
    """How a tier of ``count`` devices of ``model``, closed by the tenant's quota, reopens as
    devices are given back: with ``i`` of the tenant's own and ``j`` of other tenants holding a
    quota for the model (``lenders``; each device they give back lends one more, whether they
    were under or over their nominal), it fits when ``i >= to_nominal``, or when
    ``i >= to_limit`` and ``i + j >= together`` (``to_limit`` None: no borrowing limit)."""

    model: str
    to_nominal: int
    to_limit: int | None
    together: int
    lenders: tuple[str, ...]

    @property
    def own_alone(self) -> int:
        """What the tenant alone must give back, others' usage staying as it is."""
        return min(self.to_nominal, self.together if self.to_limit is None else max(self.together, self.to_limit))


def quota_gap(world: World, policy: Policy, tenant: str, model: str, count: int) -> QuotaGap | None:
    """The gap for a tier the tenant's quota closes (None when the model has no quota for it).

    ``check_quota`` lends the sum over other tenants with a quota of the model of their unused
    nominal less what they borrow beyond it: for each that is nominal minus usage, so each device
    they give back lends one more, and each of the tenant's own lowers what it asks."""
    q = policy.quota(tenant, model)
    if q is None:
        return None
    want = world.model_in_use(tenant, model) + count
    others = sorted((o for o in policy.tenants if o.name != tenant and model in o.quotas), key=lambda o: o.name)
    lenders = tuple(o.name for o in others)
    room = sum(o.quotas[model].nominal - world.model_in_use(o.name, model) for o in others)
    return QuotaGap(model, want - q.nominal, None if q.limit is None else want - q.limit, want - q.nominal - room,
                    lenders)
