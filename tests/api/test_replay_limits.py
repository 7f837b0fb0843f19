"""``POST /v1/replay`` is bounded and batched: ids counted once, oversized requests refused with 413,
ids looked up in batches rather than one query each."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest

from audit.api.routes_replay import MAX_BODY_BYTES, MAX_IDS
from audit.records import decision_id
from audit.replay import StoreHistory
from audit.replay.service import verify_ids
from audit.store.queries import AuditStore
from tests.api import factory
from tests.api.conftest import Server
from tests.store.conftest import write_all

PROBLEM = "https://claimtrail.io/problems/"


def _finish(server: Server, job: str) -> dict[str, Any]:
    for _ in range(240):
        body: dict[str, Any] = server.get(f"/v1/replay/{job}").json()
        if body["state"] != "running":
            return body
        time.sleep(0.25)
    raise AssertionError(f"replay job {job} still running")


def test_three_thousand_copies_of_one_id_replay_it_once(server: Server) -> None:
    r = server.post("/v1/replay", json={"decision_ids": [factory.FALLBACK.decision_id] * 3000})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [run["decision_id"] for run in body["runs"]] == [factory.FALLBACK.decision_id]
    assert body["summary"]["decisions"] == 1


def test_copies_of_a_few_ids_make_a_job_of_the_distinct_ones(server: Server) -> None:
    ids = [r.decision_id for r in (factory.FALLBACK, factory.GOT_H100, factory.PENDING)]
    r = server.post("/v1/replay", json={"decision_ids": ids * 1000})  # the sync limit is 2: a job
    assert r.status_code == 202, r.text
    assert r.json()["total"] == 3
    done = _finish(server, r.json()["job"])
    assert (done["state"], done["total"], done["done"]) == ("done", 3, 3)
    assert sorted(run["decision_id"] for run in done["runs"]) == sorted(ids)


def test_more_ids_than_the_limit_is_413_with_a_problem_naming_the_limit(server: Server) -> None:
    ids = [factory.FALLBACK.decision_id] * (MAX_IDS + 1)
    r = server.post("/v1/replay", json={"decision_ids": ids})
    assert r.status_code == 413
    assert r.headers["content-type"] == "application/problem+json"
    body = r.json()
    assert body["type"] == PROBLEM + "payload-too-large"
    assert body["detail"] == (f"decision_ids: {MAX_IDS + 1:,} ids, at most {MAX_IDS:,} per request; split them, "
                              "or replay a window")
    assert (body["max_ids"], body["max_bytes"]) == (MAX_IDS, MAX_BODY_BYTES)
    # the published schema states the limit the server enforces
    body_schema = server.get("/openapi.json", None).json()["paths"]["/v1/replay"]["post"]["requestBody"]
    assert body_schema["content"]["application/json"]["schema"]["properties"]["decision_ids"]["maxItems"] == MAX_IDS


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_over_the_byte_limit_is_413_before_it_is_parsed(server: Server, chunked: bool) -> None:
    big = b'{"cluster": "' + b"x" * MAX_BODY_BYTES + b'"}'
    content: Any = iter([big[i:i + 65536] for i in range(0, len(big), 65536)]) if chunked else big
    r = server.post("/v1/replay", content=content, headers={"Content-Type": "application/json"})
    assert r.status_code == 413, r.text
    assert r.json()["type"] == PROBLEM + "payload-too-large"
    assert f"at most {MAX_BODY_BYTES:,} bytes" in r.json()["detail"] or f"over {MAX_BODY_BYTES:,} bytes" in r.json()[
        "detail"]


def test_unknown_ids_are_counted_in_one_answer(server: Server) -> None:
    unknown = [f"00000000-0000-0000-0000-{n:012d}" for n in range(5)]
    r = server.post("/v1/replay", json={"decision_ids": [factory.FALLBACK.decision_id, *unknown]})
    assert r.status_code == 404
    assert r.json()["detail"] == f"decision {unknown[0]} not found (and 4 more of the 6 given)"


def test_another_tenants_ids_are_not_found_in_a_batch(server: Server) -> None:
    r = server.post("/v1/replay", "team-a", json={"decision_ids": [factory.FALLBACK.decision_id,
                                                                   factory.OTHER_TENANT.decision_id]})
    assert r.status_code == 404
    assert r.json()["detail"] == f"decision {factory.OTHER_TENANT.decision_id} not found"


def test_ids_are_looked_up_in_batches_not_one_query_each(store: AuditStore) -> None:
    records = [dataclasses.replace(factory.PENDING, decision_id=decision_id(factory.CLUSTER, f"claim-{n}", 1),
                                   pod=f"pod-{n}", seq=200 + n).seal() for n in range(300)]
    write_all(store, records)
    queries: list[str] = []
    real = store._query

    def counting(sql: str, *args: Any, **kwargs: Any) -> Any:
        queries.append(sql)
        return real(sql, *args, **kwargs)

    store._query = counting  # type: ignore[method-assign]  # every read, events included, goes through it
    ids = [r.decision_id for r in records]
    assert store.known_decision_ids(ids, None) == set(ids)
    assert len(queries) == 1
    queries.clear()
    runs = [r.to_dict() for r in verify_ids(StoreHistory(store), ids + ids)]
    assert sorted(run["decision_id"] for run in runs) == sorted(ids)
    # the records in one batch, then the history once (its checkpoint and events): no query per decision
    assert [q.split(" FROM ")[-1].split()[0] for q in queries] == ["decisions", "checkpoints", "events"]


def test_a_window_is_taken_in_parts_in_history_order(server: Server) -> None:
    # team-a's three decisions of the morning (other modules add decisions elsewhere)
    window = {"cluster": factory.CLUSTER, "since": "2026-05-01T00:00:00Z", "until": "2026-05-01T14:00:00Z"}
    parts = []
    for offset in (0, 2, 4):
        r = server.post("/v1/replay", "team-a", json={**window, "limit": 2, "offset": offset})
        assert r.status_code == 200, r.text  # at most two decisions: within the sync limit
        parts.append([run["decision_id"] for run in r.json()["runs"]])
    mine = sorted((factory.FALLBACK, factory.GOT_H100, factory.PENDING), key=lambda r: r.seq)
    assert [set(p) for p in parts] == [{mine[0].decision_id, mine[1].decision_id}, {mine[2].decision_id}, set()]
