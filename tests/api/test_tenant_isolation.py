"""Tenant isolation on every endpoint: no token → 401; another tenant's data → 404 or folded totals."""

from __future__ import annotations

from typing import Any

import pytest

from audit.api.auth import pod_hash
from tests.api import factory
from tests.api.conftest import Server

A_ID = factory.FALLBACK.decision_id  # team-a's decision
B_ID = factory.OTHER_TENANT.decision_id  # team-b's decision

GETS: list[tuple[str, dict[str, str]]] = [
    ("/v1/decisions", {}),
    (f"/v1/decisions/{A_ID}", {}),
    (f"/v1/decisions/{A_ID}/why", {"model": "H100"}),
    ("/v1/pods/team-a/train-1/why", {"model": "H100"}),
    ("/v1/stats/fallback", {}),
    ("/v1/stats/fairness", {}),
    ("/v1/stats/health", {}),
    ("/v1/stats/migration", {}),
    ("/v1/stats/replay", {}),
    ("/v1/stats/overview", {}),
    ("/v1/replay/some-job", {}),
    ("/v1/events", {"cluster": factory.CLUSTER}),
    ("/v1/events/checkpoint", {"cluster": factory.CLUSTER}),
]
POSTS: list[tuple[str, dict[str, Any]]] = [
    ("/v1/ingest/records", {"content": b""}),
    ("/v1/ingest/events", {"content": b""}),
    ("/v1/replay", {"json": {"decision_ids": [A_ID]}}),
    ("/v1/traces", {"content": b"", "headers": {"Content-Type": "application/x-protobuf"}}),
    ("/v1/events/objects", {"json": {"cluster": factory.CLUSTER, "kind": "ResourceClaim", "names": ["team-a/c"]}}),
]


@pytest.mark.parametrize(("path", "params"), GETS, ids=[p for p, _ in GETS])
@pytest.mark.parametrize("token", [None, "not-a-token"], ids=["no-token", "bad-token"])
def test_every_get_needs_a_valid_token(server: Server, path: str, params: dict[str, str], token: str | None) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {token}"} if token else {}
    r = httpx.get(server.base + path, params=params, headers=headers, timeout=30)
    assert r.status_code == 401
    assert r.json()["type"] == "https://claimtrail.io/problems/unauthorized"
    assert r.headers["www-authenticate"] == "Bearer"


@pytest.mark.parametrize(("path", "kwargs"), POSTS, ids=[p for p, _ in POSTS])
def test_every_post_needs_a_token(server: Server, path: str, kwargs: dict[str, Any]) -> None:
    assert server.post(path, None, **kwargs).status_code == 401


@pytest.mark.parametrize(("path", "params"), [
    (f"/v1/decisions/{A_ID}", {}),
    (f"/v1/decisions/{A_ID}/why", {"model": "H100"}),
    (f"/v1/decisions/{A_ID}/why", {"model": "H100", "detail": "devices"}),
    ("/v1/pods/team-a/train-1/why", {"model": "H100"}),
    ("/v1/decisions", {"tenant": "team-a"}),
    ("/v1/stats/fallback", {"tenant": "team-a"}),
    ("/v1/stats/fairness", {"tenant": "team-a"}),
    ("/v1/stats/health", {"tenant": "team-a"}),
    ("/v1/stats/migration", {"tenant": "team-a"}),
    ("/v1/stats/replay", {"tenant": "team-a"}),
    ("/v1/stats/overview", {"tenant": "team-a"}),
    ("/v1/stats/fallback", {"tenant": "team-a", "group_by": "reason"}),
    ("/v1/stats/fairness", {"tenant": "team-a", "group_by": "hour,tenant"}),
    ("/v1/stats/health", {"tenant": "team-a", "group_by": "model"}),
    ("/v1/decisions", {"tenant": "team-a", "claim": "train-1-gpu"}),
], ids=["decision", "why", "why-devices", "pod-why", "list-tenant", "fallback-tenant", "fairness-tenant",
        "health-tenant", "migration-tenant", "replay-tenant", "overview-tenant", "reasons-tenant",
        "fairness-hourly-tenant", "health-model-tenant", "claim-tenant"])
def test_another_tenants_data_is_not_found(server: Server, path: str, params: dict[str, str]) -> None:
    r = server.get(path, "team-b", **params)
    assert r.status_code == 404, r.text
    assert r.json()["type"] == "https://claimtrail.io/problems/not-found"


