"""What the store holds, so pickers offer real values and empty fields show the real window.

One call of the API's fallback statistics grouped by cluster, policy version and hour gives
the clusters and the policy versions decisions were made under, the hours with decisions, and the
window the API's per-pod figures cover when no time is given (``window``: the first world event
to just past the last). The filter bar shows a window as its placeholders (an empty field means
"no limit", which is exactly that window) and the replay page offers the clusters and versions.
The window is the figures' own when every decision lies in its hours, so that typing the
placeholders in gives the same figures as leaving the fields empty; otherwise (decisions with no
world events around them, or several clusters and none chosen, where there are no per-pod
figures) it runs from the first hour with decisions to the end of the last.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from audit.timestamps import format_utc, parse_rfc3339
from dashboards import client
from dashboards.client import Filters, StatsTable

GROUPS = ("cluster", "policy_version", "hour")


@dataclass(frozen=True)
class Extent:
    clusters: tuple[str, ...] = ()
    policy_versions: tuple[str, ...] = ()
    since: str = ""  # ISO 8601 UTC: the per-pod figures' window, or the first hour with decisions
    until: str = ""  # ... and its end, or the end of the last hour with decisions


def _iso(value: object) -> str:
    # the API answers in UTC; a zone, if given, is honoured
    return format_utc(parse_rfc3339(str(value)), digits=0)


def extent_of(table: StatsTable) -> Extent:
    """The extent from rows grouped by ``GROUPS``; hours are the start of each hour bucket."""
    def values(column: str) -> tuple[str, ...]:
        return tuple(sorted({str(r[column]) for r in table.rows if r.get(column) not in (None, "")}))

    clusters, versions = values("cluster"), values("policy_version")
    hours = sorted(_iso(h) for h in values("hour"))
    window = table.summary.get("window")
    if isinstance(window, dict) and window.get("since") and window.get("until"):
        since, until = parse_rfc3339(str(window["since"])), parse_rfc3339(str(window["until"]))
        first_hour = since.replace(minute=0, second=0, microsecond=0)
        if not hours or (parse_rfc3339(hours[0]) >= first_hour and parse_rfc3339(hours[-1]) < until):
            return Extent(clusters, versions, str(window["since"]), str(window["until"]))
    end = format_utc(parse_rfc3339(hours[-1]) + timedelta(hours=1), digits=0) if hours else ""
    return Extent(clusters, versions, hours[0] if hours else "", end)


def stored_extent() -> Extent:
    """The extent of everything the caller may see (cached with the other statistics)."""
    return extent_of(client.stats("fallback", Filters(), GROUPS))
