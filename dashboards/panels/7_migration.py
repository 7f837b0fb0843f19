"""Migration: the device-plugin and DRA cohorts (and claim-template versions) compared, with a verdict.

Cohort figures — success, fallback and waits over decision records (every attempt of a pod, with
the wait it had when decided: docs/metrics.md, ``cohorts``), utilisation — and the
promote/hold/rollback verdict (``audit.migration``'s judgement of device-plugin against DRA,
computed by the API within strata of model asked for × tenant × hour, so that pods are only
compared with pods that asked for the same model, for the same tenant, in the same hour, whatever
model each got) come from
``/v1/stats/migration``, one row per track × template version; the page lays the cohorts side by
side with how many of each cohort's pods found a counterpart (matched) and how many did not.
"""

from __future__ import annotations

import streamlit as st

from dashboards import client, figures
from dashboards.filters import filter_bar
from dashboards.view import duration, empty, has_columns, load, maybe, none_or, num, pct, reading

SOURCE = "/v1/stats/migration"
VERDICT_STYLE = {"promote": st.success, "hold": st.warning, "rollback": st.error}


def _count(value: object) -> str:
    """A pod count; a dash for cohorts that are neither baseline nor candidate."""
    return "–" if value is None else str(value)


st.title("Migration")
filters = filter_bar()

cohorts = load(lambda: client.stats("migration", filters), "migration cohorts")
if empty(cohorts, "cohorts") or cohorts is None or not has_columns(
    cohorts, SOURCE, "track", "template_version", "decisions", "success_rate", "fallback_rate", "wait_p50_ms", "wait_p95_ms"
):
    st.stop()
rows = sorted(cohorts.rows, key=lambda r: (str(r["track"]), str(r["template_version"])))
names = [f"{r['track']} {r['template_version']}".strip() for r in rows]

if has_columns(cohorts, SOURCE, "verdict", "reason"):
    verdict = str(rows[0]["verdict"])
    VERDICT_STYLE.get(verdict, st.info)(f"Verdict: {verdict.upper()}" + (f" — {rows[0]['reason']}" if rows[0]["reason"] else ""))

left, right = st.columns(2)
with left:
    st.plotly_chart(
        figures.grouped_bars(names, {"success": [maybe(r, "success_rate") for r in rows], "fallback": [maybe(r, "fallback_rate") for r in rows]},
                             "Success and fallback rate per cohort (no fallback bar: nothing allocated)"),
        key="mig_rates",
    )
with right:
    st.plotly_chart(
        figures.grouped_bars(names, {q: [none_or(maybe(r, f"wait_{q}_ms"), 1 / 1000) for r in rows] for q in ("p50", "p95")},
                             # not the verdict's scheduling_latency_ms, a per-pod wait to bind
                             "Wait when decided per cohort, every attempt (seconds)"),
        key="mig_latency",
    )
if has_columns(cohorts, SOURCE, "utilisation"):
    measured = [(n, r["utilisation"]) for n, r in zip(names, rows, strict=True) if r["utilisation"] is not None]
    if measured:
        st.plotly_chart(figures.bar([n for n, _ in measured], [num(u) for _, u in measured], "GPU utilisation per cohort"),
                        key="mig_util")
    else:
        st.info("GPU utilisation is not measured for these cohorts: no pod of theirs has released its devices yet.")



st.dataframe(
    [
        {
            "cohort": n,
            "decisions": int(num(r["decisions"])),
            # a null figure (the fallback rate of a cohort with nothing allocated) reads "–" as on the other
            # pages: 0 % would say its allocations never fell back
            "success": pct(maybe(r, "success_rate")),
            "fallback": pct(maybe(r, "fallback_rate")),
            "wait p50": duration(maybe(r, "wait_p50_ms")),
            "wait p95": duration(maybe(r, "wait_p95_ms")),
            "utilisation": pct(r.get("utilisation")),
            # pods left out of the comparison: no pod of the other cohort shares their model × tenant × hour
            "matched pods": _count(r.get("matched_pods")),
            "unmatched pods": _count(r.get("unmatched_pods")),
        }
        for n, r in zip(names, rows, strict=True)
    ],
    hide_index=True,
    key="mig_table",
)
best = max(zip(names, rows, strict=True), key=lambda nr: (num(nr[1]["success_rate"]), nr[0]))
reading(f"{len(rows)} cohorts; the highest success rate is {best[0]} ({pct(maybe(best[1], 'success_rate'))}). "
        "The verdict compares the cohorts within strata of the model asked for × tenant × hour; unmatched pods are left out of it.")
