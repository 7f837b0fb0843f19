"""The Plotly figures carry exactly the numbers given to them, arranged as each chart promises."""

from __future__ import annotations

import pytest

from audit.records import TierSummary
from dashboards import figures


def test_tier_waterfall_goes_from_considered_through_each_rejection_to_selected() -> None:
    tier = TierSummary(index=1, request="gpu-a100", model="A100", considered=8,
                       reasons={"selected": 1, "in_use": 3, "unhealthy": 3, "not_reached": 1})
    trace = figures.tier_waterfall(tier).data[0]
    assert list(trace.x) == ["considered", "in_use", "unhealthy", "not_reached", "selected"]
    assert list(trace.measure) == ["absolute", "relative", "relative", "relative", "total"]
    assert list(trace.y) == [8, -3, -3, -1, 1]
    assert 8 - 3 - 3 - 1 == 1  # the running total lands on the selected count


def test_sankey_links_preferred_models_to_what_was_allocated_and_pending() -> None:
    rows = [
        {"preferred": "H100", "allocated": "H100", "decisions": 4},
        {"preferred": "H100", "allocated": "A100", "decisions": 2},
        {"preferred": "H100", "allocated": "", "decisions": 3},
        {"preferred": "A100", "allocated": "A100", "decisions": 1},
    ]
    trace = figures.sankey(rows, "preferred", "allocated", "decisions", "t").data[0]
    labels = list(trace.node.label)
    assert labels == ["prefers A100", "prefers H100", "A100", "H100", "pending"]
    links = sorted(zip((labels[i] for i in trace.link.source), (labels[i] for i in trace.link.target), trace.link.value, strict=True))
    assert links == [
        ("prefers A100", "A100", 1),
        ("prefers H100", "A100", 2),
        ("prefers H100", "H100", 4),
        ("prefers H100", "pending", 3),
    ]


def test_stacked_area_fills_missing_hours_with_zero_and_sums_duplicates() -> None:
    rows = [
        {"hour": "09", "pair": "H100 → A100", "rate": 0.25},
        {"hour": "08", "pair": "H100 → A100", "rate": 0.5},
        {"hour": "09", "pair": "H100 → L40S", "rate": 0.25},
        {"hour": "09", "pair": "H100 → L40S", "rate": 0.25},
    ]
    fig = figures.stacked_area(rows, "hour", "pair", "rate", "t")
    by_name = {t.name: (list(t.x), list(t.y)) for t in fig.data}
    assert by_name == {"H100 → A100": (["08", "09"], [0.5, 0.25]), "H100 → L40S": (["08", "09"], [0.0, 0.5])}
    assert all(t.stackgroup == "one" for t in fig.data)


@pytest.mark.parametrize("orientation", ["v", "h"], ids=["vertical", "horizontal"])
def test_bar_keeps_category_order(orientation: str) -> None:
    trace = figures.bar(["in_use", "unhealthy"], [6, 2], "t", orientation=orientation).data[0]
    cats, vals = (trace.x, trace.y) if orientation == "v" else (trace.y, trace.x)
    assert (list(cats), list(vals)) == (["in_use", "unhealthy"], [6, 2])
