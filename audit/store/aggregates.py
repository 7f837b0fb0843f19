"""Decision counts the store answers itself: fallback, health and migration cohorts.

These are the aggregates that know the store's layout (the hourly rollup, the tier rows); a
question only one ``/v1/stats`` kind asks is SQL in that kind's module (``audit.api.stats``),
built from the helpers here (``FINAL``, ``HOUR_FMT``, ``scoped_tenant``). Each function takes
``query(sql, parameters, settings)`` (the store's locked client call) and a ``DecisionFilter``.
Raw rows are read with ``FINAL`` so not-yet-merged duplicates never count; fallback questions
that need no raw-row filter are answered from the hourly rollup, whose sets of decision hashes
make it duplicate-tolerant. ``scope_tenant`` keeps one tenant's
own rows and folds every other tenant into ``"(others)"``, for tenant callers of the API.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from audit.errors import UserError
from audit.store.filters import DecisionFilter, conditions, rollup_can_answer, where_sql
from audit.store.rank_sql import nearest_rank_sql

Query = Callable[[str, dict[str, Any], dict[str, Any] | None], Any]

OTHERS = "(others)"
HOUR_FMT = "formatDateTime({col}, '%Y-%m-%dT%H:00:00Z', 'UTC')"
# group-by name -> (decisions column expression, rollup column)
GROUPS = {
    "tenant": ("tenant", "tenant"),
    # the allocated model groups as "model": "allocated" is already the allocated-decision count
    "model": ("allocated_model", "allocated_model"),
    "preferred": ("preferred_model", "preferred_model"),
    "hour": (HOUR_FMT.format(col="toStartOfHour(time)"), HOUR_FMT.format(col="hour")),
    "cluster": ("cluster", "cluster"),
    "track": ("track", "track"),
    "policy_version": ("policy_version", "policy_version"),
    "outcome": ("outcome", "outcome"),
}
FINAL = {"do_not_merge_across_partitions_select_final": 1}  # a record's partition never changes


def scoped_tenant(scope_tenant: str | None, column: str = "tenant") -> str:
    """The tenant column, or for a tenant caller its own tenant with every other one as OTHERS."""
    return f"if({column} = {{scope_tenant:String}}, {column}, '{OTHERS}')" if scope_tenant is not None else column


def fallback_stats(query: Query, f: DecisionFilter, group_by: Sequence[str], scope_tenant: str | None = None) -> list[dict]:
    """Per group: decisions, allocated, fallback_decisions, fallback_rate (of allocated; None when
    nothing was allocated) and unschedulable, each a count of decision records, not of pods."""
    for name in group_by:
        if name not in GROUPS:
            raise UserError(f"group_by {name!r}: must be one of {', '.join(sorted(GROUPS))}")
    names = list(dict.fromkeys(group_by))
    use_rollup = rollup_can_answer(f)
    exprs = []
    for name in names:
        expr = GROUPS[name][1 if use_rollup else 0]
        if name == "tenant":
            expr = scoped_tenant(scope_tenant)
        exprs.append(f"{expr} AS g_{name}")
    select = ", ".join([*exprs, "outcome AS o", "fallback AS fb"])
    group = ", ".join([*(f"g_{n}" for n in names), "o", "fb"])
    if use_rollup:
        clauses, params = conditions(f, time_column="hour")
        sql = (f"SELECT {select}, uniqExactMerge(decisions) AS n FROM fallback_1h {where_sql(clauses)} "
               f"GROUP BY {group}")
        settings = None
    else:
        clauses, params = conditions(f)
        sql = f"SELECT {select}, count() AS n FROM decisions FINAL {where_sql(clauses)} GROUP BY {group}"
        settings = FINAL
    if scope_tenant is not None:
        params["scope_tenant"] = scope_tenant
    out: dict[tuple, dict[str, Any]] = {}
    for row in query(sql, params, settings).result_rows:
        key = tuple(row[: len(names)])
        outcome, fallback, n = row[len(names)], bool(row[len(names) + 1]), int(row[len(names) + 2])
        acc = out.setdefault(key, {**dict(zip(names, key, strict=True)), "decisions": 0, "allocated": 0,
                                   "fallback_decisions": 0, "unschedulable": 0})
        acc["decisions"] += n
        if outcome == "allocated":
            acc["allocated"] += n
            acc["fallback_decisions"] += n if fallback else 0
        elif outcome == "unschedulable":
            acc["unschedulable"] += n
    result = [out[k] for k in sorted(out)]
    for acc in result:
        # a group with nothing allocated has no fallback rate: 0.0 would say its allocations never fell back
        acc["fallback_rate"] = acc["fallback_decisions"] / acc["allocated"] if acc["allocated"] else None
    return result

def health_stats(query: Query, f: DecisionFilter) -> list[dict]:
    """Per hour: decisions, retries by retry_class, terminal failures, and device verdict counts
    for unhealthy / binding_conflict / stale_slice from the tier evidence."""
    clauses, params = conditions(f)
    hour = HOUR_FMT.format(col="toStartOfHour(time)")
    by_hour: dict[str, dict[str, Any]] = {}
    sql = (f"SELECT {hour} AS h, retry_class, outcome, count() FROM decisions FINAL {where_sql(clauses)} "
           "GROUP BY h, retry_class, outcome ORDER BY h")
    for h, retry_class, outcome, n in query(sql, params, FINAL).result_rows:
        acc = by_hour.setdefault(h, {"hour": h, "decisions": 0, "retries": {}, "terminal_failures": 0,
                                     "unhealthy": 0, "binding_conflict": 0, "stale_slice": 0})
        acc["decisions"] += int(n)
        if retry_class == "terminal" or outcome == "error":
            acc["terminal_failures"] += int(n)
        elif retry_class:
            acc["retries"][retry_class] = acc["retries"].get(retry_class, 0) + int(n)
    tier_filter = DecisionFilter(tenant=f.tenant, since=f.since, until=f.until)
    t_clauses, t_params = conditions(tier_filter)
    if f.active() - {"tenant", "since", "until"}:
        d_clauses, d_params = conditions(f)
        t_clauses.append(f"decision_id IN (SELECT decision_id FROM decisions {where_sql(d_clauses)})")
        t_params.update(d_params)
    sql = (f"SELECT {hour} AS h, sum(reasons['unhealthy']), sum(reasons['binding_conflict']), "
           f"sum(reasons['stale_slice']) FROM decision_tiers FINAL {where_sql(t_clauses)} GROUP BY h")
    for h, unhealthy, conflict, stale in query(sql, t_params, FINAL).result_rows:
        if h in by_hour:
            by_hour[h].update(unhealthy=int(unhealthy), binding_conflict=int(conflict), stale_slice=int(stale))
    return [by_hour[h] for h in sorted(by_hour)]

def migration_stats(query: Query, f: DecisionFilter) -> list[dict]:
    """Per track × template_version cohort: decisions, success rate, fallback rate, and the
    nearest-rank p50/p95 of the decisions' ``wait_ms``."""
    clauses, params = conditions(f)
    sql = (
        f"SELECT track, template_version, n, allocated, fallbacks, {nearest_rank_sql('w', 'length(w)', 50)}, "
        f"{nearest_rank_sql('w', 'length(w)', 95)} "
        "FROM (SELECT track, template_version, count() AS n, countIf(outcome = 'allocated') AS allocated, "
        "countIf(outcome = 'allocated' AND fallback) AS fallbacks, arraySort(groupArray(wait_ms)) AS w "
        f"FROM decisions FINAL {where_sql(clauses)} GROUP BY track, template_version) "
        "ORDER BY track, template_version"
    )
    out = []
    for track, template, n, allocated, fallbacks, p50, p95 in query(sql, params, FINAL).result_rows:
        out.append({"track": track, "template_version": template, "decisions": int(n),
                    # a rate with no population is unknown, not 0: null, as every rate users see
                    "allocated": int(allocated), "success_rate": allocated / n if n else None,
                    "fallback_rate": fallbacks / allocated if allocated else None,
                    "wait_p50_ms": None if p50 is None else float(p50),
                    "wait_p95_ms": None if p95 is None else float(p95)})
    return out
