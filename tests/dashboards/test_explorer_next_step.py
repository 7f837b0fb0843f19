"""The Decision explorer's why panel for a pending pod: what it would get if scheduled now, and
who holds each in-use device.

A server of its own: the factory world plus a pending pod team-alpha/train-03 (the same claim as
train-01, not yet allocated) after it, and one unschedulable decision for that pod at the newest
seq, so the per-device answer can be replayed and the next step computed on the same world.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from streamlit.testing.v1 import AppTest

from audit.events import WorldEvent
from tests.dashboards import factory
from tests.dashboards.conftest import REPO, post_jsonl, start_api, stop

APP = str(REPO / "dashboards" / "app.py")


def _world() -> list[WorldEvent]:
    items = yaml.safe_load(factory.CLUSTER_DUMP.read_text())["items"]
    pod = copy.deepcopy(next(o for o in items if o["kind"] == "Pod" and o["metadata"]["name"] == "train-01"))
    claim = copy.deepcopy(next(o for o in items if o["kind"] == "ResourceClaim"
                               and o["metadata"]["name"] == "train-01-gpu"))
    pod["metadata"].update(name="train-03", uid="uid-pod-03")
    pod["spec"].pop("nodeName")
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "train-03-gpu"}]
    pod["status"] = {"phase": "Pending"}
    claim["metadata"].update(name="train-03-gpu", uid="uid-claim-03")
    claim.pop("status")
    events = factory.world_events()
    for obj in (claim, pod):
        events.append(WorldEvent(cluster=factory.CLUSTER, seq=len(events), time=f"{factory.DAY}T08:00:00Z",
                                 type="upsert", object_kind=obj["kind"], namespace=obj["metadata"]["namespace"],
                                 name=obj["metadata"]["name"], payload=obj))
    return events


@pytest.fixture(scope="module")
def pending_api(tmp_path_factory: pytest.TempPathFactory, monkeypatch_module: pytest.MonkeyPatch) -> Iterator[str]:
    root: Path = tmp_path_factory.mktemp("api-next")
    base, proc = start_api(root, root / "serve.log")
    try:
        events = _world()
        post_jsonl(base, "events", [e.to_dict() for e in events])
        pending = factory.build(3, factory.SPECS[3])
        record = dataclasses.replace(pending, seq=events[-1].seq).seal()
        post_jsonl(base, "records", [record.to_dict()])
        monkeypatch_module.setenv("CLAIMTRAIL_API", base)
        monkeypatch_module.delenv("CLAIMTRAIL_TOKEN", raising=False)
        yield base
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def test_explorer_says_what_a_pending_pod_would_get_now(pending_api: str) -> None:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page("panels/5_explorer.py").run()
    at.text_input(key="ex_query").input("team-alpha/train-03").run()
    assert not at.exception, [e.value for e in at.exception]
    assert [e.value for e in at.error] == []
    assert [i.value for i in at.info] == [
        "If scheduled now (the world at seq 18): A100 gpu-1 on node a100-node-0 (tier 1)."]
    devices = next(f.value for f in at.dataframe if "device" in f.value.columns)
    held = [d for d, r in zip(devices["detail"], devices["reason"], strict=True) if r == "in_use"]
    assert held and all(d.startswith("by=pod team-beta/serve-") for d in held), held
