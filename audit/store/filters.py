"""Decision filters and their translation into parameterised ClickHouse conditions.

Every user value travels as a server-side bound parameter (``{name:Type}``); only column names
chosen here appear in SQL text. Times are ISO 8601 strings bound as epoch milliseconds.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, fields
from typing import Any

from audit.errors import UserError
from audit.store.rows import RowError, epoch_ms

HOUR_MS = 3_600_000


@dataclass
class DecisionFilter:
    """What to select. ``tenant`` scopes (the API sets it from the caller); ``model`` is the
    allocated model; ``since`` is inclusive, ``until`` exclusive."""

    tenant: str | None = None
    namespace: str | None = None
    pod: str | None = None
    model: str | None = None
    outcome: str | None = None
    fallback: bool | None = None
    since: str | None = None
    until: str | None = None
    policy_version: str | None = None
    cluster: str | None = None
    track: str | None = None
    claim: str | None = None  # a ResourceClaim name the decision's ``claims`` list holds

    def time_range_ms(self) -> tuple[int | None, int | None]:
        try:
            since = epoch_ms(self.since, "since") if self.since else None
            until = epoch_ms(self.until, "until") if self.until else None
        except RowError as exc:
            raise UserError(str(exc)) from None
        if since is not None and until is not None and until < since:
            raise UserError("until: before since")
        return since, until

    def active(self) -> set[str]:
        return {f.name for f in fields(self) if getattr(self, f.name) is not None}


# filter field -> column, for the equality filters
_COLUMNS = {
    "tenant": "tenant", "namespace": "namespace", "pod": "pod", "model": "allocated_model",
    "outcome": "outcome", "policy_version": "policy_version", "cluster": "cluster", "track": "track",
}
ROLLUP_FIELDS = {"tenant", "model", "outcome", "fallback", "since", "until", "policy_version", "cluster", "track"}


def conditions(f: DecisionFilter, time_column: str = "time") -> tuple[list[str], dict[str, Any]]:
    """SQL conditions and bound parameters for ``f`` (``time_column="hour"`` for the rollups)."""
    where: list[str] = []
    params: dict[str, Any] = {}
    for name, column in _COLUMNS.items():
        value = getattr(f, name)
        if value is None:
            continue
        if not isinstance(value, str):
            raise UserError(f"DecisionFilter.{name}: expected a string, got {type(value).__name__}")
        where.append(f"{column} = {{f_{name}:String}}")
        params[f"f_{name}"] = value
    if f.claim is not None:
        where.append("has(JSONExtract(record, 'claims', 'Array(String)'), {f_claim:String})")
        params["f_claim"] = f.claim
    if f.fallback is not None:
        where.append("fallback = {f_fallback:Bool}")
        params["f_fallback"] = bool(f.fallback)
    since, until = f.time_range_ms()
    if since is not None:
        where.append(f"{time_column} >= fromUnixTimestamp64Milli({{f_since:Int64}}, 'UTC')")
        params["f_since"] = since
    if until is not None:
        where.append(f"{time_column} < fromUnixTimestamp64Milli({{f_until:Int64}}, 'UTC')")
        params["f_until"] = until
    return where, params


def rollup_can_answer(f: DecisionFilter) -> bool:
    """The hourly rollups answer exactly when no filter needs raw rows and times fall on hours."""
    if f.active() - ROLLUP_FIELDS:
        return False
    since, until = f.time_range_ms()
    return all(t is None or t % HOUR_MS == 0 for t in (since, until))


def where_sql(clauses: list[str]) -> str:
    return ("WHERE " + " AND ".join(clauses)) if clauses else ""


def encode_cursor(time_ms: int, decision_id: str) -> str:
    return base64.urlsafe_b64encode(f"{time_ms}:{decision_id}".encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        ms, decision_id = text.split(":", 1)
        return int(ms), decision_id
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise UserError(f"cursor {cursor[:40]!r}: not a cursor returned by a previous page") from None
