"""Chart labels say what they mean: no "prefers ?" node, a count on every waterfall bar, and a
multi-model tier in words."""

from __future__ import annotations

import pytest

from audit.records import TierSummary
from dashboards import figures
from dashboards.view import model_label


def test_decisions_without_a_preferred_model_flow_from_no_preference() -> None:
    rows = [{"preferred": "", "allocated": "L4", "decisions": 5}, {"preferred": "H100", "allocated": "H100", "decisions": 2}]
    trace = figures.sankey(rows, "preferred", "allocated", "decisions", "t").data[0]
    assert list(trace.node.label) == ["no preference", "prefers H100", "H100", "L4"]


def test_every_waterfall_bar_keeps_its_count_however_small() -> None:
    tier = TierSummary(index=0, request="gpu/h100", model="H100", considered=1024,
                       reasons={"in_use": 1000, "unhealthy": 1, "taint_not_tolerated": 22, "selected": 1})
    fig = figures.tier_waterfall(tier)
    trace = fig.data[0]
    assert list(trace.x) == ["considered", "in_use", "taint_not_tolerated", "unhealthy", "selected"]
    assert list(trace.text) == ["1024", "1000", "22", "1", "1"]
    assert (trace.textposition, trace.cliponaxis, trace.constraintext) == ("outside", False, "none")
    assert fig.layout.uniformtext.mode is False
    assert fig.layout.yaxis.range[1] > 1024  # room above the tallest bar for its label


@pytest.mark.parametrize(("model", "label"), [
    pytest.param("H100", "H100", id="one-model"),
    pytest.param("A100|H100|L40S", "the A100, H100 or L40S tier", id="multi-model-tier"),
    pytest.param("A100|L4", "the A100 or L4 tier", id="two-models"),
])
def test_a_multi_model_tier_reads_as_words(model: str, label: str) -> None:
    assert model_label(model) == label
