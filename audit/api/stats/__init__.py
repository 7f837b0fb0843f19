"""The ``/v1/stats`` kinds: each module of this package declares one, whole.

A kind is a ``StatsKind``: its name (the path ``/v1/stats/<name>``), the summary its route shows
in the API docs, the groupings it answers and the function that answers it, with the SQL of any
query only it needs. ``audit.api.routes_stats`` makes one route per module found here, so adding
a kind is adding a module; nothing else in the API changes.

Tenant isolation: an answer gets the caller's own filter (``own``: a tenant caller's tenant set)
and the filter that folds other tenants (``folded``: tenant unset, with ``scope`` the tenant to
keep, None for admins). Per-tenant rows of a tenant caller show its own tenant and every other
tenant folded by the store into one ``(others)`` row, computed over the folded rows (so rates and
percentiles stay correct); a kind without a tenant column covers only the caller's own decisions.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from audit import migration
from audit.api import params, podstats
from audit.api.problems import Problem
from audit.store.filters import DecisionFilter
from audit.store.ports import StoreReads


@dataclass(frozen=True)
class Ask:
    """One stats request, validated: the store, the filters, the group keys and the server's settings."""

    db: StoreReads
    own: DecisionFilter
    folded: DecisionFilter
    scope: str | None
    keys: list[str]
    thresholds: migration.Thresholds | None = None
    by: str | None = None  # rows per hour or per model beside the window's figures (``breakdowns`` kinds)


def fixed_groupings(name: str, choices: tuple[tuple[str, ...], ...], group_by: str | None) -> list[str]:
    """``group_by`` as one of ``choices`` (the first is the default), or a 400 naming them."""
    keys = params.group_by(group_by, choices[0], tuple(dict.fromkeys(k for c in choices for k in c)))
    if tuple(keys) not in choices:
        raise Problem("invalid-parameter", f"group_by: /v1/stats/{name} is grouped by "
                      f"{' or '.join(','.join(c) for c in choices)}")
    return keys


@dataclass(frozen=True)
class StatsKind:
    """One ``/v1/stats/<name>`` endpoint. ``answer`` returns ``{"rows": [...], ...figures}``; the
    route adds ``group_by``. ``keys`` parses ``group_by`` when ``groupings`` alone cannot say which
    combinations are allowed."""

    name: str
    summary: str
    groupings: tuple[tuple[str, ...], ...]
    answer: Callable[[Ask], dict[str, Any]]
    keys: Callable[[str | None], list[str]] | None = None
    breakdowns: bool = False  # whether it answers ``by=hour|model`` (``audit.metrics.breakdown``)
    tenant_hours: bool = False  # whether it also answers ``by=tenant_hour`` (``audit.api.podstats``)

    def group_keys(self, group_by: str | None) -> list[str]:
        if self.keys is not None:
            return self.keys(group_by)
        return fixed_groupings(self.name, self.groupings, group_by)

    def breakdown(self, by: str | None, keys: list[str]) -> str | None:
        """``by`` checked against this kind and its grouping, or a 400."""
        if by is not None and (not self.breakdowns or "reason" in keys):
            raise Problem("invalid-parameter", "by: rows per hour or model come with /v1/stats/fairness and "
                          "/v1/stats/fallback (not with group_by=reason)")
        checked = podstats.breakdown(by)
        if checked == podstats.TENANT_HOUR and not self.tenant_hours:
            raise Problem("invalid-parameter", f"by: rows per tenant and hour come with /v1/stats/fairness, "
                          f"not /v1/stats/{self.name}")
        return checked


def kinds() -> list[StatsKind]:
    """Every kind declared in this package (a module's ``KIND``), in module name order."""
    found = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        kind = getattr(module, "KIND", None)
        if isinstance(kind, StatsKind):
            found.append(kind)
    return found
