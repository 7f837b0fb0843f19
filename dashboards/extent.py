"""What the store holds, so pickers offer real values and empty fields show the real window.

One call of the API's fallback statistics grouped by cluster, policy version and hour gives
the clusters, the policy versions decisions were made under, and the first and last hour with
decisions; the filter bar shows that window as its placeholders (an empty field means "no
limit", which is exactly that window) and the replay page offers the clusters and versions.
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
    since: str = ""  # the first hour with decisions, ISO 8601 UTC
    until: str = ""  # the end of the last hour with decisions


def _iso(value: object) -> str:
    # the API answers in UTC; a zone, if given, is honoured
    return format_utc(parse_rfc3339(str(value)), digits=0)


def extent_of(table: StatsTable) -> Extent:
    """The extent from rows grouped by ``GROUPS``; hours are the start of each hour bucket."""
    def values(column: str) -> tuple[str, ...]:
        return tuple(sorted({str(r[column]) for r in table.rows if r.get(column) not in (None, "")}))

    hours = sorted(_iso(h) for h in values("hour"))
    until = ""
    if hours:
        until = format_utc(parse_rfc3339(hours[-1]) + timedelta(hours=1), digits=0)
    return Extent(clusters=values("cluster"), policy_versions=values("policy_version"),
                  since=hours[0] if hours else "", until=until)


def stored_extent() -> Extent:
    """The extent of everything the caller may see (cached with the other statistics)."""
    return extent_of(client.stats("fallback", Filters(), GROUPS))
