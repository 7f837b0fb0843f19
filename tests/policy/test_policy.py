"""Policy documents: parsing, defaults, canonical digest, validation naming the field, capacity."""

import copy
import os

import pytest
import yaml

from audit.policy import (
    PolicyError,
    capacity_findings,
    parse_policy,
    policy_document,
    policy_findings,
    yaml_exponent_hint,
)

FIXTURE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "policy", "team-quotas.yaml")


def _doc():
    with open(FIXTURE, encoding="utf-8") as fh:
        return next(d for d in yaml.safe_load_all(fh) if d["kind"] == "Policy")


def test_parse_reads_every_section():
    p = parse_policy(_doc())
    assert (p.name, p.version, p.fairness_mode, p.usage_half_life_ms) == ("team-quotas", "7", "drf", 5_400_000)
    assert p.tenant_for("research-dev") == "research" and p.tenant_for("other") == "other"
    assert p.weight("research") == 2.0 and p.weight("other") == 1.0
    assert p.quota("research", "H100").limit == 12 and p.quota("prod", "H100").limit == 8
    assert p.quota("prod", "A100") is None
    assert (p.backoff_base_ms, p.backoff_cap_ms, p.max_attempts) == (500, 60_000, 4)
    assert [p.backoff_ms(a) for a in (1, 2, 3, 8, 9)] == [500, 1000, 2000, 60_000, 60_000]
    assert p.is_retryable("unhealthy") and not p.is_retryable("stale_slice")
    assert p.is_unhealthy_taint("example.com/xid-error") and p.is_unhealthy_taint("gpu.nvidia.com/unhealthy")
    assert not p.is_unhealthy_taint("example.com/maintenance")
    assert (p.fallback_mode, p.fallback_wait_ms, p.mixed_models) == ("wait-for-preferred", 600_000, False)
    assert p.topology_match_attributes == ("resource.kubernetes.io/pcieRoot",)
    assert p.starvation_ms == 7_200_000
    assert p.defer_above_share is False


@pytest.mark.parametrize(
    ("product", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 NVL", "H100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100-SXM4-40GB", "A100"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA H200", "unknown"),
    ],
)
def test_default_model_table(product, model):
    p = parse_policy(_doc())
    assert p.model_of("gpu.nvidia.com", {"productName": {"string": product}}) == model
    assert p.model_of("gpu.example.com", {"productName": {"string": product}}) == "unknown"


def test_group_reference_keeps_the_attribute_text():
    doc = _doc()
    doc["spec"]["deviceModels"] = [{"model": "\\1", "attribute": "productName", "match": "^(G2|T4)$"}]
    doc["spec"]["tenants"] = []
    p = parse_policy(doc)
    assert p.model_of("gpu.nvidia.com", {"productName": {"string": "T4"}}) == "T4"
    assert p.model_of("gpu.nvidia.com", {"gpu.nvidia.com/productName": {"string": "G2"}}) == "G2"


