"""``/v1/stats/fairness``: decision counts per tenant (or per hour × tenant) with the window's
per-pod fairness figures.

The rows count decision records (attempts, allocations and devices handed out: ``decision_rows`` in
docs/metrics.md), not pods; usage, entitlement, waits, pending,
failed and starving pods, and Jain's index, are per-pod figures of the window from
``audit.metrics`` through ``audit.api.podstats``, given beside the rows.
"""

from __future__ import annotations

from typing import Any

from audit.api import podstats, storeport
from audit.api.stats import Ask, StatsKind
from audit.store.aggregates import FINAL, HOUR_FMT, OTHERS, Query, scoped_tenant
from audit.store.filters import DecisionFilter, conditions, where_sql

DECISION_HOUR = HOUR_FMT.format(col="toStartOfHour(time)")


def usage_by_model(query: Query, f: DecisionFilter, by_hour: bool, scope_tenant: str | None = None) -> list[dict]:
    """Per (hour ×) tenant × allocated model: decisions, allocated, devices allocated, first choices."""
    clauses, values = conditions(f)
    if scope_tenant is not None:
        values["scope_tenant"] = scope_tenant
    hour = f"{DECISION_HOUR} AS h, " if by_hour else "'' AS h, "
    sql = (
        f"SELECT {hour}{scoped_tenant(scope_tenant)} AS t, allocated_model, count(), countIf(outcome = 'allocated'), "
        "sumIf(n_devices, outcome = 'allocated'), countIf(outcome = 'allocated' AND tier_index = 0) "
        f"FROM decisions FINAL {where_sql(clauses)} GROUP BY h, t, allocated_model ORDER BY h, t, allocated_model"
    )
    names = ("hour", "tenant", "model", "decisions", "allocated", "devices_allocated", "first_choice")
    return [dict(zip(names, (*row[:3], *(int(x) for x in row[3:])), strict=True))
            for row in query(sql, values, FINAL).result_rows]


def answer(ask: Ask) -> dict[str, Any]:
    by_hour = ask.keys == ["hour", "tenant"]
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for u in storeport.call(ask.db.insight, usage_by_model, ask.folded, by_hour, ask.scope):
        head = {"hour": u["hour"], "tenant": u["tenant"]} if by_hour else {"tenant": u["tenant"]}
        acc = rows.setdefault((u["hour"], u["tenant"]), {**head, "decisions": 0, "allocated": 0, "devices_allocated": 0})
        for k in ("decisions", "allocated", "devices_allocated"):
            acc[k] += u[k]
    ordered = [rows[k] for k in sorted(rows, key=lambda k: (k[0], k[1] == OTHERS, k[1]))]
    return {"rows": ordered, **podstats.fairness(ask.db, ask.own, ask.scope, ask.by)}


KIND = StatsKind(
    name="fairness",
    summary="Decision-record counts per tenant (per hour with group_by=hour,tenant: decisions, allocated, "
            "devices_allocated, every attempt of a pod counting), with the window's per-pod figures: "
            "Jain's index whole and under contention, per tenant usage, entitlement, waits, pending, failed, "
            "starving (docs/metrics.md); by=hour|model|tenant_hour adds wait rows per hour, model or tenant and hour",
    groupings=(("tenant",), ("hour", "tenant")),
    answer=answer,
    breakdowns=True,
    tenant_hours=True,
)
