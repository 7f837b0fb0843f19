"""A cluster's pod lifecycle read back from the pod tables, instead of folding its event log again.

The background fold writes every pod row and series entry it changes into the pod tables
(``audit.store.podtable``) and ends each write with the ``pod_folds`` row naming the event ``seq``
it had reached. A server starting on a store whose tables are written up to the last stored
event can therefore answer from them at once: the rows read back (``FINAL``, in fold row order)
are the fold's ``PodLife`` rows at that seq, field for field; the unhealthy spans come back in
the fold's order (closed ones by closing time then device, then the open ones by device); the
policy timeline holds what the figures read of each policy (``audit.store.metric_sql.series``).
Folding a day of a large cluster costs minutes; reading its rows, seconds. Whether the tables
are current is ``audit.store.lifecycle``'s decision: this module only reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from audit.metrics.columns import PodColumns
from audit.metrics.lifecycle import Lifecycle, PodLife, UnhealthySpan
from audit.store.metric_sql import series

Query = Callable[..., Any]

_FIELDS = ("row", "namespace", "pod", "uid", "tenant", "track", "created_ms", "bound_ms", "failed_ms",
           "allocated_ms", "released_ms", "alternatives", "tiers", "preferred", "allocated", "devices", "h100_eq",
           "regretted", "asked")

MARK_SQL = "SELECT seq, end_ms, pods FROM pod_folds FINAL WHERE cluster = {c:String}"
PODS_SQL = f"SELECT {', '.join(_FIELDS)} FROM pods FINAL WHERE cluster = {{c:String}} ORDER BY row"
# the fold appends a span when it closes (devices in id order within one instant), and lists the
# spans still open after them, in device order
SPANS_SQL = ("SELECT device, model, start_ms, end_ms FROM unhealthy_spans FINAL WHERE cluster = {c:String} "
             "ORDER BY end_ms IS NULL, end_ms, device")


def written_seq(query: Query, cluster: str) -> int | None:
    """The event seq the cluster's pod tables are written up to; None when nothing says so."""
    rows = query(MARK_SQL, {"c": cluster}).result_rows
    return int(rows[0][0]) if rows else None


def _pod(cluster: str, values: tuple[Any, ...]) -> PodLife:
    (row, namespace, pod, uid, tenant, track, created, bound, failed, allocated_ms, released, alternatives, tiers,
     preferred, allocated, devices, eq, regretted, asked) = values
    return PodLife(cluster, str(namespace), str(pod), str(uid), str(tenant), str(track), int(created),
                   _ms(bound), _ms(failed), _ms(allocated_ms), _ms(released), bool(alternatives),
                   tuple(int(i) for i in tiers), str(preferred), str(allocated), int(devices), float(eq),
                   bool(regretted), str(asked), row=int(row))


def _ms(value: Any) -> int | None:
    return None if value is None else int(value)


def stored_lifecycle(query: Query, cluster: str) -> Lifecycle | None:
    """The lifecycle the pod tables hold for ``cluster`` (its ``seq`` the one they are written up
    to), or None when they say nothing or hold other than the rows their mark counts (a table
    emptied or cut by hand): the caller folds the log then."""
    mark = query(MARK_SQL, {"c": cluster}).result_rows
    if not mark:
        return None
    seq, end_ms, count = (int(v) for v in mark[0])
    pods = [_pod(cluster, tuple(r)) for r in query(PODS_SQL, {"c": cluster}).result_rows]
    if len(pods) != count or any(p.row != i for i, p in enumerate(pods)):
        return None
    spans = [UnhealthySpan(str(d), str(m), int(s), _ms(e)) for d, m, s, e in query(SPANS_SQL, {"c": cluster}).result_rows]
    timelines = series(query, cluster)
    return Lifecycle(cluster, pods, timelines.policies, timelines.capacity, spans, end_ms, seq,
                     PodColumns.of(pods).view())
