"""The Plotly figures carry exactly the numbers given to them, arranged as each chart promises."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


ROWS = st.lists(
    st.fixed_dictionaries({
        "hour": st.sampled_from(["08", "09", "10"]),
        "preferred": st.sampled_from(["H100", "A100"]),
        "allocated": st.sampled_from(["H100", "A100", "L40S", ""]),
        "decisions": st.integers(0, 50),
    }),
    max_size=20,
)


@settings(max_examples=50, deadline=None)
@given(ROWS)
def test_sankey_carries_every_decision_exactly_once(rows: list[dict]) -> None:
    trace = figures.sankey(rows, "preferred", "allocated", "decisions", "t").data[0]
    assert sum(trace.link.value) == sum(r["decisions"] for r in rows)


@settings(max_examples=50, deadline=None)
@given(ROWS)
def test_stacked_area_sums_to_each_hours_total(rows: list[dict]) -> None:
    fig = figures.stacked_area(rows, "hour", "allocated", "decisions", "t")
    for i, hour in enumerate(sorted({r["hour"] for r in rows})):
        assert sum(t.y[i] for t in fig.data) == sum(r["decisions"] for r in rows if r["hour"] == hour)


@settings(max_examples=50, deadline=None)
@given(st.dictionaries(st.sampled_from(["selected", "in_use", "unhealthy", "not_reached", "node_filtered"]), st.integers(0, 20)))
def test_waterfall_ends_at_the_selected_count_when_reasons_cover_every_device(reasons: dict[str, int]) -> None:
    tier = TierSummary(index=0, request="gpu", model="H100", considered=sum(reasons.values()), reasons=reasons)
    trace = figures.tier_waterfall(tier).data[0]
    assert sum(trace.y[:-1]) == reasons.get("selected", 0)  # the running total the final bar shows
    assert trace.y[-1] == reasons.get("selected", 0)
