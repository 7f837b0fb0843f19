"""Aggregates behind the dashboards' finer questions: skip reasons, usage per hour, health by
model, replay status, migration inputs, and decisions by claim (decision counts; the per-pod
figures come from ``audit.metrics`` over the pod lifecycle).

Like ``aggregates``, each function takes ``query(sql, parameters, settings)`` (the store's locked
client call) and a ``DecisionFilter``; every user value is a server-side bound parameter
(``{name:Type}``). Raw rows are read ``FINAL`` (or ``LIMIT 1 BY decision_id``) so a not-yet-merged
duplicate never counts twice, and ``scope_tenant`` keeps the caller's tenant while folding
every other tenant into ``"(others)"``.
"""

from __future__ import annotations

import json
from typing import Any

from audit.errors import UserError
from audit.records import DecisionRecord
from audit.store.aggregates import FINAL, GROUPS, HOUR_FMT, OTHERS, Query
from audit.store.connection import StoreError
from audit.store.filters import DecisionFilter, conditions, decode_cursor, encode_cursor, where_sql

DECISION_HOUR = HOUR_FMT.format(col="toStartOfHour(time)")


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


def _tenant(scope_tenant: str | None, column: str = "tenant") -> str:
    return f"if({column} = {{scope_tenant:String}}, {column}, '{OTHERS}')" if scope_tenant is not None else column


def _scoped(f: DecisionFilter, scope_tenant: str | None) -> tuple[list[str], dict[str, Any]]:
    clauses, params = conditions(f)
    if scope_tenant is not None:
        params["scope_tenant"] = scope_tenant
    return clauses, params


def skip_reasons(query: Query, f: DecisionFilter, by_preferred: bool = False) -> list[dict]:
    """Device verdicts per reason code in the tiers of each decision's preferred model that were not
    the chosen tier (``selected`` excluded), over the decisions that did not get their preferred
    model: why the preferred model was skipped."""
    clauses, params = conditions(f)
    clauses += ["preferred_model != ''", "allocated_model != preferred_model"]
    # the tier rows carry tenant and time too: narrowing them first keeps the join small
    t_clauses, t_params = conditions(DecisionFilter(tenant=f.tenant, since=f.since, until=f.until))
    params.update(t_params)  # the same names bound to the same values
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
    for row in query(sql, params, FINAL).result_rows:
        if by_preferred:
            out.append({"preferred": row[0], "reason": row[1], "devices": int(row[2])})
        else:
            out.append({"reason": row[0], "devices": int(row[1])})
    return out


def _qualified(group: str) -> str:
    expr = GROUPS[group][0]
    return expr.replace("toStartOfHour(time)", "toStartOfHour(d.time)") if group == "hour" else f"d.{expr}"


def usage_by_model(query: Query, f: DecisionFilter, by_hour: bool, scope_tenant: str | None = None) -> list[dict]:
    """Per (hour ×) tenant × allocated model: decisions, allocated, devices allocated, first choices."""
    clauses, params = _scoped(f, scope_tenant)
    hour = f"{DECISION_HOUR} AS h, " if by_hour else "'' AS h, "
    sql = (
        f"SELECT {hour}{_tenant(scope_tenant)} AS t, allocated_model, count(), countIf(outcome = 'allocated'), "
        "sumIf(n_devices, outcome = 'allocated'), countIf(outcome = 'allocated' AND tier_index = 0) "
        f"FROM decisions FINAL {where_sql(clauses)} GROUP BY h, t, allocated_model ORDER BY h, t, allocated_model"
    )
    keys = ("hour", "tenant", "model", "decisions", "allocated", "devices_allocated", "first_choice")
    return [dict(zip(keys, (*row[:3], *(int(x) for x in row[3:])), strict=True))
            for row in query(sql, params, FINAL).result_rows]