def test_not_found_for_other_tenant_looks_like_not_found_for_nothing(server: Server) -> None:
    other = server.get(f"/v1/decisions/{A_ID}", "team-b").json()
    missing = server.get("/v1/decisions/00000000-0000-0000-0000-000000000000", "team-b").json()
    assert {k: v for k, v in other.items() if k not in ("detail", "instance")} == \
        {k: v for k, v in missing.items() if k not in ("detail", "instance")}


def served_hash(server: Server, pod: str) -> str:
    """The pod's hash under the key the server keeps in its data directory (salted by default)."""
    salt = (server.log.parent / "redaction.salt").read_text().strip()
    assert len(salt) == 64 and pod_hash(pod, salt) != pod_hash(pod)
    return pod_hash(pod, salt)


def test_tenant_sees_only_its_own_decisions_with_hashed_pod_names(server: Server) -> None:
    items = server.get("/v1/decisions", "team-b", limit=100).json()["items"]
    assert sorted(i["decision_id"] for i in items) == sorted([B_ID, factory.DEFERRED.decision_id])
    assert {i["pod"] for i in items} == {served_hash(server, "infer-9"), served_hash(server, "infer-10")}
    assert server.get("/v1/decisions", "team-b", namespace="team-a").json()["items"] == []
    own = server.get(f"/v1/decisions/{B_ID}", "team-b").json()
    assert own["pod"] == served_hash(server, "infer-9") and own["tenant"] == "team-b"


def test_tenant_why_on_own_decision_hashes_the_pod(server: Server) -> None:
    body = server.get(f"/v1/decisions/{B_ID}/why", "team-b", model="H100").json()
    assert body["pod"] == f"team-b/{served_hash(server, 'infer-9')}"
    assert "infer-9" not in str(body)


def test_tenant_aggregates_fold_other_tenants_into_one_total(server: Server) -> None:
    rows = server.get("/v1/stats/fallback", "team-b", group_by="tenant").json()["rows"]
    by_tenant = {r["tenant"]: r for r in rows}
    assert set(by_tenant) == {"team-b", "(others)"}
    assert by_tenant["team-b"]["decisions"] == 2
    admin_rows = server.get("/v1/stats/fallback", group_by="tenant").json()["rows"]
    assert by_tenant["(others)"]["decisions"] == sum(r["decisions"] for r in admin_rows if r["tenant"] != "team-b")
    fairness = server.get("/v1/stats/fairness", "team-b").json()["rows"]
    assert {r["tenant"] for r in fairness} == {"team-b", "(others)"}


@pytest.mark.parametrize("group_by", ["hour", "policy_version", "preferred,model", "track"])
def test_tenant_fallback_rows_without_a_tenant_column_count_only_its_own_decisions(server: Server,
                                                                                   group_by: str) -> None:
    """Rows that are not per tenant cannot fold the others apart: a tenant caller's count its own
    decisions, the population of its pod figures beside them, as the admin's rows for that tenant do."""
    rows = server.get("/v1/stats/fallback", "team-b", group_by=group_by).json()["rows"]
    admin = server.get("/v1/stats/fallback", group_by=group_by, tenant="team-b").json()["rows"]
    assert rows == admin and sum(r["decisions"] for r in rows) == 2


def test_tenant_health_and_migration_cover_only_its_own_decisions(server: Server) -> None:
    health = server.get("/v1/stats/health", "team-b").json()["rows"]
    assert sum(r["decisions"] for r in health) == 2
    migration = server.get("/v1/stats/migration", "team-b").json()["rows"]
    assert sum(r["decisions"] for r in migration) == 2


@pytest.mark.parametrize(("path", "kwargs"), POSTS[:2] + POSTS[3:4], ids=["records", "events", "otlp"])
def test_tenants_cannot_ingest(server: Server, path: str, kwargs: dict[str, Any]) -> None:
    r = server.post(path, "team-a", **kwargs)
    assert r.status_code == 403
    assert r.json()["type"] == "https://claimtrail.io/problems/forbidden"


def test_replay_of_another_tenants_decision_is_not_found(server: Server) -> None:
    r = server.post("/v1/replay", "team-b", json={"decision_ids": [A_ID]})
    assert r.status_code == 404
    assert r.json()["type"] == "https://claimtrail.io/problems/not-found"
