"""``/v1/stats/migration``: device-plugin vs DRA cohorts with utilisation and the
promote / hold / rollback verdict of ``audit.migration``.

The cohort rows (decisions, success and fallback rates, waits) are the store's ``migration_stats``;
the verdict compares the cohorts' pods within model × tenant × hour strata, from per-pod outcomes
this module's query folds in ClickHouse (so a million decisions never become a million Python
records). The verdict's figures are under ``comparison``, as ``claimtrail migration report -o json``
prints them.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from audit import migration, thresholds_file
from audit.api import storeport
from audit.api.problems import Problem
from audit.api.stats import Ask, StatsKind
from audit.store.aggregates import FINAL, Query
from audit.store.filters import DecisionFilter, conditions, where_sql
from audit.store.ports import StoreReads
from audit.timestamps import parse_time_ms

# A pod's identity within a cluster: its uid, or its name for records that carry no uid.
_POD_KEY = "if(pod_uid != '', pod_uid, pod)"
_POD = f"cluster, namespace, {_POD_KEY}"
# A pod's attempts in order (seq, then time, then attempt) as one UInt256 that sorts the same way:
# seq in the top 64 bits, the millisecond time (sign bit flipped so negative times sort first) in
# the next 64, the attempt in the low 16. argMax/argMin compare one wide integer much faster than a
# tuple, which matters when a million pods are folded.
ATTEMPT_ORDER = (
    "bitOr(bitOr(bitShiftLeft(toUInt256(seq), 80), bitShiftLeft(toUInt256(bitXor(reinterpretAsUInt64("
    "toUnixTimestamp64Milli(time)), 9223372036854775808)), 16)), toUInt256(attempt))"
)


_RELEASES = ("SELECT cluster, namespace, name, JSONExtractString(body, 'payload', 'metadata', 'uid') AS uid FROM events "
             "WHERE object_kind = 'Pod' AND (type = 'delete' OR "
             "JSONExtractString(body, 'payload', 'status', 'phase') IN ('Succeeded', 'Failed'))")


def pod_outcomes(query: Query, f: DecisionFilter) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Pods under ``f``, folded as ``audit.migration.build_cohorts`` folds a pod's records (attempts
    ordered by seq, time and attempt; a pod's attempts never tie on all three): the latest attempt
    names the cohort (track, template_version), the pod name and the stratum's tenant and model (its
    preferred model, else the bound attempt's allocated one); the stratum's hour is that of the pod's
    earliest attempt, as hours since the epoch; the first allocated attempt is the bound one (its fallback flag, wait and time), ``pending_ms`` is the largest wait of any attempt.

    Done in ClickHouse so a million decisions never become a million Python records: pods that
    never released their devices (no Pod delete or finished phase in the event log, so no
    utilisation to measure) come back as counts per distinct outcome; the released ones one by one,
    with what their utilisation needs. Pods are grouped by a 64-bit hash of (cluster, namespace,
    uid or name).

    One pass over the rows, with few aggregate states per pod: whether a row's pod may have been
    released (its name or uid is in the release events) is decided per row, so the pod's names —
    strings, costly to carry for a million pods — are only kept from those rows. A pod released by
    uid has every row marked and one released by its latest name has its latest row marked, so
    "bound and the latest row is marked" is exactly "released", and the latest marked row then
    carries the latest name."""
    clauses, params = conditions(f)
    rows = (
        f"SELECT cityHash64({_POD}) AS h, cluster, namespace, pod, {_POD_KEY} AS k, track, template_version, "
        f"preferred_model, allocated_model, tenant, outcome, fallback, wait_ms, time, {ATTEMPT_ORDER} AS o, "
        f"(cluster, namespace, pod) IN (SELECT cluster, namespace, name FROM ({_RELEASES})) "
        f"OR (cluster, namespace, k) IN (SELECT cluster, namespace, uid FROM ({_RELEASES}) WHERE uid != '') AS marked "
        f"FROM decisions FINAL {where_sql(clauses)}"
    )
    pods = (
        "SELECT argMaxIf((cluster, namespace, k, pod), o, marked) AS names, "
        "argMax((track, template_version, marked, preferred_model, tenant), o) AS latest, "
        "max(outcome = 'allocated') AS bound, "
        "argMinIf((fallback, wait_ms, toUnixTimestamp64Milli(time), allocated_model), o, outcome = 'allocated') "
        "AS first_bound, "
        "intDiv(toUnixTimestamp64Milli(min(time)), 3600000) AS first_hour, "
        f"max(wait_ms) AS pending, bound AND latest.3 AS rel FROM ({rows}) GROUP BY h"
    )
    sql = ("SELECT rel, if(rel, names.1, ''), if(rel, names.2, ''), if(rel, names.3, ''), if(rel, names.4, ''), "
           "latest.1, latest.2, bound, first_bound.1, first_bound.2, if(rel, first_bound.3, 0), pending, "
           "if(latest.4 != '', latest.4, if(bound, first_bound.4, '')), latest.5, first_hour, count() "
           f"FROM ({pods}) GROUP BY ALL ORDER BY ALL")
    keys = ("cluster", "namespace", "pod_key", "pod", "track", "template_version", "bound", "fallback", "bound_wait_ms",
            "bound_ms", "pending_ms", "model", "tenant", "first_hour", "pods")
    groups: list[dict[str, Any]] = []
    singles: list[dict[str, Any]] = []
    for row in query(sql, params, FINAL).result_rows:
        (singles if row[0] else groups).append(dict(zip(keys, row[1:], strict=True)))
    return groups, singles


