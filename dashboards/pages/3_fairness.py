"""Fairness: is each tenant getting its entitlement, how long does it wait, is anyone starving.

Per-tenant usage, entitlement, waits and first-choice counts come from ``/v1/stats/fairness``
(aggregated by the API per tenant, and per tenant × hour for the trend). Jain's index is taken
over normalised shares x_i = share_i / entitlement_i (Jain, Chiu, Hawe 1984; fairness.md §5.1),
which is why both numbers are needed per tenant.
"""

from __future__ import annotations

import streamlit as st

from dashboards import client, figures
from dashboards.fairness import jain_index
from dashboards.filters import filter_bar
from dashboards.view import empty, has_columns, load, num, pct, ratio, reading

SOURCE = "/v1/stats/fairness"
UNITS = {"raw device-seconds": ("share", "entitlement"), "H100-equivalent": ("share_h100eq", "entitlement_h100eq")}

st.title("Fairness")
filters = filter_bar()

unit = st.radio("Units", list(UNITS), horizontal=True, key="fair_units")
share_col, ent_col = UNITS[str(unit)]

tenants = load(lambda: client.stats("fairness", filters, ("tenant",)), "tenant fairness")
if empty(tenants, "tenant activity") or tenants is None or not has_columns(tenants, SOURCE, "tenant", share_col, ent_col):
    st.stop()
rows = sorted(tenants.rows, key=lambda r: str(r["tenant"]))
names = [str(r["tenant"]) for r in rows]
st.plotly_chart(
    figures.grouped_bars(
        names,
        {"share": [num(r[share_col]) for r in rows], "entitlement": [num(r[ent_col]) for r in rows]},
        f"Share vs entitlement per tenant ({unit})",
    ),
    key="fair_share",
)
jain = jain_index([(num(r[share_col]), num(r[ent_col])) for r in rows])
gaps = sorted((num(r[share_col]) - num(r[ent_col]), str(r["tenant"])) for r in rows)
reading(
    f"Jain's index over normalised shares is {jain:.3f} (1 is perfectly fair, target ≥ 0.95); "
    f"furthest below entitlement: {gaps[0][1]} ({gaps[0][0]:+.3f})."
    if jain is not None
    else "No tenant has an entitlement in this window, so fairness cannot be judged."
)

st.subheader("Jain's index over time")
hourly = load(lambda: client.stats("fairness", filters, ("hour", "tenant")), "hourly fairness")
if hourly is not None and not empty(hourly, "hourly activity") and has_columns(hourly, SOURCE, "hour", "tenant", share_col, ent_col):
    by_hour: dict[str, list[tuple[float, float]]] = {}
    for r in hourly.rows:
        by_hour.setdefault(str(r["hour"]), []).append((num(r[share_col]), num(r[ent_col])))
    hours = sorted(by_hour)
    st.plotly_chart(
        figures.lines(hours, {"Jain's index": [jain_index(by_hour[h]) for h in hours]}, "Jain's index per hour", y_range=[0, 1.05]),
        key="fair_jain",
    )

st.subheader("Waiting and first choice per tenant")
if has_columns(tenants, SOURCE, "wait_p50_ms", "wait_p95_ms", "wait_p99_ms", "first_choice", "allocated"):
    st.plotly_chart(
        figures.grouped_bars(
            names,
            {q: [num(r[f"wait_{q}_ms"]) / 1000 for r in rows] for q in ("p50", "p95", "p99")},
            "Wait before allocation (seconds)",
        ),
        key="fair_wait",
    )
    table = [
        {
            "tenant": r["tenant"],
            "decisions": int(num(r.get("decisions"))),
            "allocated": int(num(r["allocated"])),
            "first-choice rate": pct(ratio(num(r["first_choice"]), num(r["allocated"]))),
            "wait p99 (s)": round(num(r["wait_p99_ms"]) / 1000, 1),
            "starving": "yes" if r.get("starving") else "",
        }
        for r in rows
    ]
    st.dataframe(table, hide_index=True, key="fair_table")
    starving = [str(r["tenant"]) for r in rows if r.get("starving")]
    worst = max(rows, key=lambda r: (num(r["wait_p99_ms"]), str(r["tenant"])))
    reading(
        f"Longest p99 wait: {worst['tenant']} ({num(worst['wait_p99_ms']) / 1000:.1f} s); "
        + (f"starving: {', '.join(starving)}." if starving else "no tenant is flagged as starving.")
    )
