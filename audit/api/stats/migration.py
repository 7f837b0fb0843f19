"""``/v1/stats/migration``: device-plugin vs DRA cohorts with utilisation and the
promote / hold / rollback verdict of ``audit.migration``.

The cohort rows (decisions, success and fallback rates, waits: figures over decision records, defined
in docs/metrics.md under ``cohorts``) are the store's ``migration_stats``;
the verdict compares the cohorts' pods within strata of the model asked for × tenant × hour, from per-pod outcomes
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
from audit.records import Track
from audit.store.aggregates import FINAL, Query
from audit.store.connection import StoreError
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


# Per row: is the pod it belongs to (by name, or by uid) among those the event log released.
_MARKED = (f"((cluster, namespace, pod) IN (SELECT cluster, namespace, name FROM ({_RELEASES})) "
           f"OR (cluster, namespace, {_POD_KEY}) IN (SELECT cluster, namespace, uid FROM ({_RELEASES}) WHERE uid != ''))")
# A pod's cohort and stratum strings travel through the fold as one 64-bit hash each (folding a
# million pods' string tuples costs several times more); ``pod_outcomes`` maps them back.
_LATEST_CODE = "cityHash64(track, template_version, preferred_model, tenant)"
OUTCOME_SUMS = ("pods", "bound", "fallbacks", "bound_wait_ms", "bound_wait_ms_sq", "pending_ms", "pending_ms_sq")


def pod_outcomes(query: Query, f: DecisionFilter) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Pods under ``f``, folded as ``audit.migration.build_cohorts`` folds a pod's records (attempts
    ordered by seq, time and attempt; a pod's attempts never tie on all three): the latest attempt
    names the cohort (track, template_version), the pod's names and the stratum's tenant and, for a
    DRA pod, its model (the preferred model); the stratum's hour is that of the pod's earliest
    attempt, as hours since the epoch; the first allocated attempt is the bound one (its fallback
    flag, wait and time), a pod's pending time is the largest wait of any attempt.

    Done in ClickHouse so a million decisions never become a million Python objects: DRA pods that
    never released their devices (no Pod delete or finished phase in the event log, so no
    utilisation to measure) come back as sums per cohort × stratum (``OUTCOME_SUMS``: pods, bound
    pods, bound pods that fell back, and the sum and sum of squares of the bound wait and of the
    pending time — what ``audit.migration.Moments`` holds); released pods, and device-plugin pods
    whose records name no preferred model, one by one (``pods`` = 1) with their names: the released
    ones for their utilisation, the device-plugin ones because the model they asked for is then
    not in their records but in the event log (``audit.migration.asked_from_lifecycle``, by uid or
    name). ``model`` is the latest record's preferred model.
    Pods are grouped by a 64-bit hash of (cluster, namespace, uid or name).

    One pass over the rows, with few aggregate states per pod: whether a row's pod may have been
    released (its name or uid is in the release events) is decided per row, so the pod's names —
    strings, costly to carry for a million pods — are only kept from those rows and device-plugin
    ones. A pod released by uid has every row marked and one released by its latest name has its
    latest row marked, so "bound and the latest row is marked" is exactly "released", and the latest
    marked row then carries the latest name."""
    clauses, params = conditions(f)
    rows = (
        f"SELECT cityHash64({_POD}) AS h, cluster, namespace, pod, {_POD_KEY} AS k, {_LATEST_CODE} AS c, "
        "track = 'device-plugin' AND preferred_model = '' AS dp, outcome = 'allocated' AS ok, fallback, wait_ms, "
        f"toUnixTimestamp64Milli(time) AS ms, {ATTEMPT_ORDER} AS o, {_MARKED} AS marked "
        f"FROM decisions FINAL {where_sql(clauses)}"
    )
    pods = (
        "SELECT argMaxIf((cluster, namespace, k, pod), o, marked OR dp) AS names, argMax((c, dp, marked), o) AS latest, "
        "max(ok) AS bound, argMinIf((fallback, wait_ms, ms), o, ok) AS first_bound, "
        "intDiv(min(ms), 3600000) AS first_hour, max(wait_ms) AS pending, bound AND latest.3 AS rel, "
        "rel OR latest.2 AS one "
        f"FROM ({rows}) GROUP BY h"
    )
    sql = ("SELECT rel, if(one, names.1, ''), if(one, names.2, ''), if(one, names.3, ''), if(one, names.4, ''), "
           "if(rel, first_bound.3, 0), latest.1, first_hour, count(), "
           "sum(bound), sum(bound AND first_bound.1), sumIf(first_bound.2, bound), "
           "sumIf(toUInt128(first_bound.2) * first_bound.2, bound), sum(pending), sum(toUInt128(pending) * pending) "
           f"FROM ({pods}) GROUP BY ALL ORDER BY ALL")
    names = (f"SELECT DISTINCT {_LATEST_CODE}, track, template_version, preferred_model, tenant "
             f"FROM decisions {where_sql(clauses)}")
    latest: dict[int, tuple[str, str, str, str]] = {}
    for c, track, template, preferred, tenant in query(names, params, None).result_rows:
        if latest.setdefault(c, (track, template, preferred, tenant)) != (track, template, preferred, tenant):
            raise StoreError(f"pod_outcomes: two cohorts share the hash {c}")
    keys = ("cluster", "namespace", "pod_key", "pod", "bound_ms", "track", "template_version", "model", "tenant",
            "first_hour", *OUTCOME_SUMS)
    groups: list[dict[str, Any]] = []
    singles: list[dict[str, Any]] = []
    for row in query(sql, params, FINAL).result_rows:
        track, template, preferred, tenant = latest[row[6]]
        out = dict(zip(keys, (*row[1:6], track, template, preferred, tenant, *row[7:]), strict=True))
        out["released"] = bool(row[0])
        (singles if out["pod_key"] else groups).append(out)
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


