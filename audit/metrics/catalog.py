"""Every metric's definition in one list, and the reference page rendered from it.

``docs/metrics.md`` is this module's ``render_reference()`` output; a test fails when the
committed page differs (regenerate with ``python -m audit.metrics.catalog > docs/metrics.md``).
"""

from __future__ import annotations

import sys

from audit.metrics import (
    breakdown,
    busy,
    cohorts,
    decision_rows,
    fairness,
    fallback,
    health,
    lifecycle,
    ranks,
    regret,
    starving,
    usage,
    waits,
    whatif,
)
from audit.metrics.definition import Definition

FAMILIES = (waits, starving, usage, fairness, fallback, health, breakdown, busy, whatif, cohorts, decision_rows)
DEFINITIONS: tuple[Definition, ...] = tuple(d for m in FAMILIES for d in m.DEFINITIONS)

_HEADER = """# Metrics reference

Generated from `audit/metrics/` by `python -m audit.metrics.catalog > docs/metrics.md`; do not edit
by hand. Every figure the API (`/v1/stats/fairness`, `/v1/stats/fallback`, `/v1/stats/health`,
the `deltas` of a counterfactual `/v1/replay`), the dashboards, the `simulate` summary, the
`replay --policy` table and the `demo` log show is computed by the reference function named
here, over the pod lifecycle (one row per pod, folded from the world event log by the engine's
own world fold: creation, first bind or failure, the subrequest each request got, the devices
and their models, release) and a window [since, until). The exceptions are the cohort rows of
`/v1/stats/migration` (`cohorts` below) and the rows of `/v1/stats/fallback`, `/v1/stats/overview`
and `/v1/stats/fairness` (`decision_rows` below), which count decision records, each attempt of a
pod, as the store holds them: a row's `fallback_decisions` is not the per-pod `fallbacks`.

The pod lifecycle is a cluster's: an API answer has pod figures only for one cluster with world
events (named with `cluster=`, or the store's only one). Without them every per-pod count, rate
and index of the answer is null, not 0, and its `pod_figures` says why. A window that holds no
time of the cluster's event log (it starts after its last event, or ends at or before its first)
has no pod figures either, rather than the world of the log's end stretched over it:
`/v1/stats/overview`, `fallback`, `fairness` and `health` give them as null with `pod_figures`
naming the window and the log's span (a what-if over such a window is refused), and count the
decision records in it as in any window. A window the log reaches, even one running past its end,
has its figures.

Percentiles are nearest rank everywhere: the ⌈q·n⌉-th smallest of the n values.

In SQL: the store keeps the pod lifecycle as the table `pods` (one row per pod incarnation, the
fields below; a row is rewritten as the pod changes, so read it with `FINAL`) and the series
`pod_policies`, `pod_capacity` and `unhealthy_spans`, current as events are stored. The query
of every per-pod figure, each beside the reference function it implements, is in
`audit/store/metric_sql.py`; they can be run as they stand on any ClickHouse holding the store
(a Grafana panel, say) with their parameters bound, and a property test holds their results exactly equal to the reference
functions'.
"""


def _doc(module: object) -> str:
    text = (getattr(module, "__doc__", "") or "").strip()
    return "\n".join(line.rstrip() for line in text.splitlines())


def render_reference() -> str:
    out = [_HEADER]
    for m in (lifecycle, ranks, regret):
        out.append(f"## {m.__name__.rsplit('.', 1)[-1]}\n\n{_doc(m)}\n")
    for m in FAMILIES:
        title = m.__name__.rsplit(".", 1)[-1]
        out.append(f"## {title}\n\n{_doc(m)}\n")
        out.append("| metric | counts | unit | population | rule | reference |")
        out.append("|---|---|---|---|---|---|")
        for d in m.DEFINITIONS:
            cells = (f"`{d.name}`", d.counts, d.unit, d.population, d.rule, f"`{d.reference}`")
            out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(render_reference())
