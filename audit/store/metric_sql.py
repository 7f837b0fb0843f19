"""Every metric of ``audit.metrics`` as SQL over the store's ``pods`` table and its series.

Each query below sits beside the reference function it implements and computes, for one cluster
and one window [since, until), exactly what that function computes over the fold's ``PodLife``
rows: the same population (NULL times are "not happened", as ``None`` is), the same clipping, and
only exact arithmetic in SQL — integer millisecond sums, counts, maxima and nearest-rank
percentiles taken by integer rank (⌈q·n⌉ = ⌊(100q·n + 99) / 100⌋, ``audit.store.rank_sql``, never
ClickHouse's ``quantile*``). What is float in the reference — milliseconds to hours, the
H100-equivalent weighting (summed per distinct weight, then ``eq_hours``), entitlement and
Jain's index — is done in Python on those exact aggregates by the reference's own code:
``SqlPods`` supplies the per-pod passes ``audit.metrics.report`` runs, and the report functions
assemble the finished figures from them as they do for the in-memory fold. A property test holds
the two to equality, floats to the last bit, on random histories.

The queries take ``{c:String}`` (cluster), ``{s:Int64}`` and ``{u:Int64}`` (window start and
end, ms since the epoch), and where said ``{scope:String}`` or ``{t:Int64}``; an external
ClickHouse user (a Grafana panel, say) can run them as they stand (``docs/metrics.md`` points
here). Every read of a table takes ``FINAL``: a pod's row is rewritten as it changes, and only
its latest version counts.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from audit.metrics.fallback import FallbackStats
from audit.metrics.lifecycle import Lifecycle
from audit.metrics.report import fairness_report, fallback_report
from audit.metrics.usage import HOUR_MS, Usage, eq_hours
from audit.metrics.waits import WaitStats
from audit.metrics.window import Window
from audit.policy import Policy, Tenant, default_policy
from audit.store.rank_sql import nearest_rank_sql

# (sql, parameters) -> a result with ``result_rows``: what ``AuditStore.insight(fn, ...)`` hands ``fn``
Query = Callable[..., Any]

NEVER = "9223372036854775807"  # a time not reached: later than every window's end

# ---- the series: audit.metrics.lifecycle.Lifecycle.policies / .capacity -----------------------------

POLICIES_SQL = """
SELECT from_ms, policy_name, policy_version, tenants, weights, starvation_ms, regret_window_ms
FROM pod_policies FINAL WHERE cluster = {c:String} ORDER BY idx"""

CAPACITY_SQL = """
SELECT from_ms, h100_eq FROM pod_capacity FINAL WHERE cluster = {c:String} ORDER BY idx"""

# ---- audit.metrics.usage.tenant_usage: integer ms held per tenant and per pod weight ---------------
# held = min(released | until, until) − max(allocated, since), pods with devices that held > 0

USAGE_SQL = """
SELECT tenant, h100_eq, sum(devices * held) AS device_ms, sum(held) AS ms
FROM (SELECT tenant, h100_eq, devices,
             least(ifNull(released_ms, {u:Int64}), {u:Int64}) - greatest(assumeNotNull(allocated_ms), {s:Int64}) AS held
      FROM pods FINAL WHERE cluster = {c:String} AND allocated_ms IS NOT NULL AND devices > 0)
WHERE held > 0
GROUP BY tenant, h100_eq"""

# ---- audit.metrics.usage.alive_in: tenants with a pod that existed at some moment of the window ----

ALIVE_SQL = """
SELECT DISTINCT tenant FROM (
  SELECT tenant, created_ms, least(ifNull(failed_ms, {never}), ifNull(released_ms, {never})) AS gone
  FROM pods FINAL WHERE cluster = {c:String})
