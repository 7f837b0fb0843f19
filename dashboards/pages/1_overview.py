"""Overview: how many decisions, how many succeeded, how often the first choice was served.

Totals and hourly trends come from ``/v1/stats/fallback`` (all counting is done by the API);
"pending now" and the policy versions in effect come from the same endpoint grouped by
outcome and by policy version.
"""

from __future__ import annotations

import streamlit as st

from dashboards import client
from dashboards.filters import filter_bar
from dashboards.view import empty, has_columns, load, num, pct, ratio, reading

SOURCE = "/v1/stats/fallback"

st.title("Overview")
filters = filter_bar()

totals = load(lambda: client.stats("fallback", filters), "decision totals")
if empty(totals, "decisions") or totals is None or not has_columns(totals, SOURCE, "decisions", "allocated", "first_choice", "fallbacks"):
    st.stop()

decisions = sum(num(r["decisions"]) for r in totals.rows)
allocated = sum(num(r["allocated"]) for r in totals.rows)
first_choice = sum(num(r["first_choice"]) for r in totals.rows)
fallbacks = sum(num(r["fallbacks"]) for r in totals.rows)

hourly = load(lambda: client.stats("fallback", filters, ("hour",)), "hourly trends")
hours = sorted(hourly.rows, key=lambda r: str(r.get("hour"))) if hourly else []


def trend(column: str, per: str | None = None) -> list[float]:
    if per is None:
        return [num(r.get(column)) for r in hours]
    return [round(100 * num(r.get(column)) / num(r.get(per)), 1) if num(r.get(per)) else 0.0 for r in hours]


pending = load(lambda: client.stats("health", filters), "pending work")
pending_now = (
    int(sum(num(r.get("pending_now")) for r in pending.rows))
    if pending is not None and pending.rows and not pending.missing("pending_now")
    else None
)

cols = st.columns(5)
cols[0].metric("Decisions", f"{int(decisions):,}", chart_data=trend("decisions"), chart_type="bar", border=True)
cols[1].metric("Allocation success", pct(ratio(allocated, decisions)), chart_data=trend("allocated", "decisions"), border=True)
cols[2].metric("First-choice rate", pct(ratio(first_choice, allocated)), chart_data=trend("first_choice", "allocated"), border=True)
cols[3].metric("Fallback rate", pct(ratio(fallbacks, allocated)), chart_data=trend("fallbacks", "allocated"), border=True)
cols[4].metric("Pending now", "–" if pending_now is None else f"{pending_now:,}", border=True)
if pending_now is None:
    st.caption("Pending now: /v1/stats/health did not return `pending_now`.")

versions = load(lambda: client.stats("fallback", filters, ("policy_version",)), "policy versions")
if versions is not None and not empty(versions, "policy versions") and has_columns(versions, SOURCE, "policy_version"):
    st.subheader("Policy versions in effect")
    st.dataframe(
        [{"policy version": r["policy_version"], "decisions": int(num(r["decisions"]))} for r in versions.rows],
        hide_index=True,
        key="overview_versions",
    )

reading(
    f"{int(decisions):,} decisions: {pct(ratio(allocated, decisions))} allocated, "
    f"{pct(ratio(first_choice, allocated))} of allocations got the first-choice model and "
    f"{pct(ratio(fallbacks, allocated))} fell back."
)
