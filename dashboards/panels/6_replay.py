"""Replay: is every recorded decision reproducible, and what would another policy have done.

Determinism status per hour of decision time (matched, mismatched) and mismatches by cause are
counted by the API from the latest replay run of each decision (``/v1/stats/replay``). "Verify a
window" offers the stored clusters and defaults to the stored time range; a counterfactual run
decides that window again under another policy version (offered from the stored versions)
through ``POST /v1/replay`` and shows each pod's recorded and counterfactual result in words.
"""

from __future__ import annotations

from dataclasses import replace

import streamlit as st

from dashboards import client, figures
from dashboards.client import ApiError, Filters, ReplayReport
from dashboards.counterfactual import counterfactual_rows
from dashboards.extent import Extent, stored_extent
from dashboards.filters import filter_bar
from dashboards.view import empty, has_columns, load, num, pct, ratio, reading

SOURCE = "/v1/stats/replay"

st.title("Replay")
filters = filter_bar()

status = load(lambda: client.stats("replay", filters, ("hour",)), "determinism status over time")
if status is not None and not empty(status, "replay runs") and has_columns(status, SOURCE, "hour", "runs", "matched", "mismatched"):
    rows = sorted(status.rows, key=lambda r: str(r["hour"]))
    hours = [str(r["hour"]) for r in rows]
    st.plotly_chart(
        figures.grouped_bars(hours, {"matched": [num(r["matched"]) for r in rows], "mismatched": [num(r["mismatched"]) for r in rows]},
                             "Replay runs per hour of decision time", barmode="stack"),
        key="replay_status",
    )
    runs = sum(num(r["runs"]) for r in rows)
    mismatched = sum(num(r["mismatched"]) for r in rows)
    reading(f"{int(runs):,} decisions replayed, {pct(ratio(runs - mismatched, runs))} matched; {int(mismatched):,} mismatched.")
    causes = load(lambda: client.stats("replay", filters, ("cause",)), "mismatch causes")
    if causes is not None and causes.rows and has_columns(causes, SOURCE, "cause", "mismatched"):
        bad = [r for r in causes.rows if num(r["mismatched"]) > 0]
        if bad:
            st.dataframe([{"cause": r["cause"], "mismatched": int(num(r["mismatched"]))} for r in bad], hide_index=True, key="replay_causes")

st.subheader("Verify a window")
extent = load(stored_extent, "the stored clusters and time range") or Extent()
window = Filters(cluster="", since=filters.since or extent.since, until=filters.until or extent.until,
                 tenant=filters.tenant, model=filters.model, policy_version=filters.policy_version)
verify_cluster = filters.cluster
if not extent.clusters:
    st.info("No decisions are stored yet, so there is nothing to verify.")
else:
    st.caption(f"Re-executes the decisions of one cluster from {window.since} to {window.until} (the sidebar's "
               "since and until, else everything stored) and compares their digests.")
    # no key: the default follows the sidebar's cluster whenever that changes
    verify_cluster = st.selectbox("Cluster to verify", extent.clusters,
                                  index=extent.clusters.index(filters.cluster) if filters.cluster in extent.clusters else 0)
    limit = int(st.number_input("At most this many decisions", min_value=1, max_value=100_000, value=200, key="rp_limit"))
    if st.button("Verify now", key="rp_verify"):
        try:
            st.session_state["rp_report"] = client.replay_window(replace(window, cluster=str(verify_cluster)), limit).body
        except ApiError as exc:
            st.error(f"Verification failed: {exc}")
        else:
            client.cached_stats.clear()  # the determinism status above has new runs to count: draw it again
            st.rerun()
if "rp_report" in st.session_state:
    verified = ReplayReport(st.session_state["rp_report"])
    if verified.job and verified.body.get("state") == "running" and st.button("Refresh progress", key="rp_refresh"):
        try:
            st.session_state["rp_report"] = client.replay_job(verified.job).body
            verified = ReplayReport(st.session_state["rp_report"])
        except ApiError as exc:
            st.error(f"Could not load replay job {verified.job}: {exc}")
    if verified.job:
        st.caption(f"Replay job {verified.job}: {verified.body.get('state', '?')}, "
                   f"{verified.body.get('done', 0):,} of {verified.body.get('total', 0):,} decisions done.")
    summary = verified.summary
    cols = st.columns(3)
    cols[0].metric("Replayed", f"{int(num(summary.get('decisions'))):,}")
    cols[1].metric("Matched", f"{int(num(summary.get('matches'))):,}")
    cols[2].metric("Mismatched", f"{int(num(summary.get('mismatches'))):,}")
    by_cause = summary.get("mismatch_causes") or {}
    if by_cause:
        st.plotly_chart(figures.bar(list(by_cause), list(by_cause.values()), "Mismatches by cause"), key="rp_causes")
    if verified.runs:
        st.dataframe(
            [{"decision": r.get("decision_id"), "match": r.get("match"), "cause": r.get("cause", ""),
              "diff": "; ".join(map(str, r.get("diff") or []))} for r in verified.runs],
            hide_index=True, key="rp_runs",
        )
    replayed = num(summary.get("decisions"))
    reading(f"{int(replayed):,} decisions replayed: {pct(ratio(num(summary.get('matches')), replayed))} reproduced "
            "their recorded digests.")

st.subheader("Counterfactual run")
st.caption("Decides the same window of the same cluster again under another policy version and compares the outcomes.")
versions = list(extent.policy_versions)
other = st.selectbox("Counterfactual policy version", versions, index=None, key="cf_policy", accept_new_options=True,
                     placeholder=f"a stored version, e.g. {versions[-1]}" if versions else "a policy version",
                     help="Versions decisions were made under; type another version the store holds to try it.")
other = str(other or "").strip()
if st.button("Run counterfactual", key="cf_run", disabled=not other):
    try:
        report = client.counterfactual(replace(window, cluster=str(verify_cluster)), other)
    except ApiError as exc:
        st.error(f"Counterfactual run failed: {exc}")
    else:
        st.session_state["cf_report"] = report.body
if "cf_report" in st.session_state:
    cf_runs = ReplayReport(st.session_state["cf_report"]).runs
    changed = [r for r in cf_runs if r.get("match") is False]
    left, right = st.columns(2)
    left.metric("Decisions replayed", f"{len(cf_runs):,}")
    right.metric(f"Outcome changed under {other or 'the other policy'}", f"{len(changed):,}")
    st.dataframe(counterfactual_rows(cf_runs), hide_index=True, key="cf_runs")
    reading(f"{len(changed):,} of {len(cf_runs):,} decisions would have come out differently.")
