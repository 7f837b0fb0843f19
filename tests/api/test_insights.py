"""The dashboards' finer figures: skip reasons, regret, fairness against entitlement, pending pods,
health by model, replay status, the migration verdict, the claim filter and unknown parameters.

Every number is worked out by hand from ``factory.RECORDS`` (windowed to their hours, since other
tests ingest more) or from the extra records ingested here on another day.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from audit.events import WorldEvent
from audit.records import DecisionRecord, decision_id, to_jsonl
from tests.api import factory
from tests.api.conftest import Server

# the seeded hours, from the event log's one instant (07:00): a window of pod figures must reach the log
SEEDED = {"since": "2026-05-01T07:00:00Z", "until": "2026-05-01T14:00:00Z"}
# the regret records' day (2026-05-02), from the event log's instant for the same reason
REGRET_DAYS = {"since": "2026-05-01T07:00:00Z", "until": "2026-05-03T00:00:00Z"}
PROBLEM = "https://claimtrail.io/problems/"


def _rows(server: Server, kind: str, who: str = "admin", **query: str) -> list[dict]:
    r = server.get(f"/v1/stats/{kind}", who, **query)
    assert r.status_code == 200, r.text
    rows: list[dict] = r.json()["rows"]
    return rows


def _moved(record: DecisionRecord, n: int, time: str) -> DecisionRecord:
    """A team-c copy of ``record`` at ``time`` (its own pod and decision id)."""
    return dataclasses.replace(record, decision_id=decision_id(factory.CLUSTER, f"regret-claim-{n}", 1), tenant="team-c",
                               namespace="team-c", pod=f"job-{n}", pod_uid=f"regret-uid-{n}", claims=[f"job-{n}-gpu"],
                               time=time).seal()


# Two fallbacks from H100 on 2026-05-02, then H100 allocations 5 and 30 minutes later: decisions
# alone (no world events) that an "any later H100 in the cluster" reading would call regret.
REGRET_RECORDS = [
    _moved(factory.FALLBACK, 1, "2026-05-02T09:00:00.000000Z"),
    _moved(factory.GOT_H100, 2, "2026-05-02T09:05:00.000000Z"),
    _moved(factory.FALLBACK, 3, "2026-05-02T10:00:00.000000Z"),
    _moved(factory.GOT_H100, 4, "2026-05-02T10:30:00.000000Z"),
]


@pytest.fixture(scope="module")
def regret_day(server: Server) -> Server:
    r = server.post("/v1/ingest/records", content=to_jsonl(REGRET_RECORDS).encode())
    assert r.status_code == 200, r.text
    return server


@pytest.mark.parametrize(("who", "expected"), [
    ("admin", {"in_use": 163, "node_filtered": 16, "not_reached": 1, "unhealthy": 12}),
    ("team-a", {"in_use": 100, "node_filtered": 16, "unhealthy": 12}),
    ("team-b", {"in_use": 63, "not_reached": 1}),
], ids=["admin-all-skipped-preferred-tiers", "team-a-own-only", "team-b-own-only"])
def test_skip_reasons_count_device_verdicts_of_preferred_tiers_not_chosen(server: Server, who: str,
                                                                          expected: dict[str, int]) -> None:
    rows = _rows(server, "fallback", who, group_by="reason", **SEEDED)
    assert {r["reason"]: r["devices"] for r in rows} == expected
    by_pref = _rows(server, "fallback", who, group_by="reason,preferred", **SEEDED)
    assert {(r["preferred"], r["reason"]): r["devices"] for r in by_pref} == {("H100", k): v for k, v in expected.items()}


def test_fallback_rows_carry_no_record_level_regret(regret_day: Server) -> None:
    """Regret is a pod-level figure (first choice allocatable on one node, from the event log) given
    beside the rows; a decision-level count would be a second, different definition."""
    body = regret_day.get("/v1/stats/fallback", group_by="preferred", tenant="team-c", **REGRET_DAYS).json()
    assert [(r["preferred"], r["fallback_decisions"]) for r in body["rows"]] == [("H100", 2)]
    assert not any("regret" in k for r in body["rows"] for k in r)
    assert {"regretted", "regret_rate", "regret_window_s"} <= set(body)


def test_fairness_rows_count_decisions_and_the_pod_figures_come_from_the_event_log(server: Server) -> None:
    body = server.get("/v1/stats/fairness", cluster="lab", **SEEDED).json()
    rows = {r["tenant"]: r for r in body["rows"]}
    assert {t: (r["decisions"], r["allocated"], r["devices_allocated"]) for t, r in rows.items()} == {
        "team-a": (3, 2, 2), "team-b": (2, 1, 1)}
    tenants = {t["tenant"]: t for t in body["tenants"]}
    # team-a/train-1 was created at 07:00 and is still pending at 14:00, seven hours, past the
    # default 1 h starvation timeout; team-b/infer-9 was bound when it appeared; policy v7 names no
    # tenants: equal weights, and the cluster dump's devices are nobody's yet
    assert [(tenants[t]["pending_at_end"], tenants[t]["starving_pods"], tenants[t]["longest_wait_s"], tenants[t]["weight"])
            for t in ("team-a", "team-b")] == [(1, 1, 7 * 3600.0, 1.0), (0, 0, 0.0, 1.0)]


NO_WAIT = {"wait_p50_s": None, "wait_p95_s": None, "wait_p99_s": None}


@pytest.mark.parametrize(("query", "rows"), [
    pytest.param({}, "tenants", id="tenant-rows"),
    pytest.param({"by": "hour"}, "by_hour", id="rows-per-hour"),
    pytest.param({"by": "tenant_hour"}, "by_tenant_hour", id="rows-per-tenant-and-hour"),
])
def test_wait_percentiles_are_null_where_no_pod_started(server: Server, query: dict[str, str], rows: str) -> None:
    """team-a/train-1 was created at 07:00 and is never bound: team-a starts no pod from 07:00 to
    14:00, so none of its rows has a wait to rank. The answer says null, as for a rate of no pods,
    not 0 s (pods served at once)."""
    body = server.get("/v1/stats/fairness", cluster="lab", tenant="team-a", **query, **SEEDED).json()
    assert body[rows] and all(r["pods_started"] == 0 for r in body[rows])
    assert [{k: r[k] for k in NO_WAIT} for r in body[rows]] == [NO_WAIT] * len(body[rows])


@pytest.mark.parametrize(("kind", "empty"), [
    # unknown, not zero
    ("fairness", {"jain_whole": None, "jain_contention": None, "contention_windows": None, "tenants": []}),
    ("fallback", {"pods_with_preference": None, "first_choice_rate": None, "fallbacks": None, "regretted": None,
                  "regret_rate": None, "regret_window_s": None}),
    ("health", {"unhealthy_devices": None, "unhealthy_device_hours": None, "models": []}),
])
def test_a_cluster_the_store_does_not_know_has_no_pod_figures(server: Server, kind: str, empty: dict) -> None:
    body = server.get(f"/v1/stats/{kind}", cluster="no-such-cluster").json()
    assert {k: body[k] for k in empty} == empty
    assert body["pod_figures"] == "none: no world events stored for this cluster" and "window" not in body


def test_fairness_per_hour_and_tenant(server: Server) -> None:
    r = server.get("/v1/stats/fairness", group_by="hour,tenant", **SEEDED).json()
    assert r["group_by"] == ["hour", "tenant"]
    assert [(x["hour"][11:13], x["tenant"], x["decisions"], x["allocated"], x["devices_allocated"]) for x in r["rows"]] == [
        ("09", "team-a", 1, 1, 1), ("10", "team-a", 1, 1, 1), ("11", "team-a", 1, 0, 0), ("12", "team-b", 1, 1, 1),
        ("13", "team-b", 1, 0, 0)]


@pytest.mark.parametrize("group_by", ["tenant", "hour,tenant"])
def test_fairness_folds_other_tenants_for_a_tenant(server: Server, group_by: str) -> None:
    rows = _rows(server, "fairness", "team-b", group_by=group_by, **SEEDED)
    assert {r["tenant"] for r in rows} == {"team-b", "(others)"}
    others = [r for r in rows if r["tenant"] == "(others)"]
    assert sum(r["devices_allocated"] for r in others) == 2


@pytest.mark.parametrize(("who", "expected"), [
    ("admin", {"team-a": (3, 2, 1, 1), "team-b": (2, 1, 0, 0)}),
    ("team-a", {"team-a": (3, 2, 1, 1), "(others)": (2, 1, 0, 0)}),
], ids=["admin", "tenant-folds-others"])
def test_overview_counts_pods_pending_now(server: Server, who: str, expected: dict[str, tuple[int, ...]]) -> None:
    # decisions are counted from the records; pods pending at the window end from the event log
    # (team-a/train-1 pending, team-b/infer-9 bound)
    rows = _rows(server, "overview", who, cluster="lab", **SEEDED)
    assert {r["tenant"]: (r["decisions"], r["allocated"], r["fallback_decisions"], r["pending_now"]) for r in rows} == expected


@pytest.mark.parametrize(("who", "group_by", "expected"), [
    ("admin", "model", [("", "A100", 0), ("", "H100", 12)]),
    ("admin", "hour,model", [("09", "A100", 0), ("09", "H100", 8), ("10", "A100", 0), ("10", "H100", 0),
                             ("11", "A100", 0), ("11", "H100", 4), ("12", "H100", 0), ("13", "H100", 0)]),
    ("team-b", "model", [("", "H100", 0)]),
], ids=["by-model", "by-hour-and-model", "tenant-own-only"])
def test_health_by_device_model(server: Server, who: str, group_by: str, expected: list[tuple]) -> None:
    rows = _rows(server, "health", who, group_by=group_by, **SEEDED)
    assert [(r.get("hour", "")[11:13], r["model"], r["unhealthy"]) for r in rows] == expected


def test_replay_status_by_hour_and_cause_covers_only_the_callers_decisions(server: Server) -> None:
    ids = [factory.FALLBACK.decision_id, factory.GOT_H100.decision_id]
    assert server.post("/v1/replay", json={"decision_ids": ids}).status_code == 200
    window = {"since": "2026-05-01T09:00:00Z", "until": "2026-05-01T11:00:00Z"}
    hourly = _rows(server, "replay", group_by="hour", **window)
    # the recorded world ends before these pods exist, so both replays miss their events
    assert [(r["hour"][11:13], r["runs"], r["matched"], r["mismatched"]) for r in hourly] == [("09", 1, 0, 1), ("10", 1, 0, 1)]
    assert _rows(server, "replay", group_by="cause", **window) == [
        {"cause": "missing_events", "runs": 2, "matched": 0, "mismatched": 2}]
    assert [r["runs"] for r in _rows(server, "replay", "team-a", **window)] == [1, 1]
    assert _rows(server, "replay", "team-b", **window) == []


def test_migration_rows_carry_the_verdict_of_the_servers_thresholds(server: Server) -> None:
    rows = _rows(server, "migration", **SEEDED)
    assert [(r["track"], r["decisions"], r["verdict"], r["utilisation"]) for r in rows] == [("dra", 5, "hold", None)]
    # deploy/migration/thresholds.yaml compares device plugin with DRA template v2: neither has pods here
    assert rows[0]["reason"] == ("success_rate: required but not measured in both cohorts within a common model × tenant × hour; "
                                 "scheduling_latency_ms: required but not measured in both cohorts within a common model × tenant × hour; "
                                 "need at least 100 matched pods per cohort (baseline 0, candidate 0)")
    team_b = _rows(server, "migration", "team-b", **SEEDED)
    assert [(r["decisions"], r["verdict"]) for r in team_b] == [(2, "hold")]


@pytest.mark.parametrize(("who", "claim", "expected"), [
    ("admin", "train-1-gpu", [factory.FALLBACK.decision_id]),
    ("team-a", "train-1-gpu", [factory.FALLBACK.decision_id]),
    ("team-b", "train-1-gpu", []),
    ("admin", "no-such-claim", []),
], ids=["admin", "owner", "other-tenant-sees-nothing", "unknown-claim"])
def test_decisions_filter_by_claim(server: Server, who: str, claim: str, expected: list[str]) -> None:
    r = server.get("/v1/decisions", who, claim=claim)
    assert r.status_code == 200, r.text
    assert [i["decision_id"] for i in r.json()["items"]] == expected


@pytest.mark.parametrize(("path", "params", "unknown"), [
    ("/v1/decisions", {"tenat": "team-a"}, "tenat"),
    ("/v1/stats/fallback", {"groupby": "tenant"}, "groupby"),
    ("/v1/stats/overview", {"reason": "in_use"}, "reason"),
    (f"/v1/decisions/{factory.FALLBACK.decision_id}/why", {"model": "H100", "devices": "1"}, "devices"),
], ids=["misspelt-filter", "misspelt-group-by", "overview", "why"])
def test_unknown_query_parameters_are_refused(server: Server, path: str, params: dict[str, str], unknown: str) -> None:
    r = server.get(path, **params)
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["type"] == PROBLEM + "invalid-parameter"
    assert body["detail"].startswith(f"{unknown!r}: unknown query parameter for {path} (accepted: ")


@pytest.mark.parametrize(("kind", "group_by"), [
    ("fallback", "reason,tenant"), ("fairness", "model"), ("health", "node"), ("replay", "tenant"),
    ("overview", "hour"),
], ids=["reason-with-tenant", "fairness-by-model", "health-by-node", "replay-by-tenant", "overview-by-hour"])
def test_groupings_an_endpoint_does_not_offer_are_refused(server: Server, kind: str, group_by: str) -> None:
    r = server.get(f"/v1/stats/{kind}", group_by=group_by)
    assert r.status_code == 400 and r.json()["type"] == PROBLEM + "invalid-parameter"


WEIGHTED = {"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "weighted"},
            "spec": {"version": "v9", "tenants": [{"name": "team-c", "weight": 3}, {"name": "team-d", "weight": 1}]}}
WEIGHTED_DAY = {"since": "2026-05-03T00:00:00Z", "until": "2026-05-04T00:00:00Z"}


def test_entitlements_follow_the_weights_of_the_policy_in_the_event_log(server: Server) -> None:
    event = WorldEvent(cluster="lab2", seq=0, time="2026-05-03T07:00:00.000000Z", type="upsert", object_kind="Policy",
                       namespace="", name="weighted", payload=WEIGHTED)
    assert server.post("/v1/ingest/events", content=(json.dumps(event.to_dict()) + "\n").encode()).status_code == 200
    body = server.get("/v1/stats/fairness", cluster="lab2", **WEIGHTED_DAY).json()
    # the weights of the policy in force (3 : 1); no device in this world, so no entitlement to share
    assert [(t["tenant"], t["weight"], t["entitlement_h100_eq_hours"]) for t in body["tenants"]] == [
        ("team-c", 3.0, 0.0), ("team-d", 1.0, 0.0)]
