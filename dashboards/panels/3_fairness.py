"""Fairness: is each tenant getting its entitlement, how long does it wait, is anyone starving.

Per-tenant usage, waits and first-choice rates come from ``/v1/stats/fairness`` (aggregated by
the API per tenant, and per hour × tenant for the trend). Jain's index is taken over normalised
shares x_i = share_i / entitlement_i (Jain, Chiu, Hawe 1984; fairness.md §5.1). When the API
gives no per-tenant entitlement the page says so and judges against equal entitlements.
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
    load_optional,
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
if empty(tenants, "tenant activity") or tenants is None or not has_columns(tenants, SOURCE, "tenant", "decisions", "allocated"):
    st.stop()
rows = sorted(tenants.rows, key=lambda r: str(r["tenant"]))
names = [str(r["tenant"]) for r in rows]
equal_entitlement = tenants.missing("entitlement") != []


def entitlement(r: dict[str, Any]) -> float:
    return 1.0 / len(rows) if equal_entitlement else num(r["entitlement"])


if tenants.missing(usage_col):
    st.info(f"{unit} usage is not available from this API: it needs a `{usage_col}` column in {SOURCE} "
            "(device counts weighted by the policy's model equivalence table).")
else:
    used_total = sum(num(r[usage_col]) for r in rows)
    shares = [num(r[usage_col]) / used_total if used_total else 0.0 for r in rows]
    st.plotly_chart(
        figures.grouped_bars(names, {"share": shares, "entitlement": [entitlement(r) for r in rows]},
                             f"Share of allocated devices vs entitlement per tenant ({unit})"),
        key="fair_share",
    )
    if equal_entitlement:
        st.caption(f"{SOURCE} gives no `entitlement` per tenant, so every tenant is judged against an equal share.")
    jain = jain_index([(sh, entitlement(r)) for sh, r in zip(shares, rows, strict=True)])
    gaps = sorted((sh - entitlement(r), str(r["tenant"])) for sh, r in zip(shares, rows, strict=True))
    reading(
        f"Jain's index over normalised shares is {jain:.3f} (1 is perfectly fair, target ≥ 0.95); "
        f"furthest below entitlement: {gaps[0][1]} ({100 * gaps[0][0]:+.1f} points)."
        if jain is not None
        else "No tenant has an entitlement in this window, so fairness cannot be judged."
    )

st.subheader("Jain's index over time")
hourly = load_optional(
    lambda: client.stats("fairness", filters, ("hour", "tenant")),
    "Fairness per hour",
    f"`{SOURCE}?group_by=hour,tenant` (per-tenant usage per hour)",
)
if hourly is not None and not empty(hourly, "hourly activity") and has_columns(hourly, SOURCE + "?group_by=hour,tenant", "hour", "tenant", usage_col):
    by_hour: dict[str, list[float]] = {}
    for r in hourly.rows:
        by_hour.setdefault(str(r["hour"]), []).append(num(r[usage_col]))
    hours = sorted(by_hour)
    st.plotly_chart(
        figures.lines(hours, {"Jain's index": [jain_index([(u, 1.0) for u in by_hour[h]]) for h in hours]},
                      "Jain's index per hour (equal entitlements)", y_range=[0, 1.05]),
        key="fair_jain",
    )

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
                "starving": "yes" if r.get("starving") else "",
            }
            for r in rows
        ],
        hide_index=True,
        key="fair_table",
    )
    if tenants.missing("starving"):
        st.caption(f"Starvation flags need a `starving` column in {SOURCE} (pending longer than the policy's limit).")
    starving = [str(r["tenant"]) for r in rows if r.get("starving")]
    worst = max(rows, key=lambda r: (num(r.get("wait_p99_ms")), str(r["tenant"])))
    reading(
        f"Longest p99 wait: {worst['tenant']} ({duration(maybe(worst, 'wait_p99_ms'))}); "
        + (f"starving: {', '.join(starving)}." if starving else "no tenant is flagged as starving.")
    )
