"""``/v1/stats/replay``: the determinism status of the latest replay run per decision, counted per
hour of decision time or per mismatch cause.

Replay runs are per decision: a tenant sees the runs of its own decisions only.
"""

from __future__ import annotations

from typing import Any

from audit.api import storeport
from audit.api.stats import Ask, StatsKind
from audit.errors import UserError
from audit.store.aggregates import HOUR_FMT, Query
from audit.store.filters import DecisionFilter, conditions, where_sql

DECISION_HOUR = HOUR_FMT.format(col="toStartOfHour(time)")


def replay_status(query: Query, f: DecisionFilter, group: str) -> list[dict]:
    """Latest replay run per decision under ``f``, counted per hour of decision time (``group="hour"``:
    runs, matched, mismatched) or per mismatch cause (``group="cause"``; "" for matches)."""
    if group not in ("hour", "cause"):
        raise UserError(f"group_by {group!r}: replay status is grouped by hour or cause")
    clauses, values = conditions(f)
    key = "h" if group == "hour" else "c"
    sql = (
        f"SELECT {key}, count(), countIf(m), countIf(NOT m) FROM ("
        "SELECT r.decision_id, argMax(r.match, r.time) AS m, argMax(r.cause, r.time) AS c FROM replay_runs AS r "
        f"WHERE r.decision_id IN (SELECT decision_id FROM decisions {where_sql(clauses)}) GROUP BY r.decision_id) AS x "
        f"INNER JOIN (SELECT decision_id, any({DECISION_HOUR}) AS h FROM decisions {where_sql(clauses)} "
        f"GROUP BY decision_id) AS d ON x.decision_id = d.decision_id GROUP BY {key} ORDER BY {key}"
    )
    name = "hour" if group == "hour" else "cause"
    return [{name: k, "runs": int(n), "matched": int(ok), "mismatched": int(bad)}
            for k, n, ok, bad in query(sql, values, None).result_rows]


def answer(ask: Ask) -> dict[str, Any]:
    return {"rows": storeport.call(ask.db.insight, replay_status, ask.own, ask.keys[0])}


KIND = StatsKind(
    name="replay",
    summary="Determinism status of the latest replay run per decision, per hour of decision time or per cause",
    groupings=(("hour",), ("cause",)),
    answer=answer,
)
