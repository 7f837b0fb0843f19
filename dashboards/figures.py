"""Plotly figures built from the API's already-aggregated rows; no Streamlit in here.

Each builder takes plain rows (dicts) and column names and returns a ``go.Figure``, so the
shapes can be checked in tests without a browser. Builders only arrange numbers the API
computed; the one derived quantity is a ratio or a sum over a handful of rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from audit.records import TierSummary

PENDING = "pending"
NO_PREFERENCE = "no preference"


def _num(value: Any) -> float:
    return 0.0 if value is None or value == "" else float(value)


def _layout(fig: go.Figure, title: str, **kw: Any) -> go.Figure:
    fig.update_layout(title=title, margin={"l": 10, "r": 10, "t": 40, "b": 10}, height=340, **kw)
    return fig


def stacked_area(rows: Sequence[dict[str, Any]], x: str, series: str, y: str, title: str) -> go.Figure:
    """One filled trace per value of ``series``, stacked, x sorted; missing points count as zero."""
    xs = sorted({str(r[x]) for r in rows})
    names = sorted({str(r[series]) for r in rows})
    values: dict[tuple[str, str], float] = {}
    for r in rows:
        key = (str(r[series]), str(r[x]))
        values[key] = values.get(key, 0.0) + _num(r[y])
    fig = go.Figure(
        [go.Scatter(x=xs, y=[values.get((n, t), 0.0) for t in xs], name=n, stackgroup="one", mode="lines") for n in names]
    )
    return _layout(fig, title)


def sankey(rows: Sequence[dict[str, Any]], source: str, target: str, value: str, title: str) -> go.Figure:
    """Flows from ``source`` values (left) to ``target`` values (right); an empty target reads as pending."""
    flows: dict[tuple[str, str], float] = {}
    for r in rows:
        # pods whose claims name no preferred model (one request, any GPU) have an empty source
        key = (f"prefers {r[source]}" if r[source] else NO_PREFERENCE, str(r[target] or PENDING))
        flows[key] = flows.get(key, 0.0) + _num(r[value])
    labels = sorted({s for s, _ in flows}) + sorted({t for _, t in flows})
    index = {label: i for i, label in enumerate(labels)}
    links = sorted(flows.items())
    fig = go.Figure(
        go.Sankey(
            node={"label": labels, "pad": 12},
            link={
                "source": [index[s] for (s, _), _ in links],
                "target": [index[t] for (_, t), _ in links],
                "value": [v for _, v in links],
            },
        )
    )
    return _layout(fig, title)


def bar(
    categories: Sequence[str], values: Sequence[float], title: str, orientation: str = "v", name: str = ""
) -> go.Figure:
    if orientation == "h":
        trace = go.Bar(x=list(values), y=list(categories), orientation="h", name=name)
    else:
        trace = go.Bar(x=list(categories), y=list(values), name=name)
    return _layout(go.Figure(trace), title)


def grouped_bars(
    categories: Sequence[str], series: dict[str, Sequence[float | None]], title: str, barmode: str = "group"
) -> go.Figure:
    """One bar per category and series; a None value leaves a gap (unknown, not zero)."""
    fig = go.Figure([go.Bar(x=list(categories), y=list(vals), name=name) for name, vals in series.items()])
    return _layout(fig, title, barmode=barmode)


def lines(xs: Sequence[str], series: dict[str, Sequence[float | None]], title: str, y_range: Any = None) -> go.Figure:
    fig = go.Figure([go.Scatter(x=list(xs), y=list(vals), name=name, mode="lines+markers") for name, vals in series.items()])
    if y_range is not None:
        fig.update_yaxes(range=y_range)
    return _layout(fig, title)


def tier_waterfall(tier: TierSummary) -> go.Figure:
    """Devices considered in one tier, minus each rejection reason, ending at the devices selected."""
    rejected = sorted(((code, n) for code, n in tier.reasons.items() if code != "selected" and n), key=lambda cn: (-cn[1], cn[0]))
    selected = tier.reasons.get("selected", 0)
    labels = ["considered", *[code for code, _ in rejected], "selected"]
    measures = ["absolute", *["relative"] * len(rejected), "total"]
    values = [tier.considered, *[-n for _, n in rejected], selected]
    # Every bar keeps its count: drawn outside, never shrunk or hidden for lack of room, and not
    # clipped by the plot area (a one-device bar next to a thousand-device one is still labelled).
    fig = go.Figure(go.Waterfall(x=labels, y=values, measure=measures, textposition="outside", cliponaxis=False,
                                 constraintext="none", text=[str(abs(v)) for v in values]))
    fig.update_yaxes(range=[0, max(tier.considered, 1) * 1.15])
    fig = _layout(fig, f"Tier {tier.index} — {tier.model or tier.request}: {tier.considered} devices considered")
    fig.update_layout(uniformtext={"mode": False})
    return fig
