"""Each endpoint of a real server process, answered from the embedded store."""

from __future__ import annotations

import dataclasses
import gzip
import json

import pytest

from audit.records import to_jsonl
from tests.api import factory
from tests.api.conftest import Server

PROBLEM = "application/problem+json"


def test_health_readiness_and_openapi(server: Server) -> None:
    assert server.get("/healthz", None).json() == {"status": "ok"}
    assert server.get("/readyz", None).status_code == 200
    spec = server.get("/openapi.json", None).json()
    for path in ("/v1/decisions", "/v1/decisions/{decision}", "/v1/decisions/{decision}/why",
                 "/v1/pods/{namespace}/{name}/why", "/v1/stats/fallback", "/v1/stats/overview", "/v1/stats/replay",
                 "/v1/ingest/records", "/v1/replay"):
        assert path in spec["paths"]
    assert "swagger-ui" in server.get("/docs", None).text


def test_metrics_count_requests_by_route_template_and_show_writer_counters(server: Server) -> None:
    server.get(f"/v1/decisions/{factory.FALLBACK.decision_id}")
    text = server.get("/metrics", None).text
    assert 'claimtrail_http_requests_total{method="GET",route="/v1/decisions/{decision}",status="200"}' in text
    assert factory.FALLBACK.decision_id not in text
    assert 'claimtrail_store{counter="writer_received"}' in text
    assert 'claimtrail_store{counter="replay_mismatches"}' in text
    assert "# TYPE claimtrail_http_request_duration_seconds histogram" in text
    assert 'claimtrail_otlp_items{counter="requests"}' in text


def test_what_the_server_built_before_serving_is_frozen_out_of_the_collectors_walks(server: Server) -> None:
    metrics = {line.split()[0]: float(line.split()[1]) for line in server.get("/metrics", None).text.splitlines()
               if line.startswith("python_gc_")}
    # the modules, the app and the store's clients: tens of thousands of objects a full collection skips
    assert metrics["python_gc_frozen_objects"] > 50_000
    assert {'python_gc_collections{generation="0"}', 'python_gc_collections{generation="2"}'} <= set(metrics)


def _otlp_requests(server: Server) -> int:
    line = next(x for x in server.get("/metrics", None).text.splitlines()
                if x.startswith('claimtrail_otlp_items{counter="requests"}'))
    return int(line.split()[-1])


