"""Overview: how many decisions, how many succeeded, how often the first choice was served.

Totals of decision records (every attempt of a pod: ``decision_rows`` in docs/metrics.md) and the
pods pending at the window end come from ``/v1/stats/overview`` per tenant; hourly trends and the policy versions in effect come from
``/v1/stats/fallback`` grouped by hour and by policy version (all counting is done by the API).
A tenant caller's headline is its own decisions and pods, the population of the API's first-choice
and fallback figures for it; the other tenants, folded by the API into ``(others)``, are named apart.
"""

from __future__ import annotations

import streamlit as st

from audit.records import OTHERS_TENANT
from dashboards import client
from dashboards.filters import filter_bar
from dashboards.view import count, empty, has_columns, load, no_pod_figures, num, pct, ratio, reading

SOURCE = "/v1/stats/overview"

st.title("Overview")
filters = filter_bar()

totals = load(lambda: client.stats("overview", filters, ("tenant",)), "decision totals")
if empty(totals, "decisions") or totals is None or not has_columns(
    totals, SOURCE, "decisions", "allocated", "unschedulable", "pending_now"
):
    st.stop()

# A tenant caller's rows are its own and every other tenant folded into "(others)"; the headline is
# one population, the one the API's pod figures beside it (first choice, fallbacks) are of: the
# caller's own. The folded row is named apart below.
own = [r for r in totals.rows if r["tenant"] != OTHERS_TENANT]
others = [r for r in totals.rows if r["tenant"] == OTHERS_TENANT]
decisions = sum(num(r["decisions"]) for r in own)
allocated = sum(num(r["allocated"]) for r in own)
unschedulable = sum(num(r["unschedulable"]) for r in own)
# null without pod figures (several clusters and none picked): unknown, not zero
pending_known = all(r["pending_now"] is not None for r in own)
pending_now = sum(num(r["pending_now"]) for r in own) if pending_known else None
no_pod_figures(totals.summary)

hourly = load(lambda: client.stats("fallback", filters, ("hour",)), "hourly trends")
hours = sorted(hourly.rows, key=lambda r: str(r.get("hour"))) if hourly else []
# first choice and fallback are the API's pod-level figures: DRA pods whose claims offer alternatives
pods = hourly.summary if hourly else {}
first_rate = pods.get("first_choice_rate")


def trend(part: str, whole: str | None = None) -> list[float]:
    """Hourly values of a count, or of a count as a percentage of another, for the sparklines."""
    def value(r: dict) -> float:
        return num(r.get(part))

    if whole is None:
        return [value(r) for r in hours]
    return [round(100 * value(r) / num(r.get(whole)), 1) if num(r.get(whole)) else 0.0 for r in hours]


cols = st.columns(6)
cols[0].metric("Decisions", f"{int(decisions):,}", chart_data=trend("decisions"), chart_type="bar", border=True,
               help="Decision records: every attempt of a pod counts.")
# per decision, unlike the pod rates beside it: a pod's failed attempts before its allocation count against it
cols[1].metric("Allocation success (per decision)", pct(ratio(allocated, decisions)),
               chart_data=trend("allocated", "decisions"), border=True, help="allocated decisions / decisions")
cols[2].metric("First-choice rate", pct(None if first_rate is None else num(first_rate)), border=True,
               help=f"of {count(pods.get('pods_with_preference'))} DRA pods whose claims offer alternatives")
# the API's per-pod count, as the Fallback page shows it: a rate of pods would be a figure of the
# page's own, and the API's ``fallback_rate`` is another one (of allocated decision records)
cols[3].metric("Fallbacks (pods)", count(pods.get("fallbacks")), border=True,
               help="DRA pods with alternatives that got a later one")
cols[4].metric("Unschedulable attempts", f"{int(unschedulable):,}", chart_data=trend("unschedulable"), chart_type="bar",
               border=True, help="Attempts that found no device (a pod may have several).")
cols[5].metric("Pending at window end", "–" if pending_now is None else f"{int(pending_now):,}", border=True,
               help="Pods created and neither bound nor failed at the end of the window.")

for r in others:
    st.caption(f"Other tenants, folded as {OTHERS_TENANT} and not counted above: {int(num(r['decisions'])):,} "
               f"decisions, {int(num(r['allocated'])):,} allocated; "
               + ("pods pending at the window's end unknown." if r["pending_now"] is None
                  else f"{int(num(r['pending_now'])):,} pods pending at the window's end."))

versions = load(lambda: client.stats("fallback", filters, ("policy_version",)), "policy versions")
if versions is not None and not empty(versions, "policy versions") and has_columns(versions, "/v1/stats/fallback", "policy_version"):
    st.subheader("Policy versions in effect")
    st.dataframe(
        [{"policy version": r["policy_version"], "decisions": int(num(r["decisions"]))} for r in versions.rows],
        hide_index=True,
        key="overview_versions",
    )

reading(
    f"{int(decisions):,} decisions: {pct(ratio(allocated, decisions))} allocated, "
    f"{pct(None if first_rate is None else num(first_rate))} of {count(pods.get('pods_with_preference'))} pods with alternatives got "
    f"their first choice and {count(pods.get('fallbacks'))} fell back; "
    + ("the pods pending at the window's end are unknown (no pod figures)." if pending_now is None
       else f"{int(pending_now):,} pods were pending at the window's end.")
)
