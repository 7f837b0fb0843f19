"""The pod-level figures of /v1/stats/fairness, /v1/stats/fallback and /v1/stats/health.

They are ``audit.metrics.report``'s finished numbers over the cluster's pod lifecycle (which the
store keeps current from the event log), for the window the caller gives: ``since`` (default: the
first event) to ``until`` (default: just after the last event, so that its instant counts; a window
excludes its end). A window that holds no time of the log (it starts after its last event or ends
at or before its first) has no pod figures, by the rule that refuses a what-if over it
(``audit.replay.service.outside_log``): they would stretch the world of one end of the log over it.
The answer gives them as null and ``pod_figures`` names the log's span, while the decision records
in the window are counted as ever (a watcher records scheduling failures while no object of the
cluster changes). Every answer with figures names the window they cover (``window``). Filters on model or policy version do not
apply to them (they are figures of the whole cluster and window); a tenant filter, or a tenant
caller, restricts them as ``audit.metrics.report`` describes. With ``by=hour`` or ``by=model`` the
answer also lists the wait (fairness) or regret (fallback) figures per hour or per model
(``audit.metrics.breakdown``), of the tenant's own pods for a tenant caller or filter. With
``by=tenant_hour`` (fairness only) it lists each tenant's wait figures per hour, the rows
``by=hour`` gives with that tenant's filter, for every tenant of the window in one answer (a
tenant caller: its own only, the folded ``(others)`` having no hours of its own).
"""

from __future__ import annotations

import copy
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from audit.api import storeport
from audit.api.problems import Problem
from audit.metrics import Lifecycle, Window, fairness_report, fallback_report, health_report
from audit.metrics.breakdown import BREAKDOWNS, regret_breakdown, wait_breakdown
from audit.replay.service import outside_log
from audit.store.filters import DecisionFilter
from audit.timestamps import format_time_ms


class SeveralClusters(Exception):
    """Pod-level figures are per cluster: with several in the store the caller must name one."""


class OutsideLog(Exception):
    """The window holds no time of the cluster's event log; the message names both."""


def _cluster(db: Any, f: DecisionFilter) -> str | None:
    """The cluster the figures are of; None when it has no world events (a cluster named that the
    store does not know has no figures, not the figures of an empty cluster)."""
    if f.cluster:
        return f.cluster if storeport.call(db.max_seq, f.cluster) is not None else None
    clusters = storeport.call(db.event_clusters)
    if len(clusters) > 1:
        raise SeveralClusters(", ".join(clusters[:5]))
    return clusters[0] if clusters else None


def lifecycle_window(db: Any, f: DecisionFilter) -> tuple[Lifecycle, Window] | None:
    """The lifecycle and window the figures cover; None when the store has no events for it."""
    cluster = _cluster(db, f)
    if cluster is None:
        return None
    life: Lifecycle = storeport.call(db.pod_lifecycle, cluster)
    if not life.policies:
        return None
    since, until = f.time_range_ms()
    # the policy timeline starts at the log's first instant, and the fold's time is its last event's
    first, last = life.policies[0][0], life.end_ms
    # a window the log does not reach has no pod figures (the what-if refuses it likewise), rather
    # than the world of the log's end (or start) stretched over it
    outside = outside_log(cluster, first, last, first if since is None else since, last + 1 if until is None else until)
    if outside is not None:
        asked = ", ".join(f"{k} {format_time_ms(v)}" for k, v in (("since", since), ("until", until)) if v is not None)
        raise OutsideLog(f"{asked}: {outside}")
    # a window excludes its end: the default ends one millisecond past the last event, or the
    # binds and releases of the last instant would drop out of every figure
    return life, Window(first if since is None else since, last + 1 if until is None else until)


def _found(db: Any, f: DecisionFilter) -> tuple[tuple[Lifecycle, Window] | None, dict[str, Any]]:
    """The lifecycle and window, or None with a note saying why there are no figures (each answer
    then gives its counts as null: unknown, not zero); with figures, the note is the window they
    cover."""
    try:
        found = lifecycle_window(db, f)
    except SeveralClusters as exc:
        return None, {"pod_figures": f"none: pass cluster= (the store holds several clusters: {exc})"}
    except OutsideLog as exc:
        return None, {"pod_figures": f"none: {exc}; pod figures cover only the time the log records"}
    if found is None:
        return None, {"pod_figures": "none: no world events stored for this cluster"}
    window = found[1]
    return found, {"window": {"since": format_time_ms(window.since_ms), "until": format_time_ms(window.until_ms)}}