def test_digest_ignores_spelling_and_order_but_not_meaning():
    a = _doc()
    b = copy.deepcopy(a)
    b["spec"]["fairness"]["usageHalfLife"] = "90m"
    b["spec"]["tenants"].reverse()
    b["spec"]["tenants"][1]["namespaces"].reverse()
    c = copy.deepcopy(a)
    c["spec"]["tenants"][0]["quotas"]["H100"]["nominal"] = 9
    pa, pb, pc = parse_policy(a), parse_policy(b), parse_policy(c)
    assert pa.digest == pb.digest != pc.digest
    assert len(pa.digest) == 64
    assert parse_policy(policy_document(pa)).digest == pa.digest


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        pytest.param("spec.tenants[0].weight", 0, "spec.tenants[0].weight: must be > 0", id="zero-weight"),
        pytest.param("spec.tenants[0].quotas.H100.nominal", "8", "spec.tenants[0].quotas.H100.nominal: expected an integer",
                     id="string-quota"),
        pytest.param("spec.fallback.mode", "sometimes", "spec.fallback.mode: must be one of immediate, strict, "
                     "wait-for-preferred, adaptive", id="unknown-fallback-mode"),
        pytest.param("spec.fallback.maxWait", "soon", "spec.fallback.maxWait: invalid duration 'soon'",
                     id="bad-max-wait"),
        pytest.param("spec.retry.backoffCap", "100ms", "spec.retry.backoffCap: must be >= backoffBase", id="cap-below-base"),
        pytest.param("spec.retry.retryable", ["flaky"], "spec.retry.retryable[0]: unknown class 'flaky'",
                     id="unknown-retry-class"),
        pytest.param("spec.fairness.usageHalfLife", "soon", "spec.fairness.usageHalfLife: invalid duration 'soon'",
                     id="bad-duration"),
        pytest.param("spec.tenants[1].namespaces", ["research"], "spec.tenants[1].namespaces: namespace 'research' "
                     "already belongs to tenant 'research'", id="namespace-in-two-tenants"),
        pytest.param("spec.version", "v2\tnight", "spec.version: 'v2\\tnight': control characters are not allowed in a "
                     "policy version", id="version-with-a-tab"),
        pytest.param("spec.tenants[0].name", "(others)", "spec.tenants[0].name: '(others)' is reserved for the other "
                     "tenants in aggregates", id="reserved-tenant-name"),
        pytest.param("spec.tenants[0].name", "team\na", "spec.tenants[0].name: 'team\\na': control characters are not "
                     "allowed in a tenant name", id="tenant-name-with-a-newline"),
        pytest.param("spec.tenants[0].quotas.B200", {"nominal": 1}, "spec.tenants[0].quotas.B200: model is not produced",
                     id="quota-for-unknown-model"),
        pytest.param("spec.preemption", {"enabled": True, "minRuntime": "soon"},
                     "spec.preemption.minRuntime: invalid duration 'soon'", id="bad-min-runtime"),
        pytest.param("spec.preemption", {"enabled": "yes"}, "spec.preemption.enabled: expected true or false",
                     id="preemption-not-boolean"),
        pytest.param("spec.preemption", {"enabled": True, "victims": "any"}, "spec.preemption.victims: unknown field",
                     id="preemption-unknown-field"),
        pytest.param("spec.colour", "blue", "spec.colour: unknown field", id="unknown-field"),
        pytest.param("spec.deviceModels", [{"model": "X", "match": "("}], "spec.deviceModels[0].match: invalid regular",
                     id="bad-regex"),
        pytest.param("apiVersion", "v1", "apiVersion: must be claimtrail.io/v1alpha1", id="wrong-api-version"),
        pytest.param("spec.fairness.deferAboveShare", "yes", "spec.fairness.deferAboveShare: expected true or false",
                     id="defer-not-boolean"),
    ],
)
def test_validation_names_the_field(path, value, message):
    doc = _doc()
    target = doc
    parts = path.replace("]", "").replace("[", ".").split(".")
    for p in parts[:-1]:
        target = target[int(p)] if p.isdigit() else target[p]
    target[int(parts[-1]) if parts[-1].isdigit() else parts[-1]] = value
    with pytest.raises(PolicyError) as err:
        parse_policy(doc)
    assert str(err.value).startswith("Policy team-quotas: ")
    assert message in str(err.value)
    assert any(message in str(e) for e in policy_findings(doc))


