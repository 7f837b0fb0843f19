"""Aggregates the dashboards draw: overview, fallback, fairness, health, migration and replay.

Rows are flat dicts (``{"rows": [...], "group_by": [...]}``). Tenant isolation: a tenant caller
of the per-tenant aggregates (overview, fallback, fairness) sees its own rows and every other
tenant folded by the store into one ``(others)`` row, computed over the folded rows (so rates and
percentiles stay correct); the aggregates without a tenant column (skip reasons, health,
migration, replay) cover only the caller's own decisions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends

from audit import migration
from audit.api import insights, params, podstats, storeport
from audit.api.auth import Principal
from audit.api.deps import Settings, principal, settings, store, tenant_filter
from audit.api.problems import Problem

router = APIRouter(prefix="/v1/stats", tags=["stats"])

FALLBACK_GROUPS = ("tenant", "model", "preferred", "hour", "cluster", "track", "policy_version",
                   "outcome")
# endpoint -> the groupings it answers (the first is its default)
GROUPINGS: dict[str, tuple[tuple[str, ...], ...]] = {
    "fallback": (("tenant", "preferred", "model"),),  # any combination of FALLBACK_GROUPS, or reason[,preferred]
    "fairness": (("tenant",), ("hour", "tenant")),
    "health": (("hour",), ("model",), ("hour", "model")),
    "migration": (("track", "template_version"),),
    "replay": (("hour",), ("cause",)),
    "overview": (("tenant",),),
}
SUMMARIES = {
    "fallback": "Fallback decision counts, with the window's per-pod first-choice rate, fallbacks, regret and paths "
                "(docs/metrics.md); group_by=reason[,preferred] gives why the preferred model was skipped",
    "fairness": "Decision counts per tenant (per hour with group_by=hour,tenant), with the window's per-pod figures: "
                "Jain's index whole and under contention, per tenant usage, entitlement, waits, pending, failed, "
                "starving (docs/metrics.md)",
    "health": "Health verdicts, retries and terminal failures per hour, or per device model (group_by=model or "
              "hour,model), with the window's unhealthy devices and device-hours",
    "migration": "Device-plugin vs DRA cohorts with utilisation and the promote/hold/rollback verdict; the comparison "
                 "is made within model × tenant × hour strata (its figures under `comparison`)",
    "replay": "Determinism status of the latest replay run per decision, per hour of decision time or per cause",
    "overview": "Per-tenant decision totals with the pods pending at the window end (from the pod lifecycle)",
}


def _keys(kind: str, group_by: str | None) -> list[str]:
    choices = GROUPINGS[kind]
    if kind == "fallback":
        keys = params.group_by(group_by, choices[0], (*FALLBACK_GROUPS, "reason"))
        if "reason" in keys and not set(keys) <= {"reason", "preferred"}:
            raise Problem("invalid-parameter", "group_by: reason combines with preferred only")
        return keys
    keys = params.group_by(group_by, choices[0], tuple(dict.fromkeys(k for c in choices for k in c)))
    if tuple(keys) not in choices:
        raise Problem("invalid-parameter", f"group_by: /v1/stats/{kind} is grouped by "
                      f"{' or '.join(','.join(c) for c in choices)}")
    return keys


def _query(kind: str, db: Any, who: Principal, f_values: dict[str, Any], group_by: str | None,
           thresholds: migration.Thresholds | None = None, by: str | None = None) -> dict[str, Any]:
    """``f_values["tenant"]`` is already the caller's tenant for non-admins (see ``tenant_filter``)."""
    keys = _keys(kind, group_by)
    if by is not None and (kind not in ("fairness", "fallback") or "reason" in keys):
        raise Problem("invalid-parameter", "by: rows per hour or model come with /v1/stats/fairness and "
                      "/v1/stats/fallback (not with group_by=reason)")
    own = storeport.decision_filter(**f_values)
    scope = None if who.admin else who.tenant
    # Per-tenant aggregates show a tenant caller every other tenant folded into "(others)".
    folded = storeport.decision_filter(**{**f_values, "tenant": None}) if scope is not None else own
    if kind == "migration":
        rows, report = insights.migration_view(db, own, thresholds)
        return {"rows": rows, "group_by": keys, "comparison": insights.comparison(report)}
    out: dict[str, Any] = {"rows": insights.BUILDERS[kind](db, own, folded, scope, keys), "group_by": keys}
    # the pod-level figures of the window (audit.metrics), beside the grouped rows
    if kind == "fairness":
        out.update(podstats.fairness(db, own, scope, podstats.breakdown(by)))
    elif kind == "fallback" and "reason" not in keys:
        out.update(podstats.fallback(db, own, scope, podstats.breakdown(by)))
    elif kind == "health":
        out.update(podstats.health(db, own))
    return out


def _endpoint(kind: str) -> Callable[..., dict[str, Any]]:
    def endpoint(who: Annotated[Principal, Depends(principal)], db: Annotated[Any, Depends(store)],
                 cfg: Annotated[Settings, Depends(settings)], cluster: str | None = None, since: str | None = None, until: str | None = None,
                 tenant: str | None = None, model: str | None = None, policy_version: str | None = None,
                 group_by: str | None = None, by: str | None = None) -> dict[str, Any]:
        values = {"tenant": tenant_filter(who, params.label(tenant, "tenant")),
                  "cluster": params.label(cluster, "cluster"), "since": params.timestamp(since, "since"),
                  "until": params.timestamp(until, "until"), "model": params.model(model),
                  "policy_version": params.label(policy_version, "policy_version")}
        return _query(kind, db, who, values, group_by, cfg.migration_thresholds, by)

    endpoint.__name__ = f"{kind}_stats"
    return endpoint


for _kind in GROUPINGS:
    router.add_api_route(f"/{_kind}", _endpoint(_kind), methods=["GET"], summary=SUMMARIES[_kind])