WHERE created_ms < {u:Int64} AND gone > {s:Int64}""".replace("{never}", NEVER)

# ---- audit.metrics.waits.tenant_waits and audit.metrics.starving.starving_pods ----------------------
# started: first bound in the window; pending: created before its end, neither bound nor failed by
# then; failed: failed in the window, never bound. Per group of tenants ({group}: the tenant, or
# the scope tenant and "(others)"): the count started, the nearest-rank p50/p95/p99 of their
# waits (the ⌈q·n⌉-th smallest, by integer rank; NULL when none started, where indexing the empty
# array would give 0), the counts pending and failed and the longest wait so far among those (0
# when none); STARVING_SQL: the count of those started or pending whose wait (or until − created
# while pending) is over {t:Int64}.

_STATES = """
    SELECT {group} AS g, created_ms,
           ifNull(bound_ms >= {s:Int64} AND bound_ms < {u:Int64}, 0) AS started,
           created_ms < {u:Int64} AND ifNull(bound_ms, {never}) >= {u:Int64}
             AND ifNull(failed_ms, {never}) >= {u:Int64} AS pending,
           bound_ms IS NULL AND ifNull(failed_ms >= {s:Int64} AND failed_ms < {u:Int64}, 0) AS failed,
           ifNull(bound_ms, 0) - created_ms AS waited,
           if(pending, {u:Int64} - created_ms, ifNull(failed_ms, 0) - created_ms) AS so_far
    FROM pods FINAL WHERE cluster = {c:String}""".replace("{never}", NEVER)

WAITS_SQL = f"""
SELECT g, length(w) AS n,
       {nearest_rank_sql("w", "n", 50)} AS p50,
       {nearest_rank_sql("w", "n", 95)} AS p95,
       {nearest_rank_sql("w", "n", 99)} AS p99, n_pending, n_failed, longest
