"""Fairness: is each tenant getting its entitlement, how long does it wait, is anyone starving.

Every figure is the API's (``/v1/stats/fairness``, the ``audit.metrics`` definitions in
docs/metrics.md): per tenant H100-equivalent hours used against the entitlement (capacity × the
tenant's weight share, with the weights in force at each moment), Jain's index over the whole
window and under contention, per-pod wait percentiles (nearest rank), pods pending at the window
end, failed and starving, and the same wait figures per hour of the window for each tenant
(``by=tenant_hour``, one request). The page draws them and computes none.
"""

from __future__ import annotations

import streamlit as st

from dashboards import client, figures
from dashboards.filters import filter_bar
from dashboards.view import load, maybe, num, reading

SOURCE = "/v1/stats/fairness"

st.title("Fairness")
filters = filter_bar()

answer = load(lambda: client.stats("fairness", filters, ("tenant",)), "tenant fairness")
if answer is None:
    st.stop()
figs = answer.summary
tenants = list(figs.get("tenants") or [])
if not tenants:
    note = figs.get("pod_figures")
    st.info(f"No pod figures for this window{': ' + str(note) if note else '.'}")
    st.stop()
names = [str(t["tenant"]) for t in tenants]


# how a null figure reads, as a null rate does (``view.pct``): Jain's index with no contended hour,
# a wait percentile of a tenant or hour that started no pod
NULL = "–"


def index(value: object) -> str:
    return NULL if value is None else f"{num(value):.3f}"


cols = st.columns(3)
cols[0].metric("Jain's index, whole window", index(figs.get("jain_whole")), border=True,
               help="over H100-eq-hours used / entitlement, every tenant with an entitlement")
cols[1].metric("Jain's index under contention", index(figs.get("jain_contention")), border=True,
               help="mean over hours with ≥ 2 tenants backlogged (a pod pending ≥ 30 min of the hour)")
cols[2].metric("Contended hours", f"{int(num(figs.get('contention_windows'))):,}", border=True)

st.plotly_chart(
    figures.grouped_bars(names, {"used": [num(t["h100_eq_hours"]) for t in tenants],
                                 "entitlement": [num(t["entitlement_h100_eq_hours"]) for t in tenants]},
                         "H100-equivalent hours used vs entitlement per tenant"),
    key="fair_share",
)
below = min(tenants, key=lambda t: (num(t["h100_eq_hours"]) - num(t["entitlement_h100_eq_hours"]), str(t["tenant"])))
reading(
    f"Jain's index over the window is {index(figs.get('jain_whole'))} (1 is perfectly fair); furthest below its "
    f"entitlement: {below['tenant']} ({num(below['h100_eq_hours']):,.1f} of "
    f"{num(below['entitlement_h100_eq_hours']):,.1f} H100-eq-hours)."
)

st.subheader("Waits and starvation per tenant (per pod)")
st.plotly_chart(
    figures.grouped_bars(names, {q: [maybe(t, f"wait_{q}_s") for t in tenants] for q in ("p50", "p95", "p99")},
                         "Wait from creation to first bind (seconds; none: no pod started)"),
    key="fair_wait",
)
st.dataframe(
    [
        {
            "tenant": t["tenant"],
            "weight": num(t["weight"]),
            "pods started": int(num(t["pods_started"])),
            "wait p50 (s)": maybe(t, "wait_p50_s"),
            "wait p95 (s)": maybe(t, "wait_p95_s"),
            "wait p99 (s)": maybe(t, "wait_p99_s"),
            "pending at end": int(num(t["pending_at_end"])),
            "failed": int(num(t["failed"])),
            "starving": int(num(t["starving_pods"])),
            "longest wait (s)": num(t["longest_wait_s"]),
            "device-hours": num(t["device_hours"]),
            "H100-eq-hours": num(t["h100_eq_hours"]),
            "entitlement (H100-eq-h)": num(t["entitlement_h100_eq_hours"]),
        }
        for t in tenants
    ],
    hide_index=True,
    placeholder=NULL,
    key="fair_table",
)
starving = [f"{t['tenant']} ({int(num(t['starving_pods'])):,})" for t in tenants if num(t["starving_pods"])]
worst = max((t for t in tenants if t["wait_p99_s"] is not None),
            key=lambda t: (num(t["wait_p99_s"]), str(t["tenant"])), default=None)
reading(
    (f"Longest p99 wait: {worst['tenant']} ({num(worst['wait_p99_s']):,.0f} s); " if worst is not None
     else "No pod started in this window; ")
    + (f"starving pods: {', '.join(starving)}." if starving else "no pod waited past the starvation timeout.")
)

st.subheader("Waits per hour and tenant (per pod)")
st.caption("Each hour from the window start is its own window: a pod counts in the hour it was first bound, "
           "pending pods at the end of each hour, failed pods in the hour they failed.")
# the API's rows per hour of each tenant, in one answer (a tenant's view: its own hours only, the
# folded "(others)" row has no hours of its own)
hourly = load(lambda: client.breakdown("fairness", filters, ("tenant",), "tenant_hour"), "waits per hour and tenant")
if hourly is None:
    st.stop()
if not hourly:
    st.info("No hours in this window.")
    st.stop()
hour_labels = sorted({str(r["hour"]) for r in hourly})
quantile = str(st.radio("Percentile", ("p50", "p95", "p99"), index=1, horizontal=True, key="fair_hour_q"))
by_tenant = {name: {str(r["hour"]): r for r in hourly if r["tenant"] == name} for name in dict.fromkeys(r["tenant"] for r in hourly)}
st.plotly_chart(
    figures.lines(hour_labels,
                  {name: [maybe(rows[h], f"wait_{quantile}_s") if h in rows else None for h in hour_labels]
                   for name, rows in by_tenant.items()},
                  f"Wait {quantile} per hour, per tenant (seconds; a gap: no pod started that hour)"),
    key="fair_hour_chart",
)
st.dataframe(
    [
        {
            "hour": r["hour"],
            "tenant": r["tenant"],
            "pods started": int(num(r["pods_started"])),
            "wait p50 (s)": maybe(r, "wait_p50_s"),
            "wait p95 (s)": maybe(r, "wait_p95_s"),
            "wait p99 (s)": maybe(r, "wait_p99_s"),
            "pending at end": int(num(r["pending_at_end"])),
            "failed": int(num(r["failed"])),
            "starving": int(num(r["starving_pods"])),
            "longest wait (s)": num(r["longest_wait_s"]),
        }
        for r in sorted(hourly, key=lambda r: (str(r["hour"]), str(r["tenant"])))
    ],
    hide_index=True,
    placeholder=NULL,
    key="fair_hour_table",
)
peak = max((r for r in hourly if r[f"wait_{quantile}_s"] is not None),
           key=lambda r: (num(r[f"wait_{quantile}_s"]), str(r["hour"]), str(r["tenant"])), default=None)
if peak is None:
    reading("No pod started in any hour of this window.")
else:
    reading(f"The longest hourly wait {quantile} is {peak['tenant']}'s at {peak['hour']} "
            f"({num(peak[f'wait_{quantile}_s']):,.0f} s over {int(num(peak['pods_started'])):,} pods started).")
