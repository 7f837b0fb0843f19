"""Decision explorer: find a decision, see its evidence tier by tier, ask why a model was skipped.

Search goes through ``/v1/decisions`` (by pod, or by claim with ``claim=``, within the shared filters) or
``/v1/decisions/{id}``; the why-skipped answer with its per-device table is
``/v1/decisions/{id}/why?model=M&detail=devices``, which also names who holds each in-use device
(within the caller's tenant) and, for a pod the decision left without devices, says what it would
get if scheduled now (a device-plugin decision names no devices: the page says so instead of asking); "Replay now" posts the decision id to
``/v1/replay`` and shows whether the re-execution matched the recorded digests.
"""

from __future__ import annotations

import streamlit as st

from audit.records import DecisionRecord
from dashboards import client, figures
from dashboards.client import ApiError
from dashboards.explorer import (
    describe_replay,
    detail_text,
    has_device_reasons,
    label_of,
    next_step_blockers,
    next_step_text,
    why_models,
)
from dashboards.filters import filter_bar
from dashboards.view import load, reading

SEARCH_KINDS = ("Pod", "Claim", "Decision id")

st.title("Decision explorer")
filters = filter_bar()

kind = st.radio("Search by", SEARCH_KINDS, horizontal=True, key="ex_kind")
query = st.text_input(
    "Search", key="ex_query", placeholder={"Pod": "namespace/pod or pod", "Claim": "claim name", "Decision id": "uuid"}[str(kind)]
).strip()

found: list[DecisionRecord] = []
if not query:
    recent = load(lambda: client.decisions(filters, limit=20, fallback="true"), "recent fallbacks")
    if recent is None:
        st.stop()
    if not recent.items:
        st.info("No fallback decisions for these filters. Search for a pod, claim or decision id.")
        st.stop()
    st.caption("Recent fallback decisions (search above to find a specific one).")
    found = recent.items
elif kind == "Decision id":
    one = load(lambda: client.decision(query), f"decision {query}")
    found = [one] if one is not None else []
else:
    if kind == "Claim":
        extra = {"claim": query}  # decisions whose claims list holds this ResourceClaim name
    else:
        namespace, _, pod = query.rpartition("/")
        extra = {"namespace": namespace, "pod": pod}
    page = load(lambda: client.decisions(filters, limit=50, **extra), f"decisions for {kind.lower()} {query}")
    found = page.items if page is not None else []
    if page is not None and not found:
        st.info(f"No decision found for {str(kind).lower()} {query!r} with these filters.")
if not found:
    st.stop()

labels = {label_of(r): r for r in found}
chosen = st.selectbox("Decision", list(labels), key="ex_decision")
record = labels[str(chosen)]

cols = st.columns(4)
cols[0].metric("Outcome", record.outcome)
cols[1].metric("Allocated", record.allocated_model or "–", help=f"preferred {record.preferred_model or '–'}")
cols[2].metric("Node", record.node or "–")
cols[3].metric("Policy version", record.policy_version)
st.caption(f"decision `{record.decision_id}` · cluster {record.cluster} · pod {record.namespace}/{record.pod} · attempt {record.attempt} · seq {record.seq} · {record.time}")

st.subheader("Evidence per tier")
if not record.tiers:
    st.info("This decision carries no tier evidence.")
for tier in record.tiers:
    st.plotly_chart(figures.tier_waterfall(tier), key=f"ex_waterfall_{tier.index}")

st.subheader("Why was a model skipped?")
models = why_models(record)
model = st.selectbox("Model", models or ["H100"], key="ex_model")
answer = load(lambda: client.why(record.decision_id, str(model)), f"the explanation for {model}")
if answer is not None:
    reading(answer.summary or f"{model} {'was skipped' if answer.skipped else 'was not skipped'}.")
    if answer.reasons:
        st.plotly_chart(
            figures.bar(list(answer.reasons), list(answer.reasons.values()), f"{model} devices by primary reason"),
            key="ex_why_reasons",
        )
    if answer.blockers:
        st.dataframe(answer.blockers, hide_index=True, key="why_blockers")
    st.caption(f"Explained under policy {answer.policy_version or record.policy_version}.")

st.markdown(f"**Every {model} device and its primary reason** (the world replayed at seq {record.seq})")
# A device-plugin pod asks for a count of GPUs, which names no device: the API refuses a
# per-device answer for it (422), so the page says why there is none instead of asking.
detailed = None
if not has_device_reasons(record):
    st.info(f"Pod {record.namespace}/{record.pod} asks for GPUs through the device plugin, by count: no device is "
            "named, so there are no per-device reasons. The answer above comes from the decision record.")
else:
    detailed = load(lambda: client.why(record.decision_id, str(model), devices=True), f"the per-device answer for {model}")
if detailed is not None:
    # The container carries the key into the page (``st-key-why_devices``) for links and the browser test.
    with st.container(key="why_devices"):
        st.dataframe(
            [{"device": d.device, "node": d.node, "reason": d.reason, "detail": detail_text(d.detail)} for d in detailed.devices],
            hide_index=True,
        )
    if detailed.would_get:
        # A pod the decision left without devices: what it would get now, apart from the outcome above.
        st.markdown("**What happens next**")
        st.info(next_step_text(detailed.would_get))
        if detailed.would_get.get("blockers"):
            st.dataframe(next_step_blockers(detailed.would_get), hide_index=True, key="why_next_blockers")

if st.button("Replay now", key="ex_replay"):
    try:
        verdict, ok = describe_replay(client.replay([record.decision_id]), record.decision_id)
    except ApiError as exc:
        st.error(f"Replay failed: {exc}")
    else:
        (st.success if ok else st.error)(verdict)
