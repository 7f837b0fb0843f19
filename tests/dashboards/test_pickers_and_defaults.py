"""Pickers offer only values the API accepts, and empty fields show the data's real window.

The explorer's model picker splits a multi-model tier label (``A100|H100|L40S``, which the API
refuses with 400) into its models; the filter bar's empty since/until show the stored range;
"Verify a window" offers the stored clusters and the counterfactual run the stored policy
versions; the counterfactual answer is a table in words, not nested JSON.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest

from dashboards.client import StatsTable
from dashboards.counterfactual import counterfactual_rows, side_text
from dashboards.explorer import why_models
from dashboards.extent import extent_of
from tests.dashboards import factory
from tests.dashboards.test_pages import open_page

HOUR = "%Y-%m-%dT%H:00:00Z"


def _stored_range() -> tuple[str, str]:
    times = sorted(datetime.strptime(r.time, "%Y-%m-%dT%H:%M:%SZ") for r in factory.records())
    return times[0].strftime(HOUR), (times[-1] + timedelta(hours=1)).strftime(HOUR)


@pytest.mark.parametrize(("preference", "tiers", "allocated", "offered", "track"), [
    pytest.param(["H100", "A100"], ["H100", "A100|H100|L40S"], "L40S", ["H100", "A100", "L40S"], "dra",
                 id="tier-label-split"),
    pytest.param([], ["A100|L4"], "", ["A100", "L4"], "dra", id="no-preference"),
    pytest.param(["H100"], ["H100"], "H100", ["H100"], "dra", id="one-model"),
    pytest.param(["H100"], ["", "|A100|"], "", ["H100", "A100"], "dra", id="empty-parts-dropped"),
    # as the engine writes a device-plugin record: its preference is the resource it asks for
    pytest.param(["nvidia.com/gpu"], ["any"], "H100", ["H100"], "device-plugin",
                 id="device-plugin-offers-its-model-not-any-nor-its-resource"),
    pytest.param(["nvidia.com/gpu"], ["any"], "", [], "device-plugin", id="device-plugin-pending-offers-nothing"),
    pytest.param(["H100"], ["none"], "", ["H100"], "dra", id="tier-of-no-model-offers-nothing"),
])
def test_the_model_picker_offers_single_models_only(preference: list[str], tiers: list[str], allocated: str,
                                                    offered: list[str], track: str) -> None:
    base = factory.records()[0]
    record = dataclasses.replace(
        base, preference=preference, allocated_model=allocated, track=track,
        tiers=[dataclasses.replace(base.tiers[0], index=i, model=m) for i, m in enumerate(tiers)])
    assert why_models(record) == offered


def test_the_extent_is_the_clusters_versions_and_hours_of_the_rows() -> None:
    rows = [{"cluster": "b", "policy_version": "v2", "hour": "2026-11-02T05:00:00Z"},
            {"cluster": "a", "policy_version": "v1", "hour": "2026-11-02 00:00:00"},
            {"cluster": "a", "policy_version": "", "hour": "2026-11-02T23:00:00+00:00"}]
    extent = extent_of(StatsTable(rows=rows, group_by=["cluster", "policy_version", "hour"]))
    assert (extent.clusters, extent.policy_versions) == (("a", "b"), ("v1", "v2"))
    assert (extent.since, extent.until) == ("2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z")
    assert extent_of(StatsTable(rows=[], group_by=[])).since == ""


WINDOW = {"since": "2026-11-02T00:00:00.000Z", "until": "2026-11-02T01:59:35.222Z"}


@pytest.mark.parametrize(("hours", "since", "until"), [
    pytest.param(["2026-11-02T00:00:00Z", "2026-11-02T01:00:00Z"], WINDOW["since"], WINDOW["until"],
                 id="decisions-inside-the-window"),
    pytest.param(["2026-11-02T01:00:00Z", "2026-11-02T03:00:00Z"], "2026-11-02T01:00:00Z", "2026-11-02T04:00:00Z",
                 id="decisions-after-the-last-event"),
])
def test_the_extent_is_the_window_of_the_pod_figures_when_it_holds_every_decision(hours: list[str], since: str,
                                                                                   until: str) -> None:
    """Empty fields give the API's default window; the placeholders show exactly that window, so
    typing them in gives the same figures, unless decisions lie outside it."""
    rows = [{"cluster": "a", "policy_version": "v1", "hour": h} for h in hours]
    extent = extent_of(StatsTable(rows=rows, group_by=["cluster", "policy_version", "hour"], summary={"window": WINDOW}))
    assert (extent.clusters, extent.since, extent.until) == (("a",), since, until)


@pytest.mark.parametrize(("side", "text"), [
    pytest.param({"outcome": "allocated", "allocated_model": "A100", "node": "a100-7", "devices": ["g0", "g1"]},
                 "A100 on a100-7 (2 devices)", id="allocated"),
    pytest.param({"outcome": "allocated", "allocated_model": "H100", "node": "h-1", "devices": ["g0"]},
                 "H100 on h-1 (1 device)", id="one-device"),
    pytest.param({"outcome": "unschedulable", "allocated_model": "", "node": "", "devices": []}, "unschedulable",
                 id="not-allocated"),
    pytest.param(None, "no decision", id="no-counterpart"),
])
def test_a_counterfactual_side_reads_as_words(side: dict | None, text: str) -> None:
    assert side_text(side) == text


def test_counterfactual_rows_put_changed_decisions_first() -> None:
    same = {"outcome": "allocated", "allocated_model": "H100", "node": "n1", "devices": ["g0"]}
    runs = [{"pod": "a/p1", "attempt": 1, "match": True, "recorded": same, "counterfactual": same},
            {"pod": "a/p2", "attempt": 2, "match": False, "recorded": same,
             "counterfactual": {**same, "allocated_model": "", "outcome": "pending"}}]
    assert counterfactual_rows(runs) == [
        {"pod": "a/p2", "attempt": "2", "recorded": "H100 on n1 (1 device)", "under the other policy": "pending",
         "changed": "yes"},
        {"pod": "a/p1", "attempt": "1", "recorded": "H100 on n1 (1 device)",
         "under the other policy": "H100 on n1 (1 device)", "changed": "no"},
    ]


def test_empty_window_fields_show_the_stored_range(api_env: str) -> None:
    at = open_page("1_overview.py")
    since, until = _stored_range()
    assert (at.text_input(key="f_since").placeholder, at.text_input(key="f_until").placeholder) == (since, until)
    assert at.text_input(key="f_cluster").placeholder == f"all clusters ({factory.CLUSTER})"


def test_verify_and_counterfactual_offer_the_stored_clusters_and_versions(api_env: str) -> None:
    at = open_page("6_replay.py")
    (cluster_box,) = [s for s in at.selectbox if s.label == "Cluster to verify"]
    assert list(cluster_box.options) == [factory.CLUSTER]
    versions = sorted({r.policy_version for r in factory.records()})
    assert list(at.selectbox(key="cf_policy").options) == versions
    since, until = _stored_range()
    assert any(f"from {since} to {until}" in c.value for c in at.caption)
    assert not at.error and not at.warning


def test_the_decision_picker_names_the_cluster_of_each_decision() -> None:
    from dashboards.explorer import label_of

    record = factory.records()[0]
    other = dataclasses.replace(record, cluster="lab (eu)")
    assert label_of(record).split(" · ")[1] == f"{record.cluster}: {record.namespace}/{record.pod}"
    assert label_of(other).split(" · ")[1] == f"lab (eu): {record.namespace}/{record.pod}"
