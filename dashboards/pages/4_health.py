"""Health & failures: device health churn, bind-time conflicts, node loss, retries, terminal failures.

Everything is counted by the API in ``/v1/stats/health`` per hour (and per model for the
health transitions); the page arranges the counts over time.
"""

from __future__ import annotations

import streamlit as st

from dashboards import client, figures
from dashboards.filters import filter_bar
from dashboards.view import empty, has_columns, load, num, reading

SOURCE = "/v1/stats/health"
FAILURES = ("unhealthy", "binding_conflict", "stale_slice", "node_lost")
RETRY_PREFIX = "retry_"

st.title("Health & failures")
filters = filter_bar()

hourly = load(lambda: client.stats("health", filters, ("hour",)), "health counts")
if empty(hourly, "health or failure activity") or hourly is None or not has_columns(hourly, SOURCE, "hour", *FAILURES, "terminal"):
    st.stop()
rows = sorted(hourly.rows, key=lambda r: str(r["hour"]))
hours = [str(r["hour"]) for r in rows]
totals = {c: int(sum(num(r[c]) for r in rows)) for c in (*FAILURES, "terminal")}

cols = st.columns(5)
for col, (label, key) in zip(
    cols,
    [("Unhealthy verdicts", "unhealthy"), ("Binding conflicts", "binding_conflict"), ("Stale slices", "stale_slice"),
     ("Node losses", "node_lost"), ("Terminal failures", "terminal")],
    strict=True,
):
    col.metric(label, f"{totals[key]:,}", chart_data=[num(r[key]) for r in rows], chart_type="bar", border=True)

st.plotly_chart(
    figures.lines(hours, {c: [num(r[c]) for r in rows] for c in FAILURES}, "Health and bind-time failures per hour"),
    key="health_over_time",
)
busiest = max(FAILURES, key=lambda c: (totals[c], c))
reading(
    f"{sum(totals[c] for c in FAILURES):,} failed attempts; most are {busiest} ({totals[busiest]:,}); "
    f"{totals['terminal']:,} ended terminally."
)

st.subheader("Retries by class")
retry_cols = sorted({k for r in rows for k in r if k.startswith(RETRY_PREFIX)})
if not retry_cols:
    st.warning(f"{SOURCE} returned no `{RETRY_PREFIX}<class>` columns; retries by class cannot be drawn.")
else:
    classes = [c.removeprefix(RETRY_PREFIX) for c in retry_cols]
    counts = [sum(num(r.get(c)) for r in rows) for c in retry_cols]
    st.plotly_chart(figures.bar(classes, counts, "Retries by class"), key="health_retries")
    top = max(zip(counts, classes, strict=True))
    reading(f"{int(sum(counts)):,} retries; the largest class is {top[1]} ({int(top[0]):,}).")

st.subheader("Health transitions by model")
by_model = load(lambda: client.stats("health", filters, ("hour", "model")), "health transitions by model")
if by_model is not None and not empty(by_model, "health transitions") and has_columns(by_model, SOURCE, "hour", "model", "unhealthy"):
    st.plotly_chart(
        figures.stacked_area(by_model.rows, "hour", "model", "unhealthy", "Unhealthy verdicts per hour by model"),
        key="health_by_model",
    )
