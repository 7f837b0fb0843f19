"""The tenant view of a record is an allow-list that covers the whole record schema, and no field
of a tenant's record shows it another tenant's name, whatever the decision engine wrote there."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from audit.api.auth import redact_explanation, redact_record
from audit.api.tenant_view import OTHERS, RECORD_FIELDS, tenant_explanation, tenant_view
from audit.explain import explain_record
from audit.records import DecisionRecord, Exemplar, TierBlocker, TierSummary, record_json_schema
from audit.telemetry.redaction import Redaction
from tests.api import factory
from tests.api.conftest import Server


def schema_paths(schema: dict[str, Any], node: dict[str, Any], prefix: str = "") -> set[str]:
    """Every leaf field of the record schema as a dotted path (lists of parts are walked into)."""
    out: set[str] = set()
    for name, prop in node["properties"].items():
        ref = prop.get("items", {}).get("$ref") or prop.get("$ref")
        if ref:
            out |= schema_paths(schema, schema["$defs"][ref.rsplit("/", 1)[1]], f"{prefix}{name}.")
        else:
            out.add(prefix + name)
    return out


def test_the_allow_list_classifies_every_field_of_the_record_schema() -> None:
    schema = record_json_schema()
    assert schema_paths(schema, schema) == set(RECORD_FIELDS)


def leaky_record(other: str) -> DecisionRecord:
    """A team-a decision whose evidence names ``other``'s objects wherever the engine can write them."""
    held = f"{other}/holder-claim"
    tiers = [TierSummary(index=0, request="gpu/h100", model="H100", considered=3, reasons={"in_use": 2, "unhealthy": 1},
                         exemplars=[Exemplar("d/p/gpu-0", "n1", "in_use", {"by": held}),
                                    Exemplar("d/p/gpu-1", "n1", "in_use", {"by": "team-a/mine"}),
                                    Exemplar("d/p/gpu-2", "n1", "unhealthy", {"key": "x/unhealthy", "effect": "NoSchedule",
                                                                               "note": held})])]
    blockers = [TierBlocker("binding_conflict", 0, {"device": "d/p/gpu-0", "node": "n1", "holder": held}),
                TierBlocker("fair_share_deferred", 0, {"tenant": "team-a", "held_eq": 4.0, "waiting_tenant": other,
                                                       "other_tenant": other, "other_share": 0.1})]
    return DecisionRecord(
        decision_id="d-1", cluster="lab", seq=1, time="2026-05-01T08:00:00Z", attempt=1, tenant="team-a",
        namespace="team-a", pod="train-1", pod_uid="u", claims=["train-1-gpu"], claim_uids=["c"], preference=["H100"],
        policy_version="v1", policy_digest="d" * 64, outcome="deferred", tiers=tiers, blockers=blockers,
        message=f"tenant team-a holds 4.0 of its 4.0 H100-equivalents while {other} is below its share and waiting")


@given(other=st.from_regex(r"\Ateam-[b-z][a-z0-9]{0,8}\Z"))
def test_no_field_of_the_tenant_view_names_another_tenant(other: str) -> None:
    record = leaky_record(other)
    for redaction in (Redaction(), Redaction(hash_pod_names=True)):
        shown = json.dumps(redact_record(record, redaction))
        assert other not in shown
        body = explain_record(record, "H100").to_dict()
        assert other not in json.dumps(redact_explanation(body, record.pod, redaction, record))


def test_own_names_and_device_facts_stay_visible() -> None:
    view = tenant_view(leaky_record("team-b").to_dict())
    details = [e["detail"] for e in view["tiers"][0]["exemplars"]]
    assert details == [{"by": OTHERS}, {"by": "team-a/mine"}, {"key": "x/unhealthy", "effect": "NoSchedule"}]
    assert view["blockers"][1]["detail"] == {"tenant": "team-a", "held_eq": 4.0, "waiting_tenant": OTHERS,
                                             "other_tenant": OTHERS, "other_share": 0.1}
    assert view["message"].endswith(f"while {OTHERS} is below its share and waiting")


def test_the_server_shows_a_tenant_no_other_tenants_name(server: Server) -> None:
    deferred = factory.DEFERRED  # team-b's decision, deferred in favour of team-a
    for path, params in ((f"/v1/decisions/{deferred.decision_id}", {}),
                         (f"/v1/decisions/{deferred.decision_id}/why", {"model": "H100"})):
        answer = server.get(path, who="team-b", **params)
        assert answer.status_code == 200, answer.text
        assert "team-a" not in answer.text
    assert "team-a" in server.get(f"/v1/decisions/{deferred.decision_id}", who="admin").text


def test_holder_texts_of_an_explanation_stay_when_they_name_only_the_tenants_own_objects() -> None:
    record = leaky_record("team-b").to_dict()
    body = {"devices": [
        {"device": "d/p/gpu-0", "reason": "in_use", "detail": {"by": "pod team-a/x (claim team-a/x-gpu)",
                                                                "claim": "team-a/x-gpu", "pod": "team-a/x"}},
        {"device": "d/p/gpu-1", "reason": "in_use", "detail": {"by": "another tenant"}},
        {"device": "d/p/gpu-2", "reason": "in_use", "detail": {"by": "pod team-a/x (claim team-a/x-gpu); pod "
                                                                      "team-b/y (claim team-b/y-gpu)"}},
        {"device": "d/p/gpu-3", "reason": "in_use", "detail": {"claim": "team-a/a,team-b/b"}},
    ]}
    shown = [d["detail"] for d in tenant_explanation(body, record)["devices"]]
    assert shown == [{"by": "pod team-a/x (claim team-a/x-gpu)", "claim": "team-a/x-gpu", "pod": "team-a/x"},
                     {"by": "another tenant"}, {"by": OTHERS}, {"claim": OTHERS}]
