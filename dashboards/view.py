"""Small presentation helpers shared by the pages: errors, empty states, readings, numbers.

A page asks for data through ``load`` so an API failure becomes one readable error box instead
of a traceback, states what a chart says in one ``reading`` line (a caption starting with
"Reading:"), and checks with ``has_columns`` that the API's rows carry what a chart draws.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import streamlit as st

from dashboards.client import ApiError, StatsTable

T = TypeVar("T")

READING_PREFIX = "Reading: "


def load(fetch: Callable[[], T], what: str) -> T | None:
    """Run one API call; on failure show what could not be loaded and why, and return None."""
    try:
        return fetch()
    except ApiError as exc:
        st.error(f"Could not load {what}: {exc}")
        return None


def reading(text: str) -> None:
    st.caption(READING_PREFIX + text)


def empty(table: StatsTable | None, what: str) -> bool:
    """True (after saying so) when there is nothing to draw."""
    if table is None:
        return True
    if not table.rows:
        st.info(f"No {what} for these filters.")
        return True
    return False


def has_columns(table: StatsTable, source: str, *columns: str) -> bool:
    """True when every column is present; otherwise name the missing ones instead of drawing."""
    missing = table.missing(*columns)
    if missing:
        st.warning(f"{source} did not return {', '.join(f'`{c}`' for c in missing)}; this chart needs them.")
        return False
    return True


def num(value: Any) -> float:
    """A numeric cell; None (SQL NULL) counts as zero."""
    if value is None or value == "":
        return 0.0
    return float(value)


def pct(value: float | None) -> str:
    return "–" if value is None else f"{100.0 * value:.1f} %"


def count(value: Any, digits: int = 0) -> str:
    """A count as a person reads it; null (a figure the API could not give) reads "–", not 0."""
    return "–" if value is None or value == "" else f"{float(value):,.{digits}f}"


def no_pod_figures(summary: dict[str, Any]) -> None:
    """Say why an answer has no pod figures (several clusters and none picked, no world events),
    where its counts then read "–"."""
    note = summary.get("pod_figures")
    if note:
        st.info(f"No pod figures: {note}")


def maybe(row: dict[str, Any], column: str) -> float | None:
    """A cell that may be absent (the API folds other tenants into "(others)" with counts only) or
    null (a figure over no pods, such as the wait percentiles of a tenant that started none)."""
    value = row.get(column)
    return None if value is None or value == "" else float(value)


def none_or(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def duration(ms: float | None) -> str:
    """A wait in the unit a person reads it in: seconds, minutes or hours."""
    if ms is None:
        return "–"
    seconds = ms / 1000
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


def ratio(part: float, whole: float) -> float | None:
    return None if whole == 0 else part / whole


def model_label(model: str) -> str:
    """A device model as a person reads it; a tier that takes several models is labelled
    ``A100|H100|L40S`` in the evidence, which reads as "the A100, H100 or L40S tier"."""
    parts = [m for m in model.split("|") if m]
    if len(parts) < 2:
        return model
    return f"the {', '.join(parts[:-1])} or {parts[-1]} tier"
