"""Fallback: how often workloads got a less-preferred model, which way they fell, and why.

Rates over time and the preference → outcome flows come from ``/v1/stats/fallback`` grouped by
hour, preferred and allocated model (group key ``model``: the API's ``allocated`` key shares its
name with the allocated-count column); the reasons the preferred model was skipped are the
API's per-reason device counts for the preferred tiers (grouped by ``reason``); regret is the
API's share of fallbacks whose preferred model became available soon after.
"""

from __future__ import annotations

import streamlit as st

from dashboards import client, figures
from dashboards.filters import filter_bar
from dashboards.view import empty, has_columns, load, load_optional, num, pct, ratio, reading

SOURCE = "/v1/stats/fallback"

st.title("Fallback")
filters = filter_bar()

flows = load(lambda: client.stats("fallback", filters, ("hour", "preferred", "model")), "fallback flows")
if empty(flows, "decisions") or flows is None or not has_columns(flows, SOURCE, "hour", "preferred", "model", "decisions", "allocated", "fallbacks"):
    st.stop()

# The fallback rate is of allocations, as the API's own ``fallback_rate`` column defines it.
allocated_by_hour: dict[str, float] = {}
for r in flows.rows:
    allocated_by_hour[str(r["hour"])] = allocated_by_hour.get(str(r["hour"]), 0.0) + num(r["allocated"])
fallback_rows = [
    {"hour": str(r["hour"]), "pair": f"{r['preferred']} → {r['model']}", "rate": num(r["fallbacks"]) / allocated_by_hour[str(r["hour"])]}
    for r in flows.rows
    if num(r["fallbacks"]) and allocated_by_hour[str(r["hour"])]
]
total = sum(allocated_by_hour.values())
fell_back = sum(num(r["fallbacks"]) for r in flows.rows)
pairs: dict[str, float] = {}
for r in flows.rows:
    if num(r["fallbacks"]):
        pair = f"{r['preferred']} → {r['model']}"
        pairs[pair] = pairs.get(pair, 0.0) + num(r["fallbacks"])

left, right = st.columns(2)
with left:
    if fallback_rows:
        st.plotly_chart(
            figures.stacked_area(fallback_rows, "hour", "pair", "rate", "Fallback rate of allocations by hour, preferred → allocated"),
            key="fallback_area",
        )
    else:
        st.info("No fallbacks in this window.")
with right:
    st.plotly_chart(figures.sankey(flows.rows, "preferred", "model", "decisions", "Preference → outcome"), key="fallback_sankey")

top_pair = max(pairs.items(), key=lambda kv: (kv[1], kv[0])) if pairs else None
reading(
    f"{pct(ratio(fell_back, total))} of {int(total):,} allocations fell back"
    + (f"; the most common path is {top_pair[0]} ({int(top_pair[1]):,})." if top_pair else ".")
)

st.subheader("Why the preferred model was skipped")
skipped_model = filters.model or "H100"
reasons = load_optional(
    lambda: client.stats("fallback", filters, ("reason",)),
    "Skip reasons by reason code",
    "`/v1/stats/fallback?group_by=reason` with rows {reason, devices}: device verdicts per reason code in the "
    "skipped preferred tiers (decision_tiers.reasons)",
)
if reasons is not None and not empty(reasons, "skip reasons") and has_columns(reasons, SOURCE + "?group_by=reason", "reason", "devices"):
    ranked = sorted(reasons.rows, key=lambda r: (-num(r["devices"]), str(r["reason"])))
    st.plotly_chart(
        figures.bar([str(r["reason"]) for r in ranked], [num(r["devices"]) for r in ranked], f"Top reasons {skipped_model} devices were skipped"),
        key="fallback_reasons",
    )
    reading(f"The leading reason is {ranked[0]['reason']} ({int(num(ranked[0]['devices'])):,} device verdicts).")

st.subheader("Regret")
regret = load(lambda: client.stats("fallback", filters, ("preferred",)), "regret")
if regret is not None and regret.missing("regret"):
    st.info("Regret is not available from this API: it needs a `regret` column in `/v1/stats/fallback` (fallbacks "
            "whose preferred model became allocatable within 10 minutes, fairness.md §7 goal 3).")
elif regret is not None and not empty(regret, "fallbacks") and has_columns(regret, SOURCE, "preferred", "fallbacks", "regret"):
    st.dataframe(
        [
            {
                "preferred": r["preferred"],
                "fallbacks": int(num(r["fallbacks"])),
                "regretted": int(num(r["regret"])),
                "regret rate": pct(ratio(num(r["regret"]), num(r["fallbacks"]))),
            }
            for r in regret.rows
        ],
        hide_index=True,
        key="fallback_regret",
    )
    regretted = sum(num(r["regret"]) for r in regret.rows)
    all_fallbacks = sum(num(r["fallbacks"]) for r in regret.rows)
    reading(f"{pct(ratio(regretted, all_fallbacks))} of fallbacks would have had their preferred model soon after (target < 5 %).")
