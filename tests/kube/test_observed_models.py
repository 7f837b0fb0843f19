"""The watcher's records name models as the rest of ClaimTrail does: a DRA record prefers the
engine's tier labels and gets the policy's model of its devices, a device-plugin record the policy's
model of its node's GPU product, so a watched cluster's records agree with the pod lifecycle folded
from its events, DRA and device-plugin pods of one model meet in one migration stratum, and ``why``
finds the model a record's tiers ask for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from audit.explain.record import explain_record
from audit.metrics import fold_lifecycle
from audit.metrics.lifecycle import PodLife
from audit.migration import asked_from_lifecycle, build_cohorts, report
from audit.records import DecisionRecord
from audit.thresholds_file import shipped
from ingest.sinks import FileSink
from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import Written, load_docs, populate, watch_once

CLUSTER = "two-tracks"
HOUR = "2026-11-29T10Z"


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Written:
    out = tmp_path_factory.mktemp("two-tracks") / "out.jsonl"
    with FakeApiServer() as server:
        populate(server, changes=None)
        return watch_once(server, lambda: FileSink(str(Path(out))), CLUSTER,
                          while_running=load_docs("changes-two-tracks.yaml"), check_allocations=True)


def _records(watched: Written) -> dict[str, DecisionRecord]:
    assert watched.quarantined == 0
    return {r.pod: r for r in watched.records}


def _lives(watched: Written) -> dict[str, PodLife]:
    return {life.pod: life for life in fold_lifecycle(watched.events, CLUSTER).pods}


NAMED = {
    # pod -> track, preference, preferred model, allocated model, its devices' models
    "train-1": ("dra", ["H100", "A100"], "H100", "H100", ["H100"]),
    "infer-1": ("dra", ["A100"], "A100", "A100", ["A100"]),  # a plain request: its one tier
    # as the engine's device-plugin records: the resource is the one "tier", naming no model
    "legacy-h100": ("device-plugin", ["nvidia.com/gpu"], "", "H100", ["H100"]),
    "legacy-a100": ("device-plugin", ["nvidia.com/gpu"], "", "A100", ["A100"]),
}


@pytest.mark.parametrize(("pod", "expected"), list(NAMED.items()), ids=list(NAMED))
def test_observed_records_name_the_policys_models(watched: Written, pod: str, expected: tuple[Any, ...]) -> None:
    r = _records(watched)[pod]
    assert (r.track, r.preference, r.preferred_model, r.allocated_model, [d.model for d in r.devices]) == expected


@pytest.mark.parametrize("pod", list(NAMED))
def test_observed_records_name_models_as_the_pod_lifecycle_does(watched: Written, pod: str) -> None:
    r, life = _records(watched)[pod], _lives(watched)[pod]
    # what the pod figures count by model: a DRA pod's first choice, a device-plugin pod's ask, and what it got
    assert (r.preferred_model or life.asked, r.allocated_model) == (life.preferred or life.asked, life.allocated)


def test_dra_and_device_plugin_pods_of_one_model_share_a_migration_stratum(watched: Written) -> None:
    records = list(_records(watched).values())
    asked = asked_from_lifecycle(fold_lifecycle(watched.events, CLUSTER).pods)
    strata = {str(key): {s: m["success_rate"].n for s, m in cohort.strata().items()}
              for key, cohort in build_cohorts(records, asked=asked).items()}
    both = {("A100", "team-a", HOUR): 1, ("H100", "team-a", HOUR): 1}
    assert strata == {"device-plugin/device-plugin": both, "dra/v2": both}
    assert report(records, shipped(), asked=asked).matching.to_dict() == {
        "stratified_by": ["model", "tenant", "hour"], "strata": 2,
        "matched_pods": {"baseline": 2, "candidate": 2}, "unmatched_pods": {"baseline": 0, "candidate": 0}}


WHY = {
    # (pod, model) -> skipped, blocker codes, reason counts (from the allocator's re-run on the node)
    "the_model_it_got": ("train-1", "H100", False, [], {"selected": 1, "available": 1}),
    "its_second_choice": ("train-1", "A100", True, [], {"available": 2}),
    "a_model_it_did_not_ask_for": ("infer-1", "H100", True, ["not_requested"], {}),
}


@pytest.mark.parametrize(("pod", "model", "skipped", "codes", "reasons"), list(WHY.values()), ids=list(WHY))
def test_why_a_model_answers_from_the_observed_records_tier_of_that_model(
        watched: Written, pod: str, model: str, skipped: bool, codes: list[str], reasons: dict[str, int]) -> None:
    answer = explain_record(_records(watched)[pod], model)
    assert (answer.skipped, [b["code"] for b in answer.blockers], answer.reasons) == (skipped, codes, reasons)