def health_by_model(query: Query, f: DecisionFilter, by_hour: bool) -> list[dict]:
    """Per (hour ×) device model: unhealthy / binding_conflict / stale_slice device verdicts in the
    tiers of that model. Nodes are not in the tier rows, so a per-node split is not offered."""
    clauses, params = conditions(f)
    hour = f"{DECISION_HOUR} AS h" if by_hour else "'' AS h"
    sql = (
        f"SELECT {hour}, model, sum(reasons['unhealthy']), sum(reasons['binding_conflict']), "
        "sum(reasons['stale_slice']) FROM decision_tiers FINAL "
        f"WHERE decision_id IN (SELECT decision_id FROM decisions {where_sql(clauses)}) "
        "GROUP BY h, model ORDER BY h, model"
    )
    out = []
    for h, model, unhealthy, conflict, stale in query(sql, params, FINAL).result_rows:
        row: dict[str, Any] = {"hour": h} if by_hour else {}
        row.update(model=model, unhealthy=int(unhealthy), binding_conflict=int(conflict), stale_slice=int(stale))
        out.append(row)
    return out


def replay_status(query: Query, f: DecisionFilter, group: str) -> list[dict]:
    """Latest replay run per decision under ``f``, counted per hour of decision time (``group="hour"``:
    runs, matched, mismatched) or per mismatch cause (``group="cause"``; "" for matches)."""
    if group not in ("hour", "cause"):
        raise UserError(f"group_by {group!r}: replay status is grouped by hour or cause")
    clauses, params = conditions(f)
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
            for k, n, ok, bad in query(sql, params, None).result_rows]


_RELEASES = ("SELECT cluster, namespace, name, JSONExtractString(body, 'payload', 'metadata', 'uid') AS uid FROM events "
             "WHERE object_kind = 'Pod' AND (type = 'delete' OR "
             "JSONExtractString(body, 'payload', 'status', 'phase') IN ('Succeeded', 'Failed'))")


# Per row: is the pod it belongs to (by name, or by uid) among those the event log released.
_MARKED = (f"((cluster, namespace, pod) IN (SELECT cluster, namespace, name FROM ({_RELEASES})) "
           f"OR (cluster, namespace, {_POD_KEY}) IN (SELECT cluster, namespace, uid FROM ({_RELEASES}) WHERE uid != ''))")
# A pod's cohort and stratum strings travel through the fold as one 64-bit hash each (folding a
# million pods' string tuples costs several times more); ``pod_outcomes`` maps them back.
_LATEST_CODE = "cityHash64(track, template_version, preferred_model, tenant)"
_MODEL_CODE = "cityHash64(allocated_model)"
OUTCOME_SUMS = ("pods", "bound", "fallbacks", "bound_wait_ms", "bound_wait_ms_sq", "pending_ms", "pending_ms_sq")