def pod_release_events(query: Query, cluster: str | None = None) -> list[dict[str, Any]]:
    """Pod events that release devices (a delete, or a Succeeded/Failed phase), as event dicts."""
    clauses = ["object_kind = 'Pod'",
               "(type = 'delete' OR JSONExtractString(body, 'payload', 'status', 'phase') IN ('Succeeded', 'Failed'))"]
    params: dict[str, Any] = {}
    if cluster is not None:
        clauses.append("cluster = {cluster:String}")
        params["cluster"] = cluster
    rows = query(f"SELECT body FROM events {where_sql(clauses)} ORDER BY cluster, seq LIMIT 1 BY cluster, seq",
                 params, None).result_rows
    return [json.loads(r[0]) for r in rows]


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


def _pod(key: migration.CohortKey, row: dict[str, Any], utilisation: float | None) -> migration.PodOutcome:
    bound = bool(row["bound"])
    hour = migration.stratum_hour(datetime.fromtimestamp(int(row["first_hour"]) * 3600, UTC))
    return migration.PodOutcome(key=key, succeeded=bound, fallback=bound and bool(row["fallback"]),
                                latency_ms=float(row["bound_wait_ms"]) if bound else None,
                                pending_ms=float(row["pending_ms"]), utilisation=utilisation,
                                stratum=(row["model"], row["tenant"], hour))


def cohorts(db: StoreReads, f: DecisionFilter) -> dict[migration.CohortKey, migration.Cohort]:
    """``audit.migration`` cohorts from per-pod outcomes folded in ClickHouse (``pod_outcomes``);
    pods with the same outcome share one (read-only) PodOutcome, so a million pods cost little."""
    groups, released = storeport.call(db.insight, pod_outcomes, f)
    releases = migration.releases_from_events(storeport.call(db.insight, pod_release_events, f.cluster)) \
        if released else {}
    out: dict[migration.CohortKey, migration.Cohort] = {}
    for row in released + groups:
        key = migration.CohortKey(row["track"], row["template_version"])
        share = _held_share(releases, row) if row["bound"] and row["pod_key"] else None
        out.setdefault(key, migration.Cohort(key)).pods.extend([_pod(key, row, share)] * int(row["pods"]))
    return dict(sorted(out.items()))


def migration_view(db: StoreReads, own: DecisionFilter,
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


def comparison(report: migration.Report) -> dict[str, Any]:
    """The verdict's figures as ``claimtrail migration report -o json`` prints them, without the
    per-cohort descriptions the rows carry: the strata, matched and unmatched pods, and per metric the
    stratified regression with its interval beside the unstratified one."""
    out = report.to_dict()
    del out["cohorts"]
    return out


def answer(ask: Ask) -> dict[str, Any]:
    rows, report = migration_view(ask.db, ask.own, ask.thresholds)
    return {"rows": rows, "comparison": comparison(report)}


KIND = StatsKind(
    name="migration",
    summary="Device-plugin vs DRA cohorts with utilisation and the promote/hold/rollback verdict; the comparison "
            "is made within model × tenant × hour strata (its figures under `comparison`)",
    groupings=(("track", "template_version"),),
    answer=answer,
)
