"""Redaction happens before export: a redacted value never appears in any byte sent."""

from __future__ import annotations

import pytest

from audit.allocator.outcome import DeviceVerdict, TierEvidence
from audit.records import TierBlocker
from audit.telemetry import Redaction, TelemetryConfigError
from audit.telemetry import schema as s
from audit.telemetry.redaction import redact
from tests.telemetry.capture import attrs, export_over_http
from tests.telemetry.records_factory import POD, make_record

TENANT = "omega-labs"
LABEL_VALUE = "alice-zhang"


def _export(monkeypatch: pytest.MonkeyPatch, redact_env: str, compression: str = "none"):  # noqa: ANN202
    extra = [TierEvidence("c", "gpu/h100", 0, [DeviceVerdict("gpu.nvidia.com/node-h1/gpu-7", "in_use", (("holder", f"{POD}-old"),))])]
    return export_over_http(
        monkeypatch,
        [make_record(tenant=TENANT)],
        verdicts=extra,
        labels={"owner": LABEL_VALUE},
        env={"CLAIMTRAIL_OTEL_REDACT": redact_env, "OTEL_EXPORTER_OTLP_COMPRESSION": compression,
             "CLAIMTRAIL_OTEL_REDACT_SALT": "k"},
    )


@pytest.mark.parametrize(
    ("option", "secret", "compression"),
    [
        ("hash_pod_names", POD, "none"),
        ("hash_pod_names", POD, "gzip"),
        ("drop_tenant", TENANT, "none"),
        ("drop_labels", LABEL_VALUE, "none"),
    ],
    ids=["pod-name-plain", "pod-name-gzip", "tenant", "labels"],
)
def test_redacted_value_never_appears_in_any_byte_sent(
    monkeypatch: pytest.MonkeyPatch, option: str, secret: str, compression: str
) -> None:
    wire = _export(monkeypatch, option, compression)
    bodies = wire.raw_bytes()
    assert {c.path for c in wire.rx.capture.bodies()} == {"/v1/traces", "/v1/logs", "/v1/metrics"}
    assert [b for b in bodies if secret.encode() in b] == []
    assert len(wire.rx.sink.records) == 1  # the decision still arrives


@pytest.mark.parametrize("secret", [POD, TENANT, LABEL_VALUE], ids=["pod-name", "tenant", "label"])
def test_without_redaction_the_same_values_are_sent(monkeypatch: pytest.MonkeyPatch, secret: str) -> None:
    bodies = _export(monkeypatch, "").raw_bytes()
    assert any(secret.encode() in b for b in bodies)


def test_hashed_pod_record_keeps_the_original_output_digest_and_lists_redacted_paths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = make_record(tenant=TENANT)
    wire = _export(monkeypatch, "hash_pod_names")
    (received,) = wire.rx.sink.records
    token = Redaction(hash_pod_names=True, salt="k").pod_token(POD)
    assert received.pod == token
    assert received.claims == [f"team-vision/{token}-gpu"]
    assert received.output_digest == original.output_digest
    assert attrs(wire.root())[s.REDACTED] == ["/claims/0", "/message", "/pod", "/tiers/0/exemplars/0/detail/claim"]
    assert attrs(wire.root())[s.K8S_POD_NAME] == token


def test_drop_tenant_removes_the_tenant_attribute_and_field(monkeypatch: pytest.MonkeyPatch) -> None:
    wire = _export(monkeypatch, "drop_tenant")
    assert s.TENANT not in attrs(wire.root())
    assert wire.rx.sink.records[0].tenant == ""


def test_redact_leaves_the_input_record_unchanged() -> None:
    record = make_record()
    before = record.to_dict()
    out = redact(record, {"a": "b"}, Redaction(hash_pod_names=True, drop_labels=True, drop_tenant=True, salt="k"))
    assert record.to_dict() == before
    assert out.labels == {}
    assert out.paths == ["/claims/0", "/message", "/pod", "/tenant", "/tiers/0/exemplars/0/detail/claim", "/labels"]


def test_a_pod_named_like_digits_of_the_time_leaves_the_time_as_it_was() -> None:
    # a time with the pod token spliced in is no time at all: the store would refuse the record
    out = redact(make_record(pod="0"), {}, Redaction(hash_pod_names=True, salt="k"))
    assert (out.record.time, "/time" in out.paths) == ("2026-03-14T09:26:53.589793+00:00", False)
    assert out.record.pod == Redaction(salt="k").pod_token("0")


# each pod is named like a name that places the decision in the world; hashing the pod must not
# move the decision to another cluster, namespace, tenant, policy, node, device or model
WORLD_NAMES = {
    "cluster": "gpu-east",
    "namespace": "team-vision",
    "tenant": "vision",
    "policy-version": "2026-03-01",
    "node": "node-a7",
    "device": "gpu",
    "model": "A100",
    "request": "a100",
    "taint": "unhealthy",
    "estimate-wait-on": "quota",
    "estimate-choice": "wait",
}
ESTIMATE = TierBlocker("fallback_estimate", 0, {"model": "H100", "wait_on": "quota", "choice": "wait", "basis": "estimate"})


@pytest.mark.parametrize("pod", list(WORLD_NAMES.values()), ids=list(WORLD_NAMES))
def test_a_pod_named_like_a_world_name_changes_only_its_own_text(pod: str) -> None:
    record = make_record(pod=pod, claims=[f"team-vision/{pod}-x7k2"], message=f"<{pod}>", blockers=[ESTIMATE])
    out = redact(record, {}, Redaction(hash_pod_names=True, salt="k"))
    token = Redaction(salt="k").pod_token(pod)
    assert (out.record.pod, out.record.claims, out.record.message) == (
        token, [f"team-vision/{token}-x7k2"], f"<{token}>"
    )
    expected = record.to_dict() | {"pod": token, "claims": out.record.claims, "message": out.record.message}
    assert out.record.to_dict() == expected
    assert out.paths == ["/claims/0", "/message", "/pod"]


def test_salt_changes_the_pod_token() -> None:
    assert Redaction(salt="one").pod_token(POD) != Redaction(salt="two").pod_token(POD)


def test_unknown_redaction_option_is_refused_naming_the_variable() -> None:
    with pytest.raises(TelemetryConfigError, match=r"CLAIMTRAIL_OTEL_REDACT: unknown option 'hash_pods'"):
        Redaction.from_env({"CLAIMTRAIL_OTEL_REDACT": "hash_pods,drop_tenant"})


def test_unsalted_pod_token_matches_the_api_pod_hash() -> None:
    from audit.api.auth import pod_hash

    assert Redaction().pod_token(POD) == pod_hash(POD)
