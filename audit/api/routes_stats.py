"""Aggregates the dashboards draw: fallback, fairness, health and migration.

Rows are flat dicts (``{"rows": [...], "group_by": [...]}``). Tenant isolation: a tenant caller
of the per-tenant aggregates (fallback, fairness) sees its own rows and every other tenant folded
by the store into one ``(others)`` row, computed over the folded rows (so rates and percentiles
stay correct); the health and migration aggregates, which have no tenant column, cover only the
caller's own decisions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from audit.api import params, storeport
from audit.api.auth import Principal
from audit.api.deps import principal, store, tenant_filter
from audit.api.problems import Problem

router = APIRouter(prefix="/v1/stats", tags=["stats"])

FALLBACK_GROUPS = ("tenant", "model", "preferred", "hour", "cluster", "track", "policy_version",
                   "outcome")
# endpoint -> (store method, default grouping)
STATS: dict[str, tuple[str, tuple[str, ...]]] = {
    "fallback": ("fallback_stats", ("tenant", "preferred", "model")),
    "fairness": ("fairness_stats", ("tenant",)),
    "health": ("health_stats", ("hour",)),
    "migration": ("migration_stats", ("track", "template_version")),
}


# Aggregates with a tenant column: for a tenant caller the store folds every other tenant into "(others)".
FOLDED = ("fallback", "fairness")


def _query(kind: str, db: Any, who: Principal, f_values: dict[str, Any], group_by: str | None) -> dict[str, Any]:
    """``f_values["tenant"]`` is already the caller's tenant for non-admins (see ``tenant_filter``)."""
    method, fixed = STATS[kind]
    if kind == "fallback":
        keys = params.group_by(group_by, fixed, FALLBACK_GROUPS)
    else:
        # These aggregates have one fixed grouping; accept it (or nothing) so clients can be explicit.
        keys = params.group_by(group_by, fixed, fixed)
        if keys != list(fixed):
            raise Problem("invalid-parameter", f"group_by: /v1/stats/{kind} is grouped by {','.join(fixed)} only")
    args: list[Any] = [keys] if kind == "fallback" else []
    scope: dict[str, Any] = {}
    if not who.admin and kind in FOLDED:
        f_values = {**f_values, "tenant": None}
        scope = {"scope_tenant": who.tenant}
    rows = storeport.call(getattr(db, method), storeport.decision_filter(**f_values), *args, **scope)
    return {"rows": rows, "group_by": keys}


def _endpoint(kind: str) -> Callable[..., dict[str, Any]]:
    def endpoint(who: Annotated[Principal, Depends(principal)], db: Annotated[Any, Depends(store)],
                 cluster: str | None = None, since: str | None = None, until: str | None = None,
                 tenant: str | None = None, model: str | None = None, policy_version: str | None = None,
                 group_by: str | None = None) -> dict[str, Any]:
        values = {"tenant": tenant_filter(who, params.label(tenant, "tenant")),
                  "cluster": params.label(cluster, "cluster"), "since": params.timestamp(since, "since"),
                  "until": params.timestamp(until, "until"), "model": params.model(model),
                  "policy_version": params.label(policy_version, "policy_version")}
        return _query(kind, db, who, values, group_by)

    endpoint.__name__ = f"{kind}_stats"
    return endpoint


for _kind in STATS:
    router.add_api_route(f"/{_kind}", _endpoint(_kind), methods=["GET"], summary=f"{_kind.capitalize()} statistics")