def test_missing_version_and_name_are_reported_together():
    errors = policy_findings({"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "spec": {}})
    assert [e.path for e in errors] == ["metadata.name", "spec.version"]


@pytest.mark.parametrize(
    ("devices", "expected"),
    [
        pytest.param({"H100": 16, "A100": 8}, [], id="fits-exactly"),
        pytest.param({"H100": 15, "A100": 8}, ["quotas.H100.nominal: sum of nominal quota 16 exceeds the 15 H100"],
                     id="h100-over-committed"),
        pytest.param({}, ["16 exceeds the 0 H100", "8 exceeds the 0 A100"], id="no-devices"),
    ],
)
def test_capacity_findings_flag_over_commitment(devices, expected):
    found = capacity_findings(parse_policy(_doc()), devices)
    assert len(found) == len(expected)
    for text in expected:
        assert any(text in f for f in found), found


@pytest.mark.parametrize(
    ("fallback", "mode", "max_wait_ms"),
    [
        pytest.param({"mode": "adaptive", "maxWait": "15m"}, "adaptive", 900_000, id="adaptive-with-its-max-wait"),
        pytest.param({"mode": "adaptive"}, "adaptive", 600_000, id="adaptive-max-wait-defaults-to-10m"),
        pytest.param({"mode": "adaptive", "maxWait": 90}, "adaptive", 90_000, id="max-wait-in-seconds"),
    ],
)
def test_adaptive_fallback_parses(fallback, mode, max_wait_ms):
    p = parse_policy({"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "a"},
                      "spec": {"version": "1", "fallback": fallback}})
    assert (p.fallback_mode, p.fallback_max_wait_ms) == (mode, max_wait_ms)
    assert parse_policy(policy_document(p)).digest == p.digest


@pytest.mark.parametrize(
    ("preemption", "document", "min_runtime_ms"),
    [
        pytest.param(None, {"enabled": False}, 600_000, id="absent"),
        pytest.param({"enabled": True}, {"enabled": True, "minRuntime": "600000ms"}, 600_000, id="on-default-runtime"),
        pytest.param({"enabled": True, "minRuntime": "20m"}, {"enabled": True, "minRuntime": "1200000ms"}, 1_200_000,
                     id="on-own-runtime"),
        pytest.param({"enabled": False, "minRuntime": "20m"}, {"enabled": False, "minRuntime": "1200000ms"},
                     1_200_000, id="off-own-runtime-kept"),
        pytest.param({"enabled": False, "minRuntime": "10m"}, {"enabled": False}, 600_000, id="off-default-runtime"),
        pytest.param({"enabled": True, "basis": "fairShare"},
                     {"enabled": True, "minRuntime": "600000ms", "basis": "fairShare"}, 600_000, id="on-fair-share"),
        pytest.param({"enabled": True, "basis": "quota"}, {"enabled": True, "minRuntime": "600000ms"}, 600_000,
                     id="on-quota-basis-spelled-out"),
    ],
)
def test_policy_document_of_preemption_parses_back_to_the_same_digest(preemption, document, min_runtime_ms):
    spec = {"version": "1", **({} if preemption is None else {"preemption": preemption})}
    p = parse_policy({"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "a"}, "spec": spec})
    assert p.preemption_min_runtime_ms == min_runtime_ms
    assert policy_document(p)["spec"]["preemption"] == document
    assert parse_policy(policy_document(p)).digest == p.digest


@pytest.mark.parametrize(
    ("text", "whole"),
    [
        pytest.param("1e9", False, id="no-dot-no-sign"),
        pytest.param("1.0e9", False, id="dot-no-sign"),
        pytest.param("-2.5E3", False, id="negative-upper-case"),
        pytest.param(".5e3", False, id="no-units"),
        pytest.param("5.e3", False, id="no-fraction"),
        pytest.param("1e3", True, id="a-whole-number"),
    ],
)
def test_the_written_number_an_exponent_hint_gives_is_read_by_yaml_as_that_number(text, whole):
    assert isinstance(yaml.safe_load(text), str)
    hint = yaml_exponent_hint(text, whole=whole)
    written = hint.rsplit("write ", 1)[1].rstrip(")")
    assert yaml.safe_load(written) == float(text)
    assert isinstance(yaml.safe_load(written), int if whole else float)
