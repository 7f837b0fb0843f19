"""``/v1/stats/fallback``: fallback decision counts, or why the preferred model was skipped.

The rows are the store's rollup-aware ``fallback_stats``: counts of decision records, every attempt
of a pod, so a row's fell-back allocations are ``fallback_decisions``, not ``fallbacks``; the
window's per-pod figures beside them (first-choice rate, ``fallbacks`` — pods —, regret, paths) are
``audit.metrics``'s, through ``audit.api.podstats``. ``group_by=reason[,preferred]`` counts device verdicts instead, in the
tiers of each decision's preferred model that were not chosen.
"""

from __future__ import annotations

from typing import Any

from audit.api import params, podstats, storeport
from audit.api.problems import Problem
from audit.api.stats import Ask, StatsKind
from audit.store.aggregates import FINAL, Query
from audit.store.filters import DecisionFilter, conditions, where_sql

GROUPS = ("tenant", "model", "preferred", "hour", "cluster", "track", "policy_version", "outcome")
DEFAULT = ("tenant", "preferred", "model")


def skip_reasons(query: Query, f: DecisionFilter, by_preferred: bool = False) -> list[dict[str, Any]]:
    """Device verdicts per reason code in the tiers of each decision's preferred model that were not
    the chosen tier (``selected`` excluded), over the decisions that did not get their preferred
    model: why the preferred model was skipped."""
    clauses, values = conditions(f)
    clauses += ["preferred_model != ''", "allocated_model != preferred_model"]
    # the tier rows carry tenant and time too: narrowing them first keeps the join small
    t_clauses, t_values = conditions(DecisionFilter(tenant=f.tenant, since=f.since, until=f.until))
    values.update(t_values)  # the same names bound to the same values
    pref = "d.preferred_model AS p, " if by_preferred else ""
    group = "p, reason" if by_preferred else "reason"
    sql = (
        f"SELECT {pref}reason, sum(n) FROM (SELECT decision_id, tier, model, reasons FROM decision_tiers FINAL "
        f"{where_sql(t_clauses)}) AS t INNER JOIN (SELECT decision_id, preferred_model, tier_index FROM decisions FINAL "
        f"{where_sql(clauses)}) AS d ON t.decision_id = d.decision_id "
        "ARRAY JOIN mapKeys(t.reasons) AS reason, mapValues(t.reasons) AS n "
        "WHERE t.model = d.preferred_model AND toInt16(t.tier) != d.tier_index AND reason != 'selected' "
        f"GROUP BY {group} ORDER BY {group}"
    )
    out = []
    for row in query(sql, values, FINAL).result_rows:
        if by_preferred:
            out.append({"preferred": row[0], "reason": row[1], "devices": int(row[2])})
        else:
            out.append({"reason": row[0], "devices": int(row[1])})
    return out


def keys(group_by: str | None) -> list[str]:
    """Any combination of ``GROUPS``, or ``reason`` alone or with ``preferred``."""
    chosen = params.group_by(group_by, DEFAULT, (*GROUPS, "reason"))
    if "reason" in chosen and not set(chosen) <= {"reason", "preferred"}:
        raise Problem("invalid-parameter", "group_by: reason combines with preferred only")
    return chosen


def answer(ask: Ask) -> dict[str, Any]:
    if "reason" in ask.keys:
        # skip reasons come from tier rows, which have no folded form: a tenant sees its own only
        return {"rows": storeport.call(ask.db.insight, skip_reasons, ask.own, "preferred" in ask.keys)}
    # only rows per tenant can fold the other tenants apart into "(others)"; without a tenant
    # column a tenant caller's rows count its own decisions, as its pod figures beside them do
    rows = storeport.call(ask.db.fallback_stats, ask.folded if "tenant" in ask.keys else ask.own, ask.keys,
                          scope_tenant=ask.scope)
    # regret is a per-pod figure of the window (``audit.metrics.regret``), given beside the rows
    return {"rows": rows, **podstats.fallback(ask.db, ask.own, ask.scope, ask.by)}


KIND = StatsKind(
    name="fallback",
    summary="Rows of decision-record counts per group (decisions, allocated, fallback_decisions, fallback_rate, "
            "unschedulable: every attempt of a pod counts), with the window's per-pod first-choice rate, fallbacks "
            "(pods), regret and paths (docs/metrics.md); group_by=reason[,preferred] gives device verdicts for why "
            "the preferred model was skipped",
    groupings=(DEFAULT,),
    answer=answer,
    keys=keys,
    breakdowns=True,
)
