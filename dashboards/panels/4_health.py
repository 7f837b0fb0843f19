"""Health & failures: device health churn, bind-time conflicts, node loss, retries, terminal failures.

Everything is counted by the API in ``/v1/stats/health``: how many distinct devices were
unhealthy and for how many device-hours (from the world event log, docs/metrics.md), and per
hour the evidence of the decisions — device verdicts (``unhealthy``, ``binding_conflict``,
``stale_slice``; one per device per tier per attempt, so they count evaluations, not devices),
retries by retry class (``node_lost`` among them) and terminal failures; the page arranges them
over time and splits the verdicts by device model (``group_by=hour,model``).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from dashboards import client, figures
from dashboards.filters import filter_bar
from dashboards.view import count, empty, has_columns, load, model_label, no_pod_figures, num, reading

SOURCE = "/v1/stats/health"
VERDICTS = ("unhealthy", "binding_conflict", "stale_slice")

st.title("Health & failures")
filters = filter_bar()

hourly = load(lambda: client.stats("health", filters), "health counts")
if empty(hourly, "health or failure activity") or hourly is None or not has_columns(
    hourly, SOURCE, "hour", *VERDICTS, "retries", "terminal_failures"
):
    st.stop()
rows = sorted(hourly.rows, key=lambda r: str(r["hour"]))
hours = [str(r["hour"]) for r in rows]


def retries(r: dict[str, Any], retry_class: str | None = None) -> float:
    by_class = r.get("retries") or {}
    if retry_class is not None:
        return num(by_class.get(retry_class))
    return sum(num(v) for v in by_class.values())


node_lost = [retries(r, "node_lost") for r in rows]
totals = {c: int(sum(num(r[c]) for r in rows)) for c in (*VERDICTS, "terminal_failures")}
totals["node_lost"] = int(sum(node_lost))

figs = hourly.summary
no_pod_figures(figs)
top = st.columns(2)
top[0].metric("Unhealthy devices", count(figs.get("unhealthy_devices")), border=True,
              help="distinct devices unhealthy at some moment of the window")
top[1].metric("Unhealthy device-hours", count(figs.get("unhealthy_device_hours"), 1), border=True)

cols = st.columns(5)
for col, label, values in [
    (cols[0], "Unhealthy verdicts (evaluations)", [num(r["unhealthy"]) for r in rows]),
    (cols[1], "Binding conflicts", [num(r["binding_conflict"]) for r in rows]),
    (cols[2], "Stale slices", [num(r["stale_slice"]) for r in rows]),
    # binds a node's loss turned back, not nodes lost: a node that goes while no bind is on its way to it counts 0
    (cols[3], "Binds lost with their node", node_lost),
    (cols[4], "Terminal failures", [num(r["terminal_failures"]) for r in rows]),
]:
    col.metric(label, f"{int(sum(values)):,}", chart_data=values, chart_type="bar", border=True)

st.plotly_chart(
    figures.lines(hours, {**{c: [num(r[c]) for r in rows] for c in VERDICTS}, "node_lost": node_lost},
                  "Health verdicts and bind-time failures per hour"),
    key="health_over_time",
)
busiest = max((*VERDICTS, "node_lost"), key=lambda c: (totals[c], c))
reading(
    f"{count(figs.get('unhealthy_devices'))} devices were unhealthy for {count(figs.get('unhealthy_device_hours'), 1)} "
    f"device-hours; decisions recorded {sum(totals[c] for c in (*VERDICTS, 'node_lost')):,} health and bind-time "
    f"verdicts (device evaluations, not devices); most are {busiest} "
    f"({totals[busiest]:,}); terminal failures: {totals['terminal_failures']:,}."
)

st.subheader("Retries by class")
classes = sorted({c for r in rows for c in (r.get("retries") or {})})
if not classes:
    st.info("No retries in this window.")
else:
    counts = [sum(retries(r, c) for r in rows) for c in classes]
    st.plotly_chart(
        figures.grouped_bars(hours, {c: [retries(r, c) for r in rows] for c in classes}, "Retries per hour by class", barmode="stack"),
        key="health_retries",
    )
    largest = max(zip(counts, classes, strict=True))
    reading(f"{int(sum(counts)):,} retries; the largest class is {largest[1]} ({int(largest[0]):,}).")

st.subheader("Health verdicts by device model")
st.caption("Tier evidence names each tier's device model, not the node of every device, so the split is per model.")
by_model = load(lambda: client.stats("health", filters, ("hour", "model")), "health verdicts by model")
if by_model is not None and not empty(by_model, "verdicts by model") and has_columns(
    by_model, SOURCE + "?group_by=hour,model", "hour", "model", *VERDICTS
):
    model_hours = sorted({str(r["hour"]) for r in by_model.rows})
    models = sorted({str(r["model"]) for r in by_model.rows})
    unhealthy = {(str(r["hour"]), str(r["model"])): num(r["unhealthy"]) for r in by_model.rows}
    st.plotly_chart(
        figures.lines(model_hours, {m: [unhealthy.get((h, m), 0.0) for h in model_hours] for m in models},
                      "Unhealthy device verdicts per hour by model"),
        key="health_by_model",
    )
    per_model = {m: sum(unhealthy.get((h, m), 0.0) for h in model_hours) for m in models}
    worst_model = max(models, key=lambda m: (per_model[m], m))
    reading(f"Most unhealthy verdicts are on {model_label(worst_model)} ({int(per_model[worst_model]):,} of "
            f"{int(sum(per_model.values())):,}).")
