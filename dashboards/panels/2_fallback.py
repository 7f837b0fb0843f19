"""Fallback: how often workloads got a less-preferred model, which way they fell, and why.

Rates over time and the preference → outcome flows come from ``/v1/stats/fallback`` grouped by
hour, preferred and allocated model (group key ``model``: the API's ``allocated`` key shares its
name with the allocated-count column); the reasons the preferred model was skipped are the
API's per-reason device counts for the preferred tiers that were not chosen (grouped by
``reason,preferred``); regret is the API's count of fallbacks whose preferred model was
allocated in the same cluster within 10 minutes.
"""

from __future__ import annotations

import streamlit as st

from dashboards import client, figures
from dashboards.filters import filter_bar
from dashboards.view import empty, has_columns, load, num, pct, ratio, reading

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
reasons = load(lambda: client.stats("fallback", filters, ("reason", "preferred")), "skip reasons by reason code")
if reasons is not None and not empty(reasons, "skipped preferred tiers") and has_columns(
    reasons, SOURCE + "?group_by=reason,preferred", "reason", "preferred", "devices"
):
    preferred_models = sorted({str(r["preferred"]) for r in reasons.rows}, key=lambda m: (m != "H100", m))
    skipped_model = str(st.selectbox("Preferred model", preferred_models, key="fb_skipped"))
    ranked = sorted((r for r in reasons.rows if r["preferred"] == skipped_model), key=lambda r: (-num(r["devices"]), str(r["reason"])))
    st.plotly_chart(
        figures.bar([str(r["reason"]) for r in ranked], [num(r["devices"]) for r in ranked], f"Top reasons {skipped_model} devices were skipped"),
        key="fallback_reasons",
    )
    reading(f"The leading reason {skipped_model} was skipped is {ranked[0]['reason']} "
            f"({int(num(ranked[0]['devices'])):,} device verdicts in tiers that were not chosen).")

st.subheader("Regret")
st.caption("A fallback is regretted when a later decision in the same cluster got the preferred model within 10 minutes.")
regret = load(lambda: client.stats("fallback", filters, ("preferred",)), "regret")
if regret is not None and not empty(regret, "fallbacks") and has_columns(regret, SOURCE, "preferred", "fallbacks", "regret"):
    fell = [r for r in regret.rows if num(r["fallbacks"])]
    st.dataframe(
        [
            {
                "preferred": r["preferred"],
                "fallbacks": int(num(r["fallbacks"])),
                "regretted": int(num(r["regret"])),
                "regret rate": pct(ratio(num(r["regret"]), num(r["fallbacks"]))),
            }
            for r in fell
        ],
        hide_index=True,
        key="fallback_regret",
    )
    regretted = sum(num(r["regret"]) for r in fell)
    all_fallbacks = sum(num(r["fallbacks"]) for r in fell)
    reading(f"{pct(ratio(regretted, all_fallbacks))} of {int(all_fallbacks):,} fallbacks would have had their preferred "
            "model soon after (target < 5 %).")
