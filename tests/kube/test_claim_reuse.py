"""A standalone ResourceClaim (created directly, not from a template) serves one pod after
another: each of its allocations is one decision with an id of its own, however many pods share
it, through one watcher run or across restarts, into the store on chDB with nothing quarantined.
A claim made from a template keeps the id it always had.

Each case is a list of phases of changes, made one at a time while a watcher runs; with a restart,
each phase after the first is made while no watcher runs, and a new watcher (on a new sink of the
same store, as a restarted process) lists where it left the cluster. A last restart, with nothing
changed, must write nothing."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from audit.records import DecisionRecord, decision_id
from ingest.kube.observe import generated_for_pod
from ingest.sinks import StoreSink
from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import Target, apply_changes, load_docs, watch_once
from tests.kube.test_resume import RUNNING, TRAIN_CLAIM

NS = "team-a"
CLAIM = "shared-gpu"
CLAIM_UID = "7d1c2b9e-0002-4c55-9a51-1f0e5d3a0002"
UIDS = {"a": "5a0e6f41-000a-4a8d-8f1e-6b2b7c9d000a", "b": "5a0e6f41-000b-4a8d-8f1e-6b2b7c9d000b",
        "c": "5a0e6f41-000c-4a8d-8f1e-6b2b7c9d000c"}


def claim(*reserved: str, device: str = "gpu-0") -> dict[str, Any]:
    """The standalone claim, allocated on node-a and reserved for these pods in this order, or not
    allocated when none is named."""
    obj: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": CLAIM, "namespace": NS, "uid": CLAIM_UID, "creationTimestamp": "2026-11-29T10:00:00Z"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    }
    if reserved:
        obj["status"] = {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-a", "device": device}]},
                "nodeSelector": {"nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]},
            },
            "reservedFor": [{"resource": "pods", "name": name, "uid": UIDS[name]} for name in reserved],
        }
    return obj


def pod(name: str, phase: str = "Pending") -> dict[str, Any]:
    """A pod using the standalone claim: pending (not bound), or bound to node-a in ``phase``."""
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "uid": UIDS[name], "creationTimestamp": "2026-11-29T10:00:00Z"},
        "spec": {"containers": [{"name": "main", "image": "registry.example.com/train:1.4.2",
                                 "resources": {"claims": [{"name": "gpu"}]}}],
                 "resourceClaims": [{"name": "gpu", "resourceClaimName": CLAIM}]},
        "status": {"phase": phase},
    }
    if phase != "Pending":
        obj["spec"]["nodeName"] = "node-a"
        obj["status"]["conditions"] = [{"type": "PodScheduled", "status": "True",
                                        "lastTransitionTime": "2026-11-29T10:00:04Z"}]
    return obj


def gone(name: str) -> dict[str, Any]:
    return {"delete": {"kind": "Pod", "namespace": NS, "name": name}}


A_RUNS = [claim(), pod("a"), claim("a"), pod("a", "Running")]
A_ENDS = [pod("a", "Succeeded"), claim()]  # its reservation removed, the claim is deallocated
A_GOES = [gone("a")]
B_RUNS = [pod("b"), claim("b"), pod("b", "Running")]
A_AND_B_RUN = [claim(), pod("a"), pod("b"), claim("a"), pod("a", "Running"), claim("a", "b"), pod("b", "Running")]
A_LEAVES = [pod("a", "Succeeded"), claim("b"), gone("a")]
C_JOINS = [pod("c"), claim("b", "c"), pod("c", "Running")]
# b joins a's allocation and is not bound yet when a leaves
A_RUNS_B_WAITS = [claim(), pod("a"), pod("b"), claim("a"), pod("a", "Running"), claim("a", "b")]
B_BINDS = [pod("b", "Running")]
# the scheduler gives a's first allocation up before binding and allocates again for a
A_REALLOCATED = [claim(), pod("a"), claim("a"), claim(), claim("a", device="gpu-1"), pod("a", "Running")]

CASES = {
    # (phases, restart between phases, the records written: pod, pod of the id, device)
    "reused_by_a_then_b_in_one_run": ([A_RUNS, A_ENDS, A_GOES, B_RUNS], False, [("a", "a", "gpu-0"), ("b", "b", "gpu-0")]),
    "reused_by_a_then_b_restarting_between": ([A_RUNS, A_ENDS + A_GOES, B_RUNS], True,
                                              [("a", "a", "gpu-0"), ("b", "b", "gpu-0")]),
    # the list after the restart shows the claim allocated for b where it was for a
    "reused_by_b_while_no_watcher_ran": ([A_RUNS, A_ENDS + B_RUNS], True, [("a", "a", "gpu-0"), ("b", "b", "gpu-0")]),
    "shared_by_a_and_b_then_c_joins_in_one_run": ([A_AND_B_RUN, A_LEAVES, C_JOINS], False, [("a", "a", "gpu-0")]),
    "shared_by_a_and_b_then_c_joins_restarting_between": ([A_AND_B_RUN, A_LEAVES, C_JOINS], True, [("a", "a", "gpu-0")]),
    # the restarted watcher finds the allocation recorded for a, which it no longer sees
    "shared_by_a_and_b_leaving_before_b_binds_restarting_between": ([A_RUNS_B_WAITS, A_LEAVES, B_BINDS], True,
                                                                    [("a", "a", "gpu-0")]),
    "reallocated_for_the_same_pod_before_binding": ([A_REALLOCATED], False, [("a", "a", "gpu-1")]),
}


@pytest.fixture(scope="module")
def chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("claim-reuse-store")


@pytest.fixture
def target(chdb_dir: Path, tmp_path: Path) -> Target:
    """StoreSinks of one store; every test names a cluster of its own."""
    return lambda: StoreSink(f"chdb://{chdb_dir}/db", spool_dir=str(tmp_path / "spool"), max_delay=0.05)


def _started(server: FakeApiServer, changes: list[dict[str, Any]]) -> None:
    apply_changes(server, load_docs("cluster.yaml"))
    server.release_all()
    apply_changes(server, changes)


@pytest.mark.parametrize(("phases", "restart", "expected"), list(CASES.values()), ids=list(CASES))
def test_each_allocation_of_a_standalone_claim_is_one_decision(
        request: pytest.FixtureRequest, target: Target, phases: list[list[dict[str, Any]]], restart: bool,
        expected: list[tuple[str, str, str]]) -> None:
    cluster = f"reuse-{request.node.callspec.id}"
    with FakeApiServer() as server:
        _started(server, [])
        if restart:
            runs = [watch_once(server, target, cluster, while_running=phases[0])]
            for changes in phases[1:]:
                apply_changes(server, changes)
                server.release_all()  # the restarted watcher's list shows where they left the cluster
                runs.append(watch_once(server, target, cluster))
        else:
            runs = [watch_once(server, target, cluster, while_running=[c for phase in phases for c in phase])]
        runs.append(watch_once(server, target, cluster))  # and a restart with nothing changed
    written = [r for run in runs for r in run.records]
    assert [(r.pod, r.decision_id, [d.device for d in r.devices]) for r in written] == [
        (name, decision_id(cluster, f"{CLAIM_UID}/{UIDS[key]}", 0), [f"gpu.nvidia.com/node-a/{device}"])
        for name, key, device in expected]
    assert ([run.quarantined for run in runs], runs[-1].events, runs[-1].records) == ([0] * len(runs), [], [])


def test_a_template_claims_allocation_keeps_its_id(target: Target) -> None:
    cluster = "reuse-template"
    with FakeApiServer() as server:
        _started(server, RUNNING)
        first = watch_once(server, target, cluster)
    (record,) = [r for r in first.records if r.pod == "train-0" and r.outcome == "allocated"]
    # decision_id(cluster, TRAIN_CLAIM, 0), as stored before standalone claims had ids of their own
    assert (record.claim_uids, record.decision_id) == ([TRAIN_CLAIM], "d07d0caf-05e4-2356-238d-f9bbca89fb7e")


OWNER = {"apiVersion": "v1", "kind": "Pod", "name": "a", "uid": UIDS["a"]}
MADE_FOR_A_POD = {
    # metadata of a claim -> whether the resourceclaim controller made it from a template for a pod
    "annotated_and_owned": ({"annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                             "ownerReferences": [{**OWNER, "controller": True, "blockOwnerDeletion": True}]}, True),
    "owned_only_as_before_kubernetes_1_28": ({"ownerReferences": [{**OWNER, "controller": True}]}, True),
    "owned_by_a_pod_that_is_not_its_controller": ({"ownerReferences": [OWNER]}, False),
    "owned_by_another_kind": ({"ownerReferences": [{**OWNER, "kind": "Job", "controller": True}]}, False),
    "standalone": ({}, False),
}


@pytest.mark.parametrize(("metadata", "expected"), list(MADE_FOR_A_POD.values()), ids=list(MADE_FOR_A_POD))
def test_a_claim_made_for_a_pod_is_told_from_a_standalone_one(metadata: dict[str, Any], expected: bool) -> None:
    obj = claim()
    obj["metadata"].update(metadata)
    assert generated_for_pod(obj) is expected


class FormerIds:
    """A StoreSink that stores what the watcher stored before standalone claims had ids of their
    own: an allocation keyed on its first claim's uid alone."""

    def __init__(self, sink: StoreSink) -> None:
        self.sink = sink

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sink, name)

    def write_records(self, records: list[DecisionRecord]) -> None:
        former = []
        for r in records:
            r = copy.copy(r)
            r.decision_id = decision_id(r.cluster, r.claim_uids[0], 0)
            former.append(r.seal())
        self.sink.write_records(former)


def test_a_standalone_claim_recorded_under_its_former_id_is_not_recorded_again(target: Target) -> None:
    cluster = "reuse-upgrade"
    with FakeApiServer() as server:
        _started(server, [])
        before = watch_once(server, lambda: FormerIds(target()), cluster, while_running=A_AND_B_RUN)
        after = watch_once(server, target, cluster)  # the upgraded watcher
        apply_changes(server, A_LEAVES + C_JOINS)
        server.release_all()
        later = watch_once(server, target, cluster)
    # the sink was handed the record under its new id and stored it under the former one
    assert [(r.pod, r.decision_id) for r in before.records] == [("a", decision_id(cluster, f"{CLAIM_UID}/{UIDS['a']}", 0))]
    assert (after.records, after.quarantined, later.records, later.quarantined) == ([], 0, [], 0)