def test_otlp_receiver_is_mounted_for_admins(server: Server) -> None:
    before = _otlp_requests(server)
    r = server.post("/v1/traces", content=b"", headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 200, r.text
    assert _otlp_requests(server) == before + 1


def test_decision_by_id_is_the_stored_record(server: Server) -> None:
    r = server.get(f"/v1/decisions/{factory.FALLBACK.decision_id}")
    assert r.status_code == 200
    assert r.json() == factory.FALLBACK.to_dict()


def test_list_paginates_newest_first_without_gaps_or_repeats(server: Server) -> None:
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        # The window holds exactly the seeded records, whatever other tests ingest later.
        page = server.get("/v1/decisions", limit=2, until="2026-05-01T14:00:00Z",
                          **({"cursor": cursor} if cursor else {})).json()
        seen += [item["decision_id"] for item in page["items"]]
        cursor = page["next"]
        if cursor is None:
            break
    newest_first = sorted(factory.RECORDS, key=lambda r: r.time, reverse=True)
    assert seen == [r.decision_id for r in newest_first]


SEEDED_DAY = {"since": "2026-05-01T00:00:00Z", "until": "2026-05-02T00:00:00Z"}


@pytest.mark.parametrize(("query", "expected"), [
    ({"fallback": "true"}, [factory.FALLBACK]),
    ({"outcome": "deferred"}, [factory.DEFERRED]),
    ({"tenant": "team-b"}, [factory.DEFERRED, factory.OTHER_TENANT]),
    ({"namespace": "team-a", "pod": "train-2"}, [factory.GOT_H100]),
    ({"model": "A100"}, [factory.FALLBACK]),
    ({"since": "2026-05-01T10:00:00Z", "until": "2026-05-01T12:00:00Z"}, [factory.PENDING, factory.GOT_H100]),
    ({"policy_version": "v6"}, []),
], ids=["fallback", "outcome", "tenant", "pod", "model", "window", "no-match"])
def test_list_filters(server: Server, query: dict[str, str], expected: list[object]) -> None:
    # other test files share the server and add records on later days: look at the seeded day only
    items = server.get("/v1/decisions", **{**SEEDED_DAY, **query}).json()["items"]
    assert [i["decision_id"] for i in items] == [r.decision_id for r in expected]  # type: ignore[attr-defined]


def test_why_summary_for_a_decision(server: Server) -> None:
    body = server.get(f"/v1/decisions/{factory.FALLBACK.decision_id}/why", model="H100").json()
    assert body["skipped"] is True
    assert body["reasons"] == {"node_filtered": 16, "in_use": 40, "unhealthy": 8}
    assert body["summary"].endswith("Allocated A100 gpu-3 on node a100-07 (tier 1) under policy v7.")


def test_why_with_devices_replays_the_world_at_the_decision(server: Server) -> None:
    body = server.get(f"/v1/decisions/{factory.FALLBACK.decision_id}/why", model="H100", detail="devices").json()
    # The fixture dump's 8 H100 less node h100-03's deleted slice; the world's policy counts the
    # maintenance taint as unhealthy.
    assert body["reasons"] == {"node_filtered": 2, "in_use": 1, "request_selector_mismatch": 1, "unhealthy": 2}
    assert len(body["devices"]) == 6
    assert {d["reason"] for d in body["devices"] if d["node"] == "h100-02"} == {"node_filtered"}
    assert body["decision_id"] == factory.FALLBACK.decision_id and body["policy_version"] == "v7"


def test_why_for_a_pod_uses_its_latest_decision(server: Server) -> None:
    body = server.get("/v1/pods/team-a/train-3/why", model="A100").json()
    assert body["decision_id"] == factory.PENDING.decision_id
    assert body["reasons"] == {"in_use": 8}


@pytest.mark.parametrize("kind", ["fallback", "fairness", "health", "migration", "overview"])
def test_stats_rows_for_admin(server: Server, kind: str) -> None:
    r = server.get(f"/v1/stats/{kind}")
    assert r.status_code == 200, r.text
    body = r.json()
    assert isinstance(body["rows"], list) and body["rows"] and body["group_by"]


def test_fallback_stats_numbers(server: Server) -> None:
    rows = server.get("/v1/stats/fallback", group_by="tenant").json()["rows"]
    by_tenant = {r["tenant"]: r for r in rows}
    assert by_tenant["team-a"]["decisions"] == 3 and by_tenant["team-a"]["fallback_decisions"] == 1
    assert by_tenant["team-b"]["decisions"] == 2 and by_tenant["team-b"]["fallback_decisions"] == 0


def test_ingest_gzip_counts_accepted_and_quarantined(server: Server) -> None:
    extra = factory._record(12, "team-c", "team-c", "job-1", "unschedulable")
    body = gzip.compress(to_jsonl([extra]).encode() + b'{"not": "a record"}\n')
    r = server.post("/v1/ingest/records", content=body, headers={"Content-Encoding": "gzip"})
    assert r.status_code == 200, r.text
    assert (r.json()["accepted"], r.json()["quarantined"]) == (1, 1)
    assert server.get(f"/v1/decisions/{extra.decision_id}").status_code == 200


@pytest.mark.parametrize(("headers", "content", "status", "kind"), [
    ({}, b"x" * (1024 * 1024 + 1), 413, "payload-too-large"),
    ({"Content-Encoding": "gzip"}, gzip.compress(b"\n" * (1024 * 1024 + 1)), 413, "payload-too-large"),
    ({"Content-Encoding": "gzip"}, b"not gzip at all", 400, "malformed-body"),
    ({"Content-Encoding": "br"}, b"{}", 415, "unsupported-media-type"),
], ids=["too-large", "gzip-bomb", "bad-gzip", "unknown-encoding"])
def test_ingest_rejects_bad_bodies_with_problems(server: Server, headers: dict[str, str], content: bytes,
                                                 status: int, kind: str) -> None:
    r = server.post("/v1/ingest/events", content=content, headers=headers)
    assert r.status_code == status
    assert r.headers["content-type"] == PROBLEM
    assert r.json()["type"] == f"https://claimtrail.io/problems/{kind}"


@pytest.mark.parametrize(("path", "params", "status", "kind"), [
    ("/v1/decisions/no%20such'id", {}, 400, "invalid-parameter"),
    ("/v1/decisions/00000000-0000-0000-0000-000000000000", {}, 404, "not-found"),
    (f"/v1/decisions/{factory.FALLBACK.decision_id}/why", {"model": "Z9000"}, 422, "unknown-model"),
    (f"/v1/decisions/{factory.FALLBACK.decision_id}/why", {}, 400, "invalid-parameter"),
    (f"/v1/decisions/{factory.FALLBACK.decision_id}/why", {"model": "H100", "detail": "all"}, 400,
     "invalid-parameter"),
    ("/v1/decisions", {"outcome": "won"}, 400, "invalid-parameter"),
    ("/v1/decisions", {"since": "yesterday"}, 400, "invalid-parameter"),
    ("/v1/decisions", {"limit": "0"}, 400, "invalid-parameter"),
    ("/v1/decisions", {"cursor": "garbage"}, 400, "invalid-parameter"),
    ("/v1/decisions", {"pod": "x' OR 1=1 --"}, 400, "invalid-parameter"),
    ("/v1/stats/fallback", {"group_by": "tenant;DROP TABLE decisions"}, 400, "invalid-parameter"),
    ("/v1/nowhere", {}, 404, "not-found"),
    # train-3 is not in the recorded world, so its devices cannot be judged
    (f"/v1/decisions/{factory.PENDING.decision_id}/why", {"model": "H100", "detail": "devices"}, 422,
     "unexplainable"),
], ids=["bad-id", "unknown-id", "unknown-model", "missing-model", "bad-detail", "bad-outcome", "bad-time",
        "bad-limit", "bad-cursor", "injection-pod", "injection-group", "unknown-path", "pod-not-in-world"])
def test_bad_requests_are_4xx_problems(server: Server, path: str, params: dict[str, str], status: int,
                                       kind: str) -> None:
    r = server.get(path, **params)
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == PROBLEM
    body = r.json()
    assert body["type"] == f"https://claimtrail.io/problems/{kind}" and body["status"] == status
    assert body["title"] and body["detail"]


INVERTED = {"since": "2026-05-01T02:00:00Z", "until": "2026-05-01T01:00:00Z"}


@pytest.mark.parametrize(("method", "path", "params", "detail"), [
    *[("GET", f"/v1/{p}", INVERTED, "until: before since")
      for p in ("decisions", "stats/overview", "stats/fallback", "stats/fairness", "stats/health", "stats/replay",
                "stats/migration")],
    ("POST", "/v1/replay", INVERTED, "until: before since"),
    ("GET", "/v1/decisions", {"since": "9999-12-31T23:59:59Z"},
     "since '9999-12-31T23:59:59Z': outside 1970..2299, the times the store keeps"),
    ("GET", "/v1/decisions", {"since": "0001-01-01T00:00:00Z"},
     "since '0001-01-01T00:00:00Z': outside 1970..2299, the times the store keeps"),
], ids=[*(f"inverted-{p}" for p in ("decisions", "overview", "fallback", "fairness", "health", "replay-stats",
                                     "migration")), "inverted-replay-run", "year-9999", "year-1"])
def test_a_time_window_the_store_cannot_answer_is_a_400_saying_why(server: Server, method: str, path: str,
                                                                   params: dict[str, str], detail: str) -> None:
    r = server.get(path, **params) if method == "GET" else server.post(path, json={"cluster": "lab", **params})
    assert r.status_code == 400, r.text
    assert r.json()["detail"] == detail


def test_a_model_in_the_wrong_case_is_refused_with_the_model_meant(server: Server) -> None:
    r = server.get(f"/v1/decisions/{factory.FALLBACK.decision_id}/why", model="h100")
    assert r.status_code == 422 and r.json()["type"] == "https://claimtrail.io/problems/unknown-model"
    assert r.json()["detail"] == "model 'h100': not a device model this cluster or decision knows; did you mean H100?"


def test_injection_strings_leave_the_store_intact(server: Server) -> None:
    before = server.get("/v1/decisions", limit=100).json()["items"]
    server.get("/v1/decisions", tenant="team-a'; DROP TABLE decisions; --")
    server.get("/v1/pods/team-a/x'--/why", model="H100")
    assert json.dumps(server.get("/v1/decisions", limit=100).json()["items"]) == json.dumps(before)


def test_an_unknown_model_is_refused_listing_models_not_tier_labels() -> None:
    from audit.api.problems import Problem
    from audit.api.routes_decisions import _DEFAULT_MODELS, _check_model

    base = factory.FALLBACK
    record = dataclasses.replace(base, tiers=[dataclasses.replace(base.tiers[0], model="A100|H100|L40S"),
                                              dataclasses.replace(base.tiers[0], index=1, model="any")])
    with pytest.raises(Problem) as refused:
        _check_model(record, "Z9000", lambda _: _DEFAULT_MODELS)  # a store without the record's world
    known = str(refused.value.detail).split("(known: ")[1].rstrip(")").split(", ")
    assert "L40S" in known and not any("|" in m or m == "any" for m in known)
