"""The ``/v1/stats/<kind>`` routes, one per kind that ``audit.api.stats`` declares.

Every kind takes the same query parameters (cluster, since, until, tenant, model, policy_version,
group_by, and ``by`` where the kind has rows per hour or model) and answers ``{"rows": [...], "group_by": [...], ...figures}``; what a kind counts and
how it is grouped is its module's job. A tenant caller is scoped here, once: its own filter, and
the folded one that per-tenant kinds use to show every other tenant as ``(others)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from audit.api import params, storeport
from audit.api.auth import Principal
from audit.api.deps import Settings, principal, settings, store, tenant_filter
from audit.api.stats import Ask, StatsKind, kinds
from audit.store.ports import StoreReads

router = APIRouter(prefix="/v1/stats", tags=["stats"])


def _endpoint(kind: StatsKind) -> Callable[..., dict[str, Any]]:
    def endpoint(who: Annotated[Principal, Depends(principal)], db: Annotated[StoreReads, Depends(store)],
                 cfg: Annotated[Settings, Depends(settings)], cluster: str | None = None, since: str | None = None,
                 until: str | None = None, tenant: str | None = None, model: str | None = None,
                 policy_version: str | None = None, group_by: str | None = None,
                 by: str | None = None) -> dict[str, Any]:
        # ``tenant`` is already the caller's tenant for non-admins (see ``tenant_filter``)
        values = {"tenant": tenant_filter(who, params.tenant(tenant)),
                  "cluster": params.cluster(cluster), "since": params.timestamp(since, "since"),
                  "until": params.timestamp(until, "until"), "model": params.model(model),
                  "policy_version": params.policy_version(policy_version)}
        keys = kind.group_keys(group_by)
        breakdown = kind.breakdown(by, keys)
        own = storeport.decision_filter(**values)
        scope = None if who.admin else who.tenant
        folded = storeport.decision_filter(**{**values, "tenant": None}) if scope is not None else own
        answer = kind.answer(Ask(db, own, folded, scope, keys, cfg.migration_thresholds, breakdown))
        return {"rows": answer.pop("rows"), "group_by": keys, **answer}

    endpoint.__name__ = f"{kind.name}_stats"
    return endpoint


for _kind in kinds():
    router.add_api_route(f"/{_kind.name}", _endpoint(_kind), methods=["GET"], summary=_kind.summary)