# Finished figures per (report, cluster, last folded seq, window, scope): the pages of one
# dashboard visit ask for the same figures several times, and nothing changes them but new events.
_MEMO: OrderedDict[tuple[Any, ...], dict[str, Any]] = OrderedDict()
_MEMO_LOCK = threading.Lock()
_MEMO_SIZE = 64


def _memo(kind: str, life: Lifecycle, window: Window, scope: str | None,
          compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    if life.seq < 0:
        return compute()
    key = (kind, life.cluster, life.seq, window.since_ms, window.until_ms, scope)
    with _MEMO_LOCK:
        hit = _MEMO.get(key)
        if hit is not None:
            _MEMO.move_to_end(key)
            return copy.deepcopy(hit)
    value = compute()
    with _MEMO_LOCK:
        _MEMO[key] = copy.deepcopy(value)
        while len(_MEMO) > _MEMO_SIZE:
            _MEMO.popitem(last=False)
    return value


TENANT_HOUR = "tenant_hour"  # each tenant's rows per hour, in one answer (fairness)


def breakdown(by: str | None) -> str | None:
    """The ``by`` query parameter: ``hour``, ``model``, ``tenant_hour`` or absent."""
    if by is None or by == "":
        return None
    if by not in (*BREAKDOWNS, TENANT_HOUR):
        raise Problem("invalid-parameter", f"by {by[:80]!r}: expected {', '.join(BREAKDOWNS)} or {TENANT_HOUR}")
    return by


def _rows_by(kind: str, life: Lifecycle, window: Window, who: str | None, by: str,
             rows: Callable[[Lifecycle, Window, str, str | None], list[dict[str, Any]]]) -> list[dict[str, Any]]:
    found = _memo(f"{kind}-by-{by}", life, window, who, lambda: {"rows": rows(life, window, by, who)})
    return list(found["rows"])


def fairness(db: Any, f: DecisionFilter, scope: str | None, by: str | None = None) -> dict[str, Any]:
    found, note = _found(db, f)
    if found is None:
        return {"jain_whole": None, "jain_contention": None, "contention_windows": None, "tenants": [],
                **({f"by_{by}": []} if by else {}), **note}
    life, window = found
    out = {**_memo("fairness", life, window, scope, lambda: fairness_report(life, window, scope=scope)), **note}
    if scope is None and f.tenant:
        out["tenants"] = [r for r in out["tenants"] if r["tenant"] == f.tenant]
    if by == TENANT_HOUR:
        own = scope or f.tenant
        tenants = [own] if own else [str(r["tenant"]) for r in out["tenants"]]
        out[f"by_{by}"] = [{"tenant": t, **r} for t in tenants
                           for r in _rows_by("waits", life, window, t, "hour", wait_breakdown)]
    elif by:
        out[f"by_{by}"] = _rows_by("waits", life, window, scope or f.tenant, by, wait_breakdown)
    return out


def fallback(db: Any, f: DecisionFilter, scope: str | None, by: str | None = None) -> dict[str, Any]:
    found, note = _found(db, f)
    if found is None:
        return {"pods_with_preference": None, "first_choice_rate": None, "fallbacks": None, "regretted": None,
                "regret_rate": None, "regret_window_s": None, "paths": [], **({f"by_{by}": []} if by else {}), **note}
    life, window = found
    who = scope or f.tenant
    out = {**_memo("fallback", life, window, who, lambda: fallback_report(life, window, scope=who)), **note}
    if by:
        out[f"by_{by}"] = _rows_by("regret", life, window, who, by, regret_breakdown)
    return out


def health(db: Any, f: DecisionFilter) -> dict[str, Any]:
    found, note = _found(db, f)
    if found is None:
        return {"unhealthy_devices": None, "unhealthy_device_hours": None, "models": [], **note}
    life, window = found
    return {**_memo("health", life, window, None, lambda: health_report(life, window)), **note}