FROM (
  SELECT g, arraySort(groupArrayIf(waited, started)) AS w, countIf(pending) AS n_pending,
         countIf(failed) AS n_failed, greatest(0, maxIf(so_far, pending OR failed)) AS longest
  FROM ({{states}})
  GROUP BY g)""".replace("{states}", _STATES)

STARVING_SQL = """
SELECT g, countIf((started AND waited > {t:Int64}) OR (pending AND {u:Int64} - created_ms > {t:Int64})) AS n
FROM ({states})
GROUP BY g
HAVING n > 0""".replace("{states}", _STATES)

# ---- audit.metrics.fairness.pending_intervals: per tenant, the union of pending intervals -----------
# [created, min(bound, failed, until)), merged in SQL: ordered by start, an interval opens a new run
# when it starts after every earlier one of its tenant has ended; a run is (min start, max end).
# Both window passes order by (a, b, row), a total order: with ties left to the engine, the two
# passes could order equal intervals differently and put one in the run before its own.

PENDING_SQL = """
SELECT tenant, min(a) AS a, max(b) AS b FROM (
  SELECT tenant, a, b, sum(opens) OVER (PARTITION BY tenant ORDER BY a, b, row ROWS UNBOUNDED PRECEDING) AS run
  FROM (
    SELECT tenant, a, b, row,
           (row_number() OVER (PARTITION BY tenant ORDER BY a, b, row)) = 1
             OR a > max(b) OVER (PARTITION BY tenant ORDER BY a, b, row ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
             AS opens
    FROM (SELECT tenant, row, created_ms AS a,
                 least(ifNull(bound_ms, {never}), ifNull(failed_ms, {never}), {u:Int64}) AS b
          FROM pods FINAL WHERE cluster = {c:String})
    WHERE b > a AND b > {s:Int64} AND a < {u:Int64}))
GROUP BY tenant, run
ORDER BY tenant, a""".replace("{never}", NEVER)

# ---- audit.metrics.fairness.hourly_use: integer ms held per (hour index, tenant, pod weight) ---------
# hours from the window start; a pod's share of hour i is min(end, since + (i+1)·1h) − max(start,
# since + i·1h) with start, end its holding clipped to the window

HOURLY_SQL = """
SELECT i, tenant, h100_eq,
       sum(least(e, {s:Int64} + (i + 1) * 3600000) - greatest(st, {s:Int64} + i * 3600000)) AS ms
FROM (
  SELECT tenant, h100_eq, st, e,
         arrayJoin(range(toUInt64(intDiv(st - {s:Int64}, 3600000)), toUInt64(intDiv(e - 1 - {s:Int64}, 3600000) + 1))) AS i
  FROM (SELECT tenant, h100_eq, greatest(assumeNotNull(allocated_ms), {s:Int64}) AS st,
               least(ifNull(released_ms, {u:Int64}), {u:Int64}) AS e
        FROM pods FINAL WHERE cluster = {c:String} AND allocated_ms IS NOT NULL AND devices > 0)
  WHERE e > st)
GROUP BY i, tenant, h100_eq"""

# ---- audit.metrics.fallback.fallback_stats: DRA pods with alternatives first bound in the window -----
# per (preferred, allocated) path: pods, first choice, fallbacks, regretted fallbacks

FALLBACK_SQL = """
SELECT preferred, allocated, count() AS pods, countIf(first_choice) AS first, countIf(fallback) AS fallbacks,
       countIf(fallback AND regretted) AS regretted
FROM (SELECT * FROM pods FINAL WHERE cluster = {c:String})
WHERE track = 'dra' AND alternatives AND bound_ms >= {s:Int64} AND bound_ms < {u:Int64} {tenant}
GROUP BY preferred, allocated"""

# ---- audit.metrics.health.device_health: distinct devices and integer ms unhealthy, per model --------
# a span's part of the window: min(end | until, until) − max(start, since), spans with a part > 0

HEALTH_SQL = """
SELECT model, uniqExact(device), sum(ms), 0 FROM (
  SELECT model, device, least(ifNull(end_ms, {u:Int64}), {u:Int64}) - greatest(start_ms, {s:Int64}) AS ms
  FROM unhealthy_spans FINAL WHERE cluster = {c:String})
WHERE ms > 0 GROUP BY model
UNION ALL
SELECT '', uniqExact(device), sum(ms), 1 FROM (
  SELECT device, least(ifNull(end_ms, {u:Int64}), {u:Int64}) - greatest(start_ms, {s:Int64}) AS ms
  FROM unhealthy_spans FINAL WHERE cluster = {c:String})
WHERE ms > 0"""


def _group_sql(scope: str | None) -> str:
    """The row a tenant's pods count in: its own, or, for a tenant caller, its own or (others)."""
    return "tenant" if scope is None else "if(tenant = {scope:String}, tenant, '(others)')"


@dataclass
class RankedWaits(WaitStats):
    """``WaitStats`` whose count and percentiles SQL computed (the waits themselves stay there)."""

    count: int = 0
    ranked: dict[float, int | None] = dataclasses.field(default_factory=dict)  # None: SQL's NULL, none started

    @property
    def pods_started(self) -> int:
        return self.count

    def p(self, q: float) -> float | None:
        ms = self.ranked.get(q)
        return None if ms is None else float(ms)


def series(query: Query, cluster: str) -> Lifecycle:
    """The cluster's policy and capacity timelines from their tables, as a lifecycle without pods
    (what entitlement, weights over time and the policy in force are read from)."""
    policies: list[tuple[int, Policy]] = []
    for from_ms, name, version, tenants, weights, starvation, regret in query(POLICIES_SQL, {"c": cluster}).result_rows:
        policy = dataclasses.replace(
            default_policy(name, version), tenants=tuple(Tenant(t, (), float(w)) for t, w in zip(tenants, weights,
                                                                                                 strict=True)),
            starvation_ms=int(starvation), regret_window_ms=int(regret))
        policies.append((int(from_ms), policy))
    capacity = [(int(t), float(c)) for t, c in query(CAPACITY_SQL, {"c": cluster}).result_rows]
    return Lifecycle(cluster, [], policies or [(0, default_policy())], capacity, [], 0)


class SqlPods:
    """The per-pod passes of ``audit.metrics.report``, each one SQL query over ``pods``."""

    def __init__(self, query: Query, cluster: str, scope: str | None = None) -> None:
        self.query = query
        self.cluster = cluster
        # the grouping the reports pass as a function (a tenant caller's own row and "(others)"),
        # which SQL cannot call: the rows are grouped by this scope instead
        self.scope = scope

    def _rows(self, sql: str, window: Window, **params: Any) -> Sequence[Sequence[Any]]:
        return self.query(sql, {"c": self.cluster, "s": window.since_ms, "u": window.until_ms, **params}).result_rows

    def usage(self, window: Window) -> dict[str, Usage]:
        device_ms: dict[str, int] = {}
        per: dict[str, dict[float, int]] = {}
        for tenant, weight, dev_ms, ms in self._rows(USAGE_SQL, window):
            device_ms[tenant] = device_ms.get(tenant, 0) + int(dev_ms)
            per.setdefault(tenant, {})[float(weight)] = int(ms)
        return {t: Usage(ms / HOUR_MS, eq_hours(per[t])) for t, ms in device_ms.items()}

    def alive_tenants(self, window: Window) -> set[str]:
        return {str(r[0]) for r in self._rows(ALIVE_SQL, window)}

    def _grouped(self, sql: str, window: Window, **params: Any) -> Sequence[Sequence[Any]]:
        return self._rows(sql.replace("{group}", _group_sql(self.scope)), window, scope=self.scope or "", **params)

    def waits(self, window: Window, group: Callable[[str], str] = lambda t: t) -> dict[str, WaitStats]:
        """Rows per tenant, or per ``self.scope`` and (others): ``group`` must be that grouping."""
        out: dict[str, WaitStats] = {}
        for g, n, p50, p95, p99, pending, failed, longest in self._grouped(WAITS_SQL, window):
            if n or pending or failed:
                ranked = {q: None if ms is None else int(ms) for q, ms in ((0.50, p50), (0.95, p95), (0.99, p99))}
                out[str(g)] = RankedWaits([], int(pending), int(failed), int(longest), int(n), ranked)
        return out

    def starving(self, window: Window, timeout_ms: int, group: Callable[[str], str] = lambda t: t) -> dict[str, int]:
        return {str(g): int(n) for g, n in self._grouped(STARVING_SQL, window, t=timeout_ms)}

    def pending(self, window: Window) -> dict[str, list[tuple[int, int]]]:
        out: dict[str, list[tuple[int, int]]] = {}
        for tenant, a, b in self._rows(PENDING_SQL, window):
            out.setdefault(str(tenant), []).append((int(a), int(b)))
        return out

    def hourly_use(self, window: Window) -> dict[tuple[int, str], float]:
        per: dict[tuple[int, str], dict[float, int]] = {}
        for i, tenant, weight, ms in self._rows(HOURLY_SQL, window):
            per.setdefault((int(i), str(tenant)), {})[float(weight)] = int(ms)
        return {k: eq_hours(v) for k, v in per.items()}

    def fallback(self, window: Window, tenant: str | None = None) -> FallbackStats:
        sql = FALLBACK_SQL.replace("{tenant}", "" if tenant is None else "AND tenant = {scope:String}")
        s = FallbackStats()
        for preferred, allocated, pods, first, fallbacks, regretted in self._rows(sql, window, scope=tenant or ""):
            s.pods_with_preference += int(pods)
            s.first_choice += int(first)
            s.fallbacks += int(fallbacks)
            s.regretted += int(regretted)
            s.paths[(str(preferred), str(allocated))] = int(pods)
        return s


def fairness_sql(query: Query, cluster: str, window: Window, scope: str | None = None) -> dict[str, Any]:
    """``audit.metrics.report.fairness_report`` with every per-pod pass run in SQL."""
    return fairness_report(series(query, cluster), window, scope, SqlPods(query, cluster, scope))


def fallback_sql(query: Query, cluster: str, window: Window, scope: str | None = None) -> dict[str, Any]:
    """``audit.metrics.report.fallback_report`` with its pass run in SQL."""
    return fallback_report(series(query, cluster), window, scope, SqlPods(query, cluster))


def health_sql(query: Query, cluster: str, window: Window) -> dict[str, Any]:
    """``audit.metrics.report.health_report`` from ``unhealthy_spans``."""
    models = []
    devices, hours = 0, 0.0
    rows = query(HEALTH_SQL, {"c": cluster, "s": window.since_ms, "u": window.until_ms}).result_rows
    for model, n, ms, total in sorted(rows, key=lambda r: (r[3], r[0])):
        if total:
            devices, hours = int(n), int(ms) / HOUR_MS
        else:
            models.append({"model": str(model), "unhealthy_devices": int(n), "unhealthy_device_hours": int(ms) / HOUR_MS})
    return {"unhealthy_devices": devices, "unhealthy_device_hours": hours, "models": models}