def pod_outcomes(query: Query, f: DecisionFilter) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Pods under ``f``, folded as ``audit.migration.build_cohorts`` folds a pod's records (attempts
    ordered by seq, time and attempt; a pod's attempts never tie on all three): the latest attempt
    names the cohort (track, template_version), the pod name and the stratum's tenant and model (its
    preferred model, else the bound attempt's allocated one); the stratum's hour is that of the pod's
    earliest attempt, as hours since the epoch; the first allocated attempt is the bound one (its
    fallback flag, wait and time), a pod's pending time is the largest wait of any attempt.

    Done in ClickHouse so a million decisions never become a million Python objects: pods that
    never released their devices (no Pod delete or finished phase in the event log, so no
    utilisation to measure) come back as sums per cohort × stratum (``OUTCOME_SUMS``: pods, bound
    pods, bound pods that fell back, and the sum and sum of squares of the bound wait and of the
    pending time — what ``audit.migration.Moments`` holds); the released ones one by one
    (``pods`` = 1), with what their utilisation needs. Pods are grouped by a 64-bit hash of
    (cluster, namespace, uid or name).

    One pass over the rows, with few aggregate states per pod: whether a row's pod may have been
    released (its name or uid is in the release events) is decided per row, so the pod's names —
    strings, costly to carry for a million pods — are only kept from those rows. A pod released by
    uid has every row marked and one released by its latest name has its latest row marked, so
    "bound and the latest row is marked" is exactly "released", and the latest marked row then
    carries the latest name."""
    clauses, params = conditions(f)
    rows = (
        f"SELECT cityHash64({_POD}) AS h, cluster, namespace, pod, {_POD_KEY} AS k, {_LATEST_CODE} AS c, "
        f"preferred_model = '' AS np, {_MODEL_CODE} AS a, outcome = 'allocated' AS ok, fallback, wait_ms, "
        f"toUnixTimestamp64Milli(time) AS ms, {ATTEMPT_ORDER} AS o, {_MARKED} AS marked "
        f"FROM decisions FINAL {where_sql(clauses)}"
    )
    pods = (
        "SELECT argMaxIf((cluster, namespace, k, pod), o, marked) AS names, argMax((c, np, marked), o) AS latest, "
        "max(ok) AS bound, argMinIf((fallback, wait_ms, ms, a), o, ok) AS first_bound, "
        "intDiv(min(ms), 3600000) AS first_hour, max(wait_ms) AS pending, bound AND latest.3 AS rel "
        f"FROM ({rows}) GROUP BY h"
    )
    # model code 0: the latest attempt's preferred model names the stratum
    sql = ("SELECT rel, if(rel, names.1, ''), if(rel, names.2, ''), if(rel, names.3, ''), if(rel, names.4, ''), "
           "if(rel, first_bound.3, 0), latest.1, if(latest.2 AND bound, first_bound.4, 0), first_hour, count(), "
           "sum(bound), sum(bound AND first_bound.1), sumIf(first_bound.2, bound), "
           "sumIf(toUInt128(first_bound.2) * first_bound.2, bound), sum(pending), sum(toUInt128(pending) * pending) "
           f"FROM ({pods}) GROUP BY ALL ORDER BY ALL")
    names = (f"SELECT DISTINCT {_LATEST_CODE}, track, template_version, preferred_model, tenant, {_MODEL_CODE}, "
             f"allocated_model FROM decisions {where_sql(clauses)}")
    latest: dict[int, tuple[str, str, str, str]] = {}
    models: dict[int, str] = {}
    for c, track, template, preferred, tenant, a, allocated in query(names, params, None).result_rows:
        if latest.setdefault(c, (track, template, preferred, tenant)) != (track, template, preferred, tenant) \
                or models.setdefault(a, allocated) != allocated:
            raise StoreError(f"pod_outcomes: two cohorts or models share the hash {c} or {a}")
    keys = ("cluster", "namespace", "pod_key", "pod", "bound_ms", "track", "template_version", "model", "tenant",
            "first_hour", *OUTCOME_SUMS)
    groups: list[dict[str, Any]] = []
    singles: list[dict[str, Any]] = []
    for row in query(sql, params, FINAL).result_rows:
        track, template, preferred, tenant = latest[row[6]]
        model = models[row[7]] if row[7] else preferred
        out = dict(zip(keys, (*row[1:6], track, template, model, tenant, *row[8:]), strict=True))
        (singles if row[0] else groups).append(out)
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


def decisions_with_claim(query: Query, f: DecisionFilter, claim: str, cursor: str | None,
                         limit: int) -> tuple[list[DecisionRecord], str | None]:
    """Newest first, the decisions under ``f`` whose ``claims`` list holds ``claim``; cursor as in
    ``AuditStore.list_decisions``."""
    clauses, params = conditions(f)
    clauses.append("has(JSONExtract(record, 'claims', 'Array(String)'), {claim:String})")
    params["claim"] = claim
    if cursor:
        ms, last_id = decode_cursor(cursor)
        clauses.append("(time, decision_id) < (fromUnixTimestamp64Milli({c_ms:Int64}, 'UTC'), {c_id:String})")
        params.update(c_ms=ms, c_id=last_id)
    params["limit"] = limit + 1
    rows = query(
        f"SELECT toUnixTimestamp64Milli(time), decision_id, record FROM decisions {where_sql(clauses)} "
        "ORDER BY time DESC, decision_id DESC LIMIT 1 BY decision_id LIMIT {limit:UInt32}", params, None).result_rows
    page = rows[:limit]
    records = [DecisionRecord.from_dict(json.loads(r[2])) for r in page]
    next_cursor = encode_cursor(page[-1][0], page[-1][1]) if len(rows) > limit else None
    return records, next_cursor
