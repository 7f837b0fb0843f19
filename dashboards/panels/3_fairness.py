"""Fairness: is each tenant getting its entitlement, how long does it wait, is anyone starving.

Per-tenant usage (raw and H100-equivalent), entitlements, waits, first-choice rates and
starvation flags come from ``/v1/stats/fairness`` (aggregated by the API per tenant, and per
hour × tenant for the trend). The entitlement is the tenant's weighted fair share under the
active policy. Jain's index is taken over normalised shares x_i = share_i / entitlement_i
(Jain, Chiu, Hawe 1984).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboards import client, figures
from dashboards.fairness import jain_index
from dashboards.filters import filter_bar
from dashboards.view import (
    duration,
    empty,
    has_columns,
    load,
    maybe,
    none_or,
    num,
    pct,
    reading,
)

SOURCE = "/v1/stats/fairness"
UNITS = {"raw devices": "devices_allocated", "H100-equivalent": "devices_h100eq"}

st.title("Fairness")
filters = filter_bar()

unit = str(st.radio("Units", list(UNITS), horizontal=True, key="fair_units"))
usage_col = UNITS[unit]

tenants = load(lambda: client.stats("fairness", filters, ("tenant",)), "tenant fairness")
if empty(tenants, "tenant activity") or tenants is None or not has_columns(
    tenants, SOURCE, "tenant", "decisions", "allocated", "entitlement", usage_col
):
    st.stop()
rows = sorted(tenants.rows, key=lambda r: str(r["tenant"]))
names = [str(r["tenant"]) for r in rows]


def entitlement(r: dict[str, Any]) -> float:
    return num(r["entitlement"])


used_total = sum(num(r[usage_col]) for r in rows)
shares = [num(r[usage_col]) / used_total if used_total else 0.0 for r in rows]
st.plotly_chart(
    figures.grouped_bars(names, {"share": shares, "entitlement": [entitlement(r) for r in rows]},
                         f"Share of allocated devices vs entitlement per tenant ({unit})"),
    key="fair_share",
)
jain = jain_index([(sh, entitlement(r)) for sh, r in zip(shares, rows, strict=True)])
gaps = sorted((sh - entitlement(r), str(r["tenant"])) for sh, r in zip(shares, rows, strict=True))
reading(
    f"Jain's index over normalised shares is {jain:.3f} (1 is perfectly fair, target ≥ 0.95); "
    f"furthest below entitlement: {gaps[0][1]} ({100 * gaps[0][0]:+.1f} points)."
    if jain is not None
    else "No tenant has an entitlement in this window, so fairness cannot be judged."
)

st.subheader("Jain's index over time")
hourly = load(lambda: client.stats("fairness", filters, ("hour", "tenant")), "fairness per hour")
if hourly is not None and not empty(hourly, "hourly activity") and has_columns(
    hourly, SOURCE + "?group_by=hour,tenant", "hour", "tenant", "entitlement", usage_col
):
    by_hour: dict[str, list[tuple[float, float]]] = {}
    for r in hourly.rows:
        by_hour.setdefault(str(r["hour"]), []).append((num(r[usage_col]), num(r["entitlement"])))
    hours = sorted(by_hour)
    # Jain's index is scale-free, so usage stands in for the share of the hour's total.
    per_hour = [jain_index(by_hour[h]) for h in hours]
    st.plotly_chart(
        figures.lines(hours, {"Jain's index": per_hour}, f"Jain's index per hour ({unit})", y_range=[0, 1.05]),
        key="fair_jain",
    )
    lowest = min(((j, h) for j, h in zip(per_hour, hours, strict=True) if j is not None), default=None)
    if lowest is not None:
        reading(f"The least fair hour is {lowest[1]} (Jain's index {lowest[0]:.3f}).")

st.subheader("Waiting and first choice per tenant")
if has_columns(tenants, SOURCE, "wait_p50_ms", "wait_p95_ms", "wait_p99_ms", "first_choice_rate"):
    st.plotly_chart(
        figures.grouped_bars(names, {q: [none_or(maybe(r, f"wait_{q}_ms"), 1 / 1000) for r in rows] for q in ("p50", "p95", "p99")},
                             "Wait before the decision (seconds)"),
        key="fair_wait",
    )
    st.dataframe(
        [
            {
                "tenant": r["tenant"],
                "decisions": int(num(r["decisions"])),
                "allocated": int(num(r["allocated"])),
                "first-choice rate": pct(maybe(r, "first_choice_rate")),
                "wait p50": duration(maybe(r, "wait_p50_ms")),
                "wait p95": duration(maybe(r, "wait_p95_ms")),
                "wait p99": duration(maybe(r, "wait_p99_ms")),
                "pending now": int(num(r.get("pending_now"))),
                "starving": "yes" if r.get("starving") else "",
            }
            for r in rows
        ],
        hide_index=True,
        key="fair_table",
    )
    starving = [str(r["tenant"]) for r in rows if r.get("starving")]
    worst = max(rows, key=lambda r: (num(r.get("wait_p99_ms")), str(r["tenant"])))
    reading(
        f"Longest p99 wait: {worst['tenant']} ({duration(maybe(worst, 'wait_p99_ms'))}); "
        + (f"starving: {', '.join(starving)}." if starving else "no tenant is flagged as starving.")
    )
