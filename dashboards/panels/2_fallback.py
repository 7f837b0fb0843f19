"""Fallback: how often workloads got a less-preferred model, which way they fell, and why.

The first-choice rate, fallbacks, regret and the preference → outcome paths are the API's
pod-level figures of ``/v1/stats/fallback`` (DRA pods whose claims offer alternatives; a fallback
is regretted when its first choice alone became allocatable on one node, within quota, within
the policy's regret window — docs/metrics.md). The hourly counts come from the same endpoint's rows
grouped by hour, preferred and allocated model: the hourly chart stacks their ``fallback_decisions``,
which count decision records (``decision_rows`` in docs/metrics.md: a pod bound again after an
eviction is two allocated decisions); the reasons the
preferred model was skipped are the API's per-reason device verdicts for the preferred tiers that
were not chosen (grouped by ``reason,preferred``). The regret figures per
preferred model and per hour are the endpoint's ``by=model`` and ``by=hour`` rows, drawn as given.
"""

from __future__ import annotations

import streamlit as st

from dashboards import client, figures
from dashboards.filters import filter_bar
from dashboards.view import count, empty, has_columns, load, no_pod_figures, num, pct, reading

SOURCE = "/v1/stats/fallback"

st.title("Fallback")
filters = filter_bar()

flows = load(lambda: client.stats("fallback", filters, ("hour", "preferred", "model")), "fallback flows")
if empty(flows, "decisions") or flows is None or not has_columns(flows, SOURCE, "hour", "preferred", "model", "decisions", "allocated", "fallback_decisions"):
    st.stop()

# Counts of decision records as the rows give them (``fallback_decisions``): a rate per pair would
# need a denominator of its own, and the hour's allocated decisions are no row's.
fallback_rows = [{"hour": str(r["hour"]), "pair": f"{r['preferred']} → {r['model']}", "decisions": num(r["fallback_decisions"])}
                 for r in flows.rows if num(r["fallback_decisions"])]

figs = flows.summary
no_pod_figures(figs)
cols = st.columns(4)
first_rate = figs.get("first_choice_rate")
regret_rate = figs.get("regret_rate")
cols[0].metric("First-choice rate", pct(None if first_rate is None else num(first_rate)), border=True,
               help=f"of {count(figs.get('pods_with_preference'))} DRA pods whose claims offer alternatives")
cols[1].metric("Fallbacks (pods)", count(figs.get("fallbacks")), border=True)
cols[2].metric("Regretted", count(figs.get("regretted")), border=True)
cols[3].metric("Regret rate", pct(None if regret_rate is None else num(regret_rate)), border=True)
paths = list(figs.get("paths") or [])

left, right = st.columns(2)
with left:
    if fallback_rows:
        st.plotly_chart(
            figures.stacked_area(fallback_rows, "hour", "pair", "decisions", "Fallback decisions by hour, preferred → allocated"),
            key="fallback_area",
        )
    else:
        st.info("No fallback decision in this window.")
with right:
    if paths:
        st.plotly_chart(figures.sankey(paths, "preferred", "allocated", "pods", "Preference → outcome (pods)"),
                        key="fallback_sankey")
    else:
        st.info("No DRA pod with alternatives was bound in this window.")

fell = [p for p in paths if p["preferred"] != p["allocated"]]
top_path = max(fell, key=lambda p: (num(p["pods"]), str(p["allocated"]))) if fell else None
reading(
    f"{count(figs.get('fallbacks'))} of {count(figs.get('pods_with_preference'))} pods with alternatives "
    "fell back"
    + (f"; the most common path is {top_path['preferred']} → {top_path['allocated']} ({int(num(top_path['pods'])):,})."
       if top_path else ".")
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
        figures.bar([str(r["reason"]) for r in ranked], [num(r["devices"]) for r in ranked], f"Top reasons {skipped_model} devices were skipped (device verdicts)"),
        key="fallback_reasons",
    )
    reading(f"The leading reason {skipped_model} was skipped is {ranked[0]['reason']} "
            f"({int(num(ranked[0]['devices'])):,} device verdicts in tiers that were not chosen).")

st.subheader("Regret")
window_s = figs.get("regret_window_s")
st.caption("A fallback is regretted when, within "
           + ("the policy's regret window" if window_s is None else f"{num(window_s) / 60:g} minutes")
           + " after it, its first choice alone would have been allocatable on one node, within the tenant's quota.")
reading(f"{pct(None if regret_rate is None else num(regret_rate))} of {count(figs.get('fallbacks'))} fallbacks "
        "could have had their first choice soon after (target < 5 %).")


def regret_table(rows: list[dict], key: str) -> list[dict]:
    """The API's regret rows as they are, under the column names a person reads."""
    return [
        {
            key: r[key],
            "pods with alternatives": int(num(r["pods_with_preference"])),
            "first-choice rate": pct(None if r["first_choice_rate"] is None else num(r["first_choice_rate"])),
            "fallbacks": int(num(r["fallbacks"])),
            "regretted": int(num(r["regretted"])),
            "regret rate": pct(None if r["regret_rate"] is None else num(r["regret_rate"])),
        }
        for r in rows
    ]


by_model = load(lambda: client.breakdown("fallback", filters, ("hour", "preferred", "model"), "model"),
                "regret per preferred model")
by_hour = load(lambda: client.breakdown("fallback", filters, ("hour", "preferred", "model"), "hour"), "regret per hour")
if by_model is not None and by_hour is not None and not by_model and not by_hour:
    st.info("No regret per model or hour: no pod with alternatives was bound in this window.")
elif by_model is not None and by_hour is not None:
    left, right = st.columns(2)
    with left:
        st.markdown("**Per preferred model** (the first choice of the pods' claims, over the window)")
        if by_model:
            st.dataframe(regret_table(by_model, "preferred"), hide_index=True, key="fallback_regret_model")
        else:
            st.info("No pod with alternatives was bound in this window.")
    with right:
        st.markdown("**Per hour** (a pod counts in the hour it was first bound)")
        st.plotly_chart(
            figures.lines([str(r["hour"]) for r in by_hour],
                          {"regret rate": [None if r["regret_rate"] is None else num(r["regret_rate"]) for r in by_hour],
                           "first-choice rate": [None if r["first_choice_rate"] is None else num(r["first_choice_rate"])
                                                 for r in by_hour]},
                          "Regret and first-choice rates per hour (a gap: no fallback, or no pod, that hour)",
                          y_range=[0, 1]),
            key="fallback_regret_hour_chart",
        )
        st.dataframe(regret_table(by_hour, "hour"), hide_index=True, key="fallback_regret_hour")
worst = max(by_model or [], key=lambda r: (num(r["regretted"]), str(r["preferred"])), default=None)
if worst is not None and num(worst["regretted"]):
    reading(f"Most regretted fallbacks prefer {worst['preferred']}: {int(num(worst['regretted'])):,} of "
            f"{int(num(worst['fallbacks'])):,} fallbacks "
            f"({pct(None if worst['regret_rate'] is None else num(worst['regret_rate']))}).")
elif by_model:
    reading("No fallback of this window was regretted.")
