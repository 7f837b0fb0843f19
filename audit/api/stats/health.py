"""``/v1/stats/health``: health verdicts, retries and terminal failures per hour, or device
verdicts per device model, with the window's unhealthy devices and device-hours.

Per hour the store's ``health_stats`` answers; per model (or hour × model) this module's query
counts the unhealthy / binding_conflict / stale_slice verdicts in the tiers of that model. Nodes
are not in the tier rows, so a per-node split is not offered.
"""

from __future__ import annotations

from typing import Any

from audit.api import podstats, storeport
from audit.api.stats import Ask, StatsKind
from audit.store.aggregates import FINAL, HOUR_FMT, Query
from audit.store.filters import DecisionFilter, conditions, where_sql

DECISION_HOUR = HOUR_FMT.format(col="toStartOfHour(time)")


def health_by_model(query: Query, f: DecisionFilter, by_hour: bool) -> list[dict]:
    """Per (hour ×) device model: unhealthy / binding_conflict / stale_slice device verdicts."""
    clauses, values = conditions(f)
    hour = f"{DECISION_HOUR} AS h" if by_hour else "'' AS h"
    sql = (
        f"SELECT {hour}, model, sum(reasons['unhealthy']), sum(reasons['binding_conflict']), "
        "sum(reasons['stale_slice']) FROM decision_tiers FINAL "
        f"WHERE decision_id IN (SELECT decision_id FROM decisions {where_sql(clauses)}) "
        "GROUP BY h, model ORDER BY h, model"
    )
    out = []
    for h, model, unhealthy, conflict, stale in query(sql, values, FINAL).result_rows:
        row: dict[str, Any] = {"hour": h} if by_hour else {}
        row.update(model=model, unhealthy=int(unhealthy), binding_conflict=int(conflict), stale_slice=int(stale))
        out.append(row)
    return out


def answer(ask: Ask) -> dict[str, Any]:
    if ask.keys == ["hour"]:
        rows = storeport.call(ask.db.health_stats, ask.own)
    else:
        rows = storeport.call(ask.db.insight, health_by_model, ask.own, "hour" in ask.keys)
    return {"rows": rows, **podstats.health(ask.db, ask.own)}


KIND = StatsKind(
    name="health",
    summary="Health verdicts, retries and terminal failures per hour, or per device model (group_by=model or "
            "hour,model), with the window's unhealthy devices and device-hours",
    groupings=(("hour",), ("model",), ("hour", "model")),
    answer=answer,
)
