"""Each observed DRA allocation is re-run through the allocator on its node; a difference is
flagged with the diff, counted in the alert metric and logged."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from audit.records import DecisionRecord
from ingest.kube.agreement import RERUN_MAX_STEPS, AgreementMetrics
from ingest.kube.observe import DecisionObserver
from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import (
    FIXED_TIME,
    CollectingSink,
    apply_changes,
    make_watcher,
    populate,
    run_until_caught_up,
)
from tests.kube.test_resume import RUNNING


def _observe(changes: str | None, max_steps: int | None = RERUN_MAX_STEPS,
             then: list[dict[str, Any]] | None = None) -> tuple[list[DecisionRecord], dict[str, int]]:
    """The records and each counter's total, and each ``allocation_checks`` result's as
    ``allocation_checks/<result>``, after the changes of the file ``changes`` (if any) and then
    those of ``then``."""
    reader = InMemoryMetricReader()
    observer = DecisionObserver(
        "test-cluster", lambda: FIXED_TIME, metrics=AgreementMetrics(MeterProvider(metric_readers=[reader]))
    )
    observer.rerun.max_steps = max_steps
    with FakeApiServer() as server:
        populate(server, changes=changes)
        apply_changes(server, then or [])
        sink = CollectingSink()
        run_until_caught_up(server, make_watcher(server, sink, observer=observer))
    counts: dict[str, int] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                counts[metric.name] = sum(p.value for p in metric.data.data_points)
                for p in metric.data.data_points:
                    if "result" in (p.attributes or {}):
                        counts[f"{metric.name}/{p.attributes['result']}"] = p.value
    return sink.records, counts


def test_scheduler_choice_equal_to_the_allocator_is_recorded_as_agreement() -> None:
    records, counts = _observe("changes.yaml")
    allocated = [r for r in records if r.outcome == "allocated" and r.track == "dra"]
    assert [r.message for r in allocated] == ["allocator agrees"]
    assert counts.get("claimtrail.kube.allocation_checks") == 1
    assert counts.get("claimtrail.kube.allocation_checks/agree") == 1
    assert counts.get("claimtrail.kube.allocation_mismatches", 0) == 0


def test_a_rerun_that_spends_its_step_budget_gives_up_unchecked_not_as_a_mismatch() -> None:
    records, counts = _observe("changes.yaml", max_steps=0)
    allocated = [r for r in records if r.outcome == "allocated" and r.track == "dra"]
    assert [r.message for r in allocated] == [
        "allocator not run: gave up trying to allocate devices after 0 search steps (the step budget)"]
    assert counts.get("claimtrail.kube.allocation_checks/gave_up") == 1
    assert counts.get("claimtrail.kube.allocation_checks/agree", 0) == 0
    assert counts.get("claimtrail.kube.allocation_mismatches", 0) == 0


def test_devices_held_by_other_claims_on_the_node_count_as_in_use() -> None:
    records, counts = _observe("changes-busy-node.yaml")
    messages = {r.pod: r.message for r in records if r.outcome == "allocated"}
    assert messages == {"busy-0": "allocator agrees", "busy-1": "allocator agrees"}
    assert counts.get("claimtrail.kube.allocation_mismatches", 0) == 0


def test_different_device_than_the_allocator_is_flagged_with_the_diff(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="ingest.kube.agreement"):
        records, counts = _observe("changes-mismatch.yaml")
    (record,) = [r for r in records if r.pod == "infer-0"]
    assert record.message == (
        "allocator disagrees: claim infer-0-gpu-p2m7d: scheduler chose gpu/h100=gpu.nvidia.com/node-a/gpu-1; "
        "allocator chooses gpu/h100=gpu.nvidia.com/node-a/gpu-0"
    )
    assert counts["claimtrail.kube.allocation_mismatches"] == 1
    # the re-run's evidence on the bound node: which device our allocator would take, per tier
    assert [(t.request, t.considered, t.reasons) for t in record.tiers] == [
        ("gpu/h100", 2, {"not_reached": 1, "selected": 1}),
        ("gpu/a100", 2, {"not_reached": 2}),
    ]
    assert record.tiers[0].exemplars[0].device == "gpu.nvidia.com/node-a/gpu-0"
    (logged,) = [r for r in caplog.records if r.getMessage() == "observed allocation differs from the allocator"]
    assert logged.node == "node-a" and logged.differences == 1  # type: ignore[attr-defined]
    assert "gpu.nvidia.com/node-a/gpu-0" in logged.tenant_data["diff"][0]  # type: ignore[attr-defined]


def _train_0(phase: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """train-0 as changes.yaml binds it on node-a, in ``phase``, with ``labels``."""
    pod = copy.deepcopy(next(d for d in RUNNING if d.get("kind") == "Pod" and d["metadata"]["name"] == "train-0"
                             and d["spec"].get("nodeName")))
    pod["status"]["phase"] = phase
    pod["metadata"]["labels"] = labels or {}
    return pod


SEEN_AGAIN = {
    # the pod's updates after its allocation was recorded -> re-runs counted
    "not_updated": ([], 1),
    "relabelled_then_succeeded": ([_train_0("Running", {"team": "vision"}), _train_0("Succeeded")], 1),
}


@pytest.mark.parametrize(("updates", "checks"), list(SEEN_AGAIN.values()), ids=list(SEEN_AGAIN))
def test_an_allocation_is_checked_once_however_often_its_pod_is_seen_again(updates: list[dict[str, Any]],
                                                                          checks: int) -> None:
    records, counts = _observe(None, then=RUNNING + updates)
    allocated = [(r.pod, r.message) for r in records if r.outcome == "allocated" and r.track == "dra"]
    assert (allocated, counts.get("claimtrail.kube.allocation_checks")) == ([("train-0", "allocator agrees")], checks)
