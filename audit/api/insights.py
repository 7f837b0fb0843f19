"""The figures the dashboards draw beyond the store's plain aggregates, assembled per endpoint.

Each builder gets the caller's own filter (``own``: a tenant caller's tenant set), the filter
that folds other tenants (``folded``: tenant unset, with ``scope`` the tenant to keep, None for
admins) and the group keys. Counting happens in ClickHouse (``audit.store.insights``); this
module joins those answers with the per-pod figures of ``audit.api.podstats`` (pending and
starving pods) and with ``audit.migration``'s verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from audit import migration, thresholds_file
from audit.api import podstats, storeport
from audit.api.problems import Problem
from audit.policy import Policy
from audit.store import insights
from audit.store.aggregates import OTHERS
from audit.store.filters import DecisionFilter
from audit.timestamps import parse_time_ms

Builder = Callable[[Any, DecisionFilter, DecisionFilter, "str | None", list[str]], list[dict[str, Any]]]


def fallback(db: Any, own: DecisionFilter, folded: DecisionFilter, scope: str | None, keys: list[str]) -> list[dict[str, Any]]:
    if "reason" in keys:
        # skip reasons come from tier rows, which have no folded form: a tenant sees its own only
        return storeport.insight(db, insights.skip_reasons, own, "preferred" in keys)
    # regret is a per-pod figure of the window (``audit.metrics.regret``), given beside the rows
    rows: list[dict[str, Any]] = storeport.call(db.fallback_stats, folded, keys, scope_tenant=scope)
    return rows


def _h100eq(usage: list[dict[str, Any]], policy: Policy) -> dict[tuple[str, str], float]:
    out: dict[tuple[str, str], float] = {}
    for u in usage:
        key = (u["hour"], u["tenant"])
        out[key] = out.get(key, 0.0) + u["devices_allocated"] * policy.h100_equivalent(u["model"])
    return out


def fairness(db: Any, own: DecisionFilter, folded: DecisionFilter, scope: str | None, keys: list[str]) -> list[dict[str, Any]]:
    """Decision counts per tenant (per hour × tenant with ``group_by=hour,tenant``): attempts,
    allocations and devices handed out. Usage, entitlement, waits, pending and starving are per-pod
    figures of the window (``audit.api.podstats``), given beside the rows."""
    by_hour = keys == ["hour", "tenant"]
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for u in storeport.insight(db, insights.usage_by_model, folded, by_hour, scope):
        head = {"hour": u["hour"], "tenant": u["tenant"]} if by_hour else {"tenant": u["tenant"]}
        acc = rows.setdefault((u["hour"], u["tenant"]), {**head, "decisions": 0, "allocated": 0, "devices_allocated": 0})
        for k in ("decisions", "allocated", "devices_allocated"):
            acc[k] += u[k]
    return [rows[k] for k in sorted(rows, key=lambda k: (k[0], k[1] == OTHERS, k[1]))]


def health(db: Any, own: DecisionFilter, folded: DecisionFilter, scope: str | None, keys: list[str]) -> list[dict[str, Any]]:
    if keys == ["hour"]:
        rows: list[dict[str, Any]] = storeport.call(db.health_stats, own)
        return rows
    return storeport.insight(db, insights.health_by_model, own, "hour" in keys)


def _estimate(interval: migration.Interval) -> float | None:
    return None if math.isnan(interval.estimate) else interval.estimate


def _held_share(releases: migration.Releases, pod: dict[str, Any]) -> float | None:
    """GPU utilisation of one bound pod as ``audit.migration`` defines it: of the time from creation
    until the first release at or after binding, the share it held the devices."""
    if not releases:
        return None
    for key in ((pod["cluster"], pod["namespace"], pod["pod_key"]), (pod["cluster"], pod["namespace"], pod["pod"])):
        found = releases.get(key)
        times = [found] if isinstance(found, str) else list(found or [])
        after = sorted(ms for ms in (parse_time_ms(t) for t in times) if ms >= pod["bound_ms"])
        if after:
            held = float(after[0] - pod["bound_ms"])
            total = held + pod["bound_wait_ms"]
            return held / total if total > 0 else 1.0
    return None


def _moments(row: dict[str, Any], utilisation: float | None) -> dict[str, migration.Moments]:
    """A row of ``insights.pod_outcomes`` (pods of one cohort × stratum, as sums) as the moments of
    each metric; outcomes are 0 or 1, so their sums of squares are their sums."""
    m = migration.Moments
    return {
        "success_rate": m(row["pods"], row["bound"], row["bound"]),
        "fallback_rate": m(row["bound"], row["fallbacks"], row["fallbacks"]),
        "scheduling_latency_ms": m(row["bound"], row["bound_wait_ms"], row["bound_wait_ms_sq"]),
        "time_pending_ms": m(row["pods"], row["pending_ms"], row["pending_ms_sq"]),
        "gpu_utilisation": m.of([] if utilisation is None else [utilisation]),
    }


def cohorts(db: Any, f: DecisionFilter) -> dict[migration.CohortKey, migration.Cohort]:
    """``audit.migration`` cohorts from per-pod outcomes folded in ClickHouse (``insights.pod_outcomes``):
    per stratum as moments, so a million pods cost a few hundred rows."""
    groups, released = storeport.insight(db, insights.pod_outcomes, f)
    releases = migration.releases_from_events(storeport.insight(db, insights.pod_release_events, f.cluster)) \
        if released else {}
    out: dict[migration.CohortKey, migration.Cohort] = {}
    for row in released + groups:
        key = migration.CohortKey(row["track"], row["template_version"])
        share = _held_share(releases, row) if row["pod_key"] else None
        hour = migration.stratum_hour(datetime.fromtimestamp(int(row["first_hour"]) * 3600, UTC))
        out.setdefault(key, migration.Cohort(key)).count((row["model"], row["tenant"], hour), _moments(row, share))
    return dict(sorted(out.items()))


def migration_view(db: Any, own: DecisionFilter,
                   thresholds: migration.Thresholds | None = None) -> tuple[list[dict[str, Any]], migration.Report]:
    """Cohort rows with each cohort's utilisation, its matched and unmatched pods and the verdict of
    candidate against baseline, and the report behind them."""
    rows: list[dict[str, Any]] = storeport.call(db.migration_stats, own)
    if thresholds is None:
        # `claimtrail serve` without --migration-thresholds: the file `claimtrail migration report` defaults to
        try:
            thresholds = thresholds_file.shipped()
        except migration.MigrationError as exc:
            raise Problem("unavailable", f"migration thresholds: {exc}") from None
    try:
        report = migration.compare(cohorts(db, own), thresholds)
    except migration.MigrationError as exc:
        raise Problem("unexplainable", f"migration cohorts: {exc}") from None
    for r in rows:
        key = migration.CohortKey(r["track"], r["template_version"])
        described = report.cohorts.get(key)
        r["utilisation"] = _estimate(described["gpu_utilisation"]) if described else None
        r["verdict"] = report.verdict.value
        r["reason"] = "; ".join(report.reasons)
        # pods of this cohort sharing a model × tenant × hour with the other side, and those that do not
        # (None for a cohort that is neither baseline nor candidate)
        matched = report.matching.by_cohort.get(key)
        r["matched_pods"], r["unmatched_pods"] = matched if matched else (None, None)
    return rows, report


def migration_cohorts(db: Any, own: DecisionFilter, folded: DecisionFilter, scope: str | None, keys: list[str],
                      thresholds: migration.Thresholds | None = None) -> list[dict[str, Any]]:
    return migration_view(db, own, thresholds)[0]


def comparison(report: migration.Report) -> dict[str, Any]:
    """The verdict's figures as ``claimtrail migration report -o json`` prints them, without the
    per-cohort descriptions the rows carry: the strata, matched and unmatched pods, and per metric the
    stratified regression with its interval beside the unstratified one."""
    out = report.to_dict()
    del out["cohorts"]
    return out


def replay(db: Any, own: DecisionFilter, folded: DecisionFilter, scope: str | None, keys: list[str]) -> list[dict[str, Any]]:
    # replay runs are per decision: a tenant sees the runs of its own decisions only
    return storeport.insight(db, insights.replay_status, own, keys[0])


def overview(db: Any, own: DecisionFilter, folded: DecisionFilter, scope: str | None, keys: list[str]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = storeport.call(db.fallback_stats, folded, ["tenant"], scope_tenant=scope)
    pending = _pending(db, own, scope)
    for r in rows:
        p = pending.get(r["tenant"], {})
        r["pending_now"] = p.get("pending_now", 0)
        r["starving_pods"] = p.get("starving_pods", 0)
    return rows


def _pending(db: Any, own: DecisionFilter, scope: str | None) -> dict[str, dict[str, int]]:
    """Per tenant row, pods pending at the window end and starving pods, from the pod lifecycle."""
    return {t["tenant"]: {"pending_now": t["pending_at_end"], "starving_pods": t["starving_pods"]}
            for t in podstats.fairness(db, own, scope)["tenants"]}


# migration_view takes the server's thresholds as well and is called on its own
BUILDERS: dict[str, Builder] = {"fallback": fallback, "fairness": fairness, "health": health, "replay": replay,
                                "overview": overview}
