"""The API's why for a DRA decision deferred on a tier of several models that the tenant's quotas
closed: the record names each model's quota with its part of the tier's count, and the answer,
from the record and for "if scheduled now", gives each model its own. A server of its own, with
the dump ``cluster-dra-two-quotas.yaml`` under team-a's full A100 and H100 quotas
(``policy-h100-a100-quotas.yaml``) as cluster ``lab-dra-quotas``, and the engine's decision for
team-a/train-2 (two GPUs of either model) on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from audit.records import to_jsonl
from audit.scheduler.engine import decide
from tests.api.conftest import Server, start_server, stop
from tests.scheduler.worlds import dump_events, dump_world

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "explain"
CLUSTER = "lab-dra-quotas"
WORLD = (FIXTURES / "policy-h100-a100-quotas.yaml", FIXTURES / "cluster-dra-two-quotas.yaml", CLUSTER)
_world = dump_world(*WORLD)
DEFERRED = decide(_world, "team-a/train-2", 1, _world.time_ms).record


@pytest.fixture(scope="module")
def quota_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    pytest.importorskip("audit.store.queries", reason="the store is not in this tree yet")
    srv, proc = start_server(tmp_path_factory.mktemp("api-dra-quotas"))
    try:
        events = "".join(json.dumps(e.to_dict()) + "\n" for e in dump_events(*WORLD))
        for path, lines in (("/v1/ingest/events", events), ("/v1/ingest/records", to_jsonl([DEFERRED]))):
            r = srv.post(path, content=lines.encode())
            assert r.status_code == 200, r.text
        yield srv
    finally:
        stop(proc)


_FULL = {"A100": {"model": "A100", "used": 4, "requested": 2, "nominal": 4, "limit": 4, "lendable": 0, "over_quota": 8},
         "H100": {"model": "H100", "used": 2, "requested": 2, "nominal": 2, "limit": 2, "lendable": 0, "over_quota": 4}}
DEFERRED_V4 = "Pod not allocated (deferred, retry class quota) under policy v4."
NOW = ("If scheduled now: nothing fits (tier 0 A100: tenant quota 4/4 A100 used (8 of the GPUs over quota are A100); "
       "tier 0 H100: tenant quota 2/2 H100 used (4 of the GPUs over quota are H100)).")
# model -> the record's answer (was, for H100: the A100 blocker alone, said "tenant quota 4/4 H100 used")
ANSWERS = {
    "A100": "A100 skipped: of 12 A100|H100, 12 over the tenant's quota; tenant quota 4/4 A100 used (8 of the GPUs "
            f"over quota are A100). {DEFERRED_V4}",
    "H100": "H100 skipped: of 12 A100|H100, 12 over the tenant's quota; tenant quota 2/2 H100 used (4 of the GPUs "
            f"over quota are H100). {DEFERRED_V4}",
}


@pytest.mark.parametrize("who", ["admin", "team-a"])
@pytest.mark.parametrize("model", sorted(ANSWERS))
def test_each_model_is_answered_with_its_own_quota_and_part(quota_server: Server, model: str, who: str) -> None:
    body = quota_server.get(f"/v1/decisions/{DEFERRED.decision_id}/why", who=who, model=model).json()
    assert body["reasons"] == {"quota_exhausted": 12}
    assert body["blockers"] == [{"code": "quota_exhausted", "tier": 0, **_FULL[model]}]
    assert body["summary"] == ANSWERS[model]


def test_the_pod_route_adds_every_models_quota_if_scheduled_now(quota_server: Server) -> None:
    body = quota_server.get("/v1/pods/team-a/train-2/why", model="H100", cluster=CLUSTER).json()
    assert body["summary"] == f"{ANSWERS['H100']} {NOW}"
    assert [(b["tier"], b["model"], b["over_quota"]) for b in body["would_get"]["blockers"]] == [(0, "A100", 8), (0, "H100", 4)]
