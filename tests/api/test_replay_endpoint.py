"""``POST /v1/replay`` and ``GET /v1/replay/{job}``: by ids or by window, jobs scoped to their tenant."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.api import factory
from tests.api.conftest import Server

WINDOW = {"cluster": factory.CLUSTER, "since": "2026-05-01T00:00:00Z", "until": "2026-05-01T14:00:00Z"}


def _finish(server: Server, job: str, who: str) -> dict[str, Any]:
    for _ in range(240):
        body: dict[str, Any] = server.get(f"/v1/replay/{job}", who).json()
        if body["state"] != "running":
            return body
        time.sleep(0.25)
    raise AssertionError(f"replay job {job} still running")


def test_a_window_larger_than_the_sync_limit_becomes_a_job_of_its_tenant(server: Server) -> None:
    r = server.post("/v1/replay", "team-a", json=WINDOW)  # team-a has 3 decisions in it; the limit is 2
    assert r.status_code == 202, r.text
    job = r.json()
    assert job["total"] == 3 and job["state"] == "running"
    assert server.get(f"/v1/replay/{job['job']}", "team-b").status_code == 404
    assert server.get(f"/v1/replay/{job['job']}").status_code == 200  # admins see every job
    done = _finish(server, job["job"], "team-a")
    assert done["state"] == "done", done
    assert sorted(run["decision_id"] for run in done["runs"]) == sorted(
        r.decision_id for r in (factory.FALLBACK, factory.GOT_H100, factory.PENDING))
    assert done["summary"]["decisions"] == 3


def test_replay_by_id_reports_and_records_each_run(server: Server) -> None:
    r = server.post("/v1/replay", json={"decision_ids": [factory.FALLBACK.decision_id]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [run["decision_id"] for run in body["runs"]] == [factory.FALLBACK.decision_id]
    # The hand-built record sits at seq 101, past the last world event: replay says so.
    assert body["runs"][0]["match"] is False and body["runs"][0]["cause"] == "missing_events"
    assert body["summary"] == {"decisions": 1, "matches": 0, "mismatches": 1,
                               "mismatch_causes": {"missing_events": 1}}
    assert 'claimtrail_store{counter="replay_mismatches"} 0' not in server.get("/metrics", None).text


@pytest.mark.parametrize(("body", "status", "kind"), [
    ({}, 400, "invalid-parameter"),
    ({"sample": 0.5}, 400, "invalid-parameter"),
    ({"all": True, "shard": "3/2"}, 400, "invalid-parameter"),
    ({"all": True, "sample": 0}, 400, "malformed-body"),
    ({"decision_ids": ["x' OR 1=1"]}, 400, "invalid-parameter"),
    ({"decision_ids": ["00000000-0000-0000-0000-000000000000"]}, 404, "not-found"),
    ({**WINDOW, "since": "then"}, 400, "invalid-parameter"),
    ({**WINDOW, "limit": 0}, 400, "malformed-body"),
    ({**WINDOW, "extra": 1}, 400, "malformed-body"),
    ({**WINDOW, "counterfactual_policy": "v8"}, 404, "not-found"),
    ({"decision_ids": [factory.FALLBACK.decision_id], "counterfactual_policy": "v7"}, 400, "invalid-parameter"),
], ids=["empty", "selection-without-window", "bad-shard", "bad-sample", "bad-id", "unknown-id", "bad-time", "bad-limit", "unknown-field",
        "counterfactual-unknown-policy", "counterfactual-needs-window"])
def test_bad_replay_requests_are_problems(server: Server, body: dict[str, Any], status: int, kind: str) -> None:
    r = server.post("/v1/replay", json=body)
    assert r.status_code == status, r.text
    assert r.json()["type"] == f"https://claimtrail.io/problems/{kind}"


def test_unknown_job_is_not_found(server: Server) -> None:
    r = server.get("/v1/replay/00000000-0000-4000-8000-000000000000")
    assert r.status_code == 404


def test_counterfactual_pairs_every_recorded_decision_of_the_window(server: Server) -> None:
    r = server.post("/v1/replay", json={**WINDOW, "counterfactual_policy": "v7"})
    assert r.status_code == 200, r.text
    body = r.json()
    assert sorted(run["decision_id"] for run in body["runs"]) == sorted(rec.decision_id for rec in factory.RECORDS)
    by_id = {run["decision_id"]: run for run in body["runs"]}
    assert by_id[factory.FALLBACK.decision_id]["recorded"]["devices"] == ["gpu.nvidia.com/a100-07/gpu-3"]
    assert all(run["match"] == (run["counterfactual"] is not None and
                                run["counterfactual"]["devices"] == run["recorded"]["devices"] and
                                run["counterfactual"]["outcome"] == run["recorded"]["outcome"])
               for run in body["runs"])
    assert body["deltas"]["decisions"][0] == len(factory.RECORDS)
    assert body["policy_version"] == "v7" and body["cluster"] == factory.CLUSTER


@pytest.mark.parametrize(("body", "detail"), [
    ({"since": "2026-05-01T00:00:00Z", "until": "2026-05-02T00:00:00Z"},
     "a counterfactual run takes a window: cluster, since and until (missing: cluster)"),
    ({"cluster": "lab"}, "a counterfactual run takes a window: cluster, since and until (missing: since, until)"),
    ({"all": True}, "a counterfactual run takes a window: cluster, since and until (missing: cluster, since, until)"),
    ({"decision_ids": ["x"]}, "a counterfactual run takes a window (cluster, since, until), not decision_ids"),
    ({"cluster": "lab", "counterfactual_policy": ""},
     "counterfactual_policy: give a stored policy version (or, as an admin, counterfactual_policy_document)"),
], ids=["no-cluster", "no-times", "all", "ids", "empty-version"])
def test_a_counterfactual_without_its_window_says_what_is_missing(server: Server, body: dict[str, Any],
                                                                  detail: str) -> None:
    r = server.post("/v1/replay", json={"counterfactual_policy": "v7", **body})
    assert (r.status_code, r.json()["detail"]) == (400, detail)


def test_counterfactual_runs_are_for_admins_only(server: Server) -> None:
    r = server.post("/v1/replay", "team-a", json={**WINDOW, "counterfactual_policy": "v7"})
    assert r.status_code == 403
    assert r.json()["type"] == "https://claimtrail.io/problems/forbidden"


IDS = {"decision_ids": [factory.FALLBACK.decision_id]}
UNUSED_BY_IDS = "selects from a window; decision_ids replays exactly those decisions: give one or the other"
UNUSED_BY_COUNTERFACTUAL = ("a counterfactual run decides the whole window (cluster, since, until) again; "
                            "give none of these")


@pytest.mark.parametrize(("body", "detail"), [
    ({**IDS, "cluster": "elsewhere"}, f"cluster: {UNUSED_BY_IDS}"),
    ({**IDS, "since": "2030-01-01T00:00:00Z"}, f"since: {UNUSED_BY_IDS}"),
    ({**IDS, "sample": 0.01, "tenant": "team-b"}, f"tenant, sample: {UNUSED_BY_IDS}"),
    ({**IDS, "shard": "1/2", "limit": 5}, f"limit, shard: {UNUSED_BY_IDS}"),
    ({**WINDOW, "counterfactual_policy": "v7", "sample": 0.5}, f"sample: {UNUSED_BY_COUNTERFACTUAL}"),
    ({**WINDOW, "counterfactual_policy": "v7", "tenant": "team-a", "model": "H100"},
     f"tenant, model: {UNUSED_BY_COUNTERFACTUAL}"),
    ({**WINDOW, "counterfactual_policy": "v7", "shard": "0/2", "offset": 3}, f"offset, shard: {UNUSED_BY_COUNTERFACTUAL}"),
], ids=["ids-and-cluster", "ids-and-since", "ids-and-sample", "ids-and-shard", "counterfactual-and-sample",
        "counterfactual-and-tenant", "counterfactual-and-shard"])
def test_a_selection_the_request_would_not_use_is_refused_by_name(server: Server, body: dict[str, Any],
                                                                  detail: str) -> None:
    r = server.post("/v1/replay", json=body)
    assert (r.status_code, r.json().get("detail")) == (400, detail), r.text


@pytest.mark.parametrize("body", [{**IDS, "sample": 1.0, "cluster": None, "all": False},
                                  {**WINDOW, "counterfactual_policy": "v7", "limit": 10_000, "sample": 1.0}],
                         ids=["ids-with-defaults", "counterfactual-with-defaults"])
def test_a_selection_field_at_its_default_is_taken(server: Server, body: dict[str, Any]) -> None:
    assert server.post("/v1/replay", json=body).status_code == 200