def _moments(row: dict[str, Any], utilisation: float | None) -> dict[str, migration.Moments]:
    """A row of ``pod_outcomes`` (pods of one cohort × stratum, as sums) as the moments of
    each metric; outcomes are 0 or 1, so their sums of squares are their sums."""
    m = migration.Moments
    return {
        "success_rate": m(row["pods"], row["bound"], row["bound"]),
        "fallback_rate": m(row["bound"], row["fallbacks"], row["fallbacks"]),
        "scheduling_latency_ms": m(row["bound"], row["bound_wait_ms"], row["bound_wait_ms_sq"]),
        "time_pending_ms": m(row["pods"], row["pending_ms"], row["pending_ms_sq"]),
        "gpu_utilisation": m.of([] if utilisation is None else [utilisation]),
    }


def asked(db: StoreReads, f: DecisionFilter) -> dict[tuple[str, str, str], str]:
    """What each device-plugin pod asked for, from the pod lifecycle of the filter's cluster (of every
    cluster with events when it names none)."""
    clusters = [f.cluster] if f.cluster else storeport.call(db.event_clusters)
    out: dict[tuple[str, str, str], str] = {}
    for cluster in clusters:
        out.update(migration.asked_from_lifecycle(storeport.call(db.pod_lifecycle, cluster).pods))
    return out


def cohorts(db: StoreReads, f: DecisionFilter) -> dict[migration.CohortKey, migration.Cohort]:
    """``audit.migration`` cohorts from per-pod outcomes folded in ClickHouse (``pod_outcomes``):
    per stratum as moments, so a million DRA pods cost a few hundred rows; device-plugin pods are
    stratified by the model they asked for, which the pod lifecycle gives."""
    groups, singles = storeport.call(db.insight, pod_outcomes, f)
    releases = migration.releases_from_events(storeport.call(db.insight, pod_release_events, f.cluster)) \
        if any(r["released"] for r in singles) else {}
    dp = Track.DEVICE_PLUGIN.value
    asks = asked(db, f) if any(r["track"] == dp and not r["model"] for r in singles) else {}
    out: dict[migration.CohortKey, migration.Cohort] = {}
    for row in singles + groups:
        key = migration.CohortKey(row["track"], row["template_version"])
        share = _held_share(releases, row) if row["released"] else None
        hour = migration.stratum_hour(datetime.fromtimestamp(int(row["first_hour"]) * 3600, UTC))
        model = migration.model_asked(row["track"], row["model"], (row["cluster"], row["namespace"]),
                                      (row["pod_key"], row["pod"]), asks)
        out.setdefault(key, migration.Cohort(key)).count((model, row["tenant"], hour), _moments(row, share))
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
            "is made within strata of the model asked for × tenant × hour (its figures under `comparison`)",
    groupings=(("track", "template_version"),),
    answer=answer,
)
