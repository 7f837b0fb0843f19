"""``/v1/stats/overview``: per-tenant decision-record totals (the store's ``fallback_stats`` rows, as
``/v1/stats/fallback`` gives them) with the pods pending at the window end and the starving pods,
both from the pod lifecycle (``audit.api.podstats``): null, with ``pod_figures`` saying why, when the
store cannot give pod figures for the request."""

from __future__ import annotations

from typing import Any

from audit.api import podstats, storeport
from audit.api.stats import Ask, StatsKind


def answer(ask: Ask) -> dict[str, Any]:
    rows = storeport.call(ask.db.fallback_stats, ask.folded, ["tenant"], scope_tenant=ask.scope)
    figures = podstats.fairness(ask.db, ask.own, ask.scope)
    # without pod figures (several clusters and none named, or no world events) the pod counts are
    # unknown, not zero; the answer says why, as the other pod-level answers do
    known = "pod_figures" not in figures
    pending = {t["tenant"]: t for t in figures["tenants"]}
    for r in rows:
        p = pending.get(r["tenant"], {})
        r["pending_now"] = p.get("pending_at_end", 0) if known else None
        r["starving_pods"] = p.get("starving_pods", 0) if known else None
    return {"rows": rows} if known else {"rows": rows, "pod_figures": figures["pod_figures"]}


KIND = StatsKind(
    name="overview",
    summary="Per-tenant decision-record totals (decisions, allocated, fallback_decisions, fallback_rate, "
            "unschedulable: every attempt of a pod counts) with the pods pending at the window end and the starving "
            "pods (from the pod lifecycle; docs/metrics.md)",
    groupings=(("tenant",),),
    answer=answer,
)
