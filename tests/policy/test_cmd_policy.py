"""``claimtrail policy check``: exit codes, field-naming errors and the over-commitment flag."""

import os
import re
from pathlib import Path

import pytest

from audit.cli.main import main

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures")
TEAM = os.path.join(FIXTURES, "policy", "team-quotas.yaml")


def test_policy_with_too_few_devices_is_flagged(capsys):
    # the file's slice has 2 H100 and 1 A100; the quotas promise 16 H100 and 8 A100
    assert main(["policy", "check", TEAM]) == 1
    out, err = capsys.readouterr()
    assert "Policy team-quotas version 7: valid" in out
    assert "devices: A100 1, H100 2" in out
    assert "warning: Policy team-quotas: spec.tenants[*].quotas.H100.nominal: sum of nominal quota 16 exceeds the 2" in err


def test_scenario_with_enough_devices_passes(capsys):
    path = os.path.join(FIXTURES, "scenarios", "small-cluster.yaml")
    assert main(["policy", "check", path]) == 0
    assert "devices: A100 16, H100 16, L40S 8" in capsys.readouterr().out


@pytest.mark.parametrize(("cluster", "devices"), [
    pytest.param("small-cluster.yaml", "A100 16, H100 16, L40S 8", id="the-cluster-given-alone"),
    pytest.param("fairness.yaml", "H100 32", id="another-cluster-replaces-the-files-own"),
])
def test_a_cluster_given_apart_is_counted_instead_of_the_files_own(capsys, cluster, devices):
    scenario = os.path.join(FIXTURES, "scenarios", "small-cluster.yaml")
    assert main(["policy", "check", scenario, "--cluster", os.path.join(FIXTURES, "scenarios", cluster)]) in (0, 1)
    assert f"devices: {devices}" in capsys.readouterr().out


def test_a_cluster_file_with_no_device_is_refused(tmp_path, capsys):
    empty = tmp_path / "empty.yaml"
    empty.write_text("kind: Node\nmetadata: {name: n}\n")
    assert main(["policy", "check", TEAM, "--cluster", str(empty)]) == 2
    assert capsys.readouterr().err == (f"claimtrail policy: --cluster {empty}: no ResourceSlice device or Workload "
                                       "nodePool to check the quotas against\n")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        pytest.param("apiVersion: claimtrail.io/v1alpha1\nkind: Policy\nmetadata: {name: p}\nspec: {version: '1', "
                     "mixedModels: maybe}\n", "spec.mixedModels: expected true or false", id="bad-field"),
        pytest.param("kind: Node\nmetadata: {name: n}\n", "no kind: Policy document found", id="no-policy"),
        pytest.param("spec: [unclosed\n", "invalid YAML", id="bad-yaml"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(tmp_path, capsys, content, message):
    f = tmp_path / "p.yaml"
    f.write_text(content)
    assert main(["policy", "check", str(f)]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "Traceback" not in err


def test_missing_file_names_the_file(capsys):
    assert main(["policy", "check", "/nonexistent/policy.yaml"]) == 2
    assert "/nonexistent/policy.yaml: cannot read file: No such file or directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("content", "position"),
    [
        pytest.param("apiVersion: claimtrail.io/v1alpha1\nkind: Policy\nspec:\n  tenants: [a\n", "line 5, column 1",
                     id="unclosed-flow-sequence"),
        pytest.param("kind: Policy\nspec:\n  version: '1'\n   weights: 2\n", "line 4, column 4", id="bad-indentation"),
        pytest.param("kind: Policy\nspec: {version: \"1}\n", "line 3, column 1", id="unclosed-quote"),
    ],
)
def test_bad_yaml_names_the_line_and_column(tmp_path, capsys, content, position):
    f = tmp_path / "p.yaml"
    f.write_text(content)
    assert main(["policy", "check", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"claimtrail policy: {f}: invalid YAML: ") and err.endswith(f" ({position})\n")
    assert len(err.splitlines()) == 1


_HEAD = "apiVersion: claimtrail.io/v1alpha1\nkind: Policy\nmetadata: {name: p}\nspec:\n  version: '1'\n"


@pytest.mark.parametrize(("spec", "message"), [
    pytest.param("  fairness: {mode: \"off\", deferAboveShare: true}\n",
                 "Policy p: spec.fairness.deferAboveShare: has no effect with spec.fairness.mode off "
                 "(no shares are computed)", id="deferral-without-fairness"),
    pytest.param("  fairness: {mode: \"off\", waitAgingPerHour: 2}\n",
                 "Policy p: spec.fairness.waitAgingPerHour: has no effect with spec.fairness.mode off "
                 "(the order is plain FIFO)", id="aging-without-fairness"),
    pytest.param("  fairness: {mode: \"off\", usageHalfLife: 2h}\n",
                 "Policy p: spec.fairness.usageHalfLife: has no effect with spec.fairness.mode off "
                 "(no usage is weighed)", id="half-life-without-fairness"),
    pytest.param("  fallback: {mode: strict, regretWindow: 30m}\n",
                 "Policy p: spec.fallback.regretWindow: has no effect with mode strict (no pod falls back, so none "
                 "is regretted)", id="regret-window-without-fallbacks"),
    pytest.param("  fallback: {mode: immediate, wait: 5m}\n",
                 "Policy p: spec.fallback.wait: only applies to mode wait-for-preferred (mode is immediate)",
                 id="fallback-wait-without-waiting"),
    pytest.param("  fallback: {mode: wait-for-preferred, maxWait: 5m}\n",
                 "Policy p: spec.fallback.maxWait: only applies to mode adaptive (mode is wait-for-preferred)",
                 id="max-wait-without-adaptive"),
    pytest.param("  fallback: {mode: adaptive, wait: 5m}\n",
                 "Policy p: spec.fallback.wait: only applies to mode wait-for-preferred (mode is adaptive)",
                 id="fixed-wait-with-adaptive"),
    pytest.param("  tenants:\n    - {name: a, quotas: {H100: {nominal: 4, borrowingLimit: 4}}}\n"
                 "    - {name: b, quotas: {A100: {nominal: 4}}}\n",
                 "Policy p: spec.tenants[0].quotas.H100.borrowingLimit: no other tenant has nominal H100 quota to lend",
                 id="borrowing-with-no-lender"),
    pytest.param("  preemption: {enabled: true, minRuntime: 10m}\n"
                 "  tenants:\n    - {name: a, quotas: {H100: {nominal: 0, borrowingLimit: 0}}}\n",
                 "Policy p: spec.preemption.enabled: reclaim needs nominal quota, but no tenant has a nominal "
                 "quota above 0 for any model (spec.tenants[*].quotas; spec.preemption.basis: fairShare reclaims "
                 "fair shares instead)", id="reclaim-without-nominal-quota"),
    pytest.param("  preemption: {enabled: false, minRuntime: 10m}\n",
                 "Policy p: spec.preemption.minRuntime: has no effect without spec.preemption.enabled true "
                 "(nothing is ever preempted)", id="min-runtime-without-reclaim"),
    pytest.param("  preemption: {basis: fairShare}\n",
                 "Policy p: spec.preemption.basis: has no effect without spec.preemption.enabled true "
                 "(nothing is ever preempted)", id="basis-without-reclaim"),
    pytest.param("  fairness: {mode: \"off\"}\n  preemption: {enabled: true, basis: fairShare}\n",
                 "Policy p: spec.preemption.basis: fairShare reclaims DRF entitlements, but spec.fairness.mode is "
                 "off (no entitlement is computed)", id="fair-share-reclaim-without-fairness"),
])
def test_a_contradiction_is_refused_in_one_line(tmp_path, capsys, spec, message):
    f = tmp_path / "p.yaml"
    f.write_text(_HEAD + spec)
    assert main(["policy", "check", str(f)]) == 2
    err = capsys.readouterr().err
    assert err == f"{f}: {message}\n"


def test_the_same_settings_without_contradiction_pass(tmp_path, capsys):
    f = tmp_path / "p.yaml"
    f.write_text(_HEAD + "  fairness: {mode: drf, deferAboveShare: true, waitAgingPerHour: 2}\n"
                 "  fallback: {mode: wait-for-preferred, wait: 5m}\n"
                 "  tenants:\n    - {name: a, quotas: {H100: {nominal: 4, borrowingLimit: 4}}}\n"
                 "    - {name: b, quotas: {H100: {nominal: 4}}}\n"
                 "  preemption: {enabled: true, minRuntime: 10m}\n")
    assert main(["policy", "check", str(f)]) == 0
    assert capsys.readouterr().err == ""


def test_reclaim_of_fair_shares_needs_no_nominal_quota(tmp_path, capsys):
    f = tmp_path / "p.yaml"
    f.write_text(_HEAD + "  preemption: {enabled: true, basis: fairShare}\n")
    assert main(["policy", "check", str(f)]) == 0
    assert capsys.readouterr().err == ""


_PENDING_DUMP = os.path.join(FIXTURES, "explain", "cluster-pending.yaml")
_COMMANDS = {
    "policy-check": lambda f: ["policy", "check", f],
    "simulate": lambda f: ["simulate", "--quiet", "--hours", "0.1", "--policy", f],
    "why": lambda f: ["why", "--dump", _PENDING_DUMP, "team-a/train-1", "--model", "H100", "--policy", f],
}


@pytest.mark.parametrize("command", sorted(_COMMANDS))
@pytest.mark.parametrize(("content", "message"), [
    pytest.param((_HEAD + "  tenants: [{name: a, weight: .nan}]\n").encode(),
                 "Policy p: spec.tenants[0].weight: must be a finite number", id="nan-weight"),
    pytest.param((_HEAD + "  tenants: [{name: a, weight: .inf}]\n").encode(),
                 "Policy p: spec.tenants[0].weight: must be a finite number", id="infinite-weight"),
    pytest.param((_HEAD + "  fairness: {waitAgingPerHour: .nan}\n").encode(),
                 "Policy p: spec.fairness.waitAgingPerHour: must be a finite number", id="nan-aging"),
    pytest.param((_HEAD + "  deviceModels: [{model: H100, prefix: NVIDIA H100, h100Equivalent: .nan}]\n").encode(),
                 "Policy p: spec.deviceModels[0].h100Equivalent: must be a finite number", id="nan-h100-equivalent"),
    pytest.param((_HEAD + "  retry: {backoffBase: .inf}\n").encode(),
                 "Policy p: spec.retry.backoffBase: must be a finite number", id="infinite-duration"),
    pytest.param(b"\xff\xfe\x00kind: Policy\n", "not UTF-8 text", id="binary-file"),
])
def test_a_policy_no_number_or_text_can_be_read_from_is_refused_in_one_line(tmp_path, capsys, command, content,
                                                                              message):
    f = tmp_path / "p.yaml"
    f.write_bytes(content)
    assert main(_COMMANDS[command](str(f))) == 2
    err = capsys.readouterr().err
    assert message in err and str(f) in err
    assert len(err.splitlines()) == 1


def _refused(tmp_path, capsys, document: str) -> str:
    """The one line ``policy check`` refuses ``document`` with, less its file's name."""
    f = tmp_path / "p.yaml"
    f.write_text(document)
    assert main(["policy", "check", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{f}: ") and err.count("\n") == 1, err
    return err.removeprefix(f"{f}: ").removesuffix("\n")


@pytest.mark.parametrize(("spec", "message"), [
    pytest.param("  fairness: {mode: off}\n", "Policy p: spec.fairness.mode: expected a string, got bool (YAML reads "
                 "a bare off/on/yes/no as a boolean: quote it)", id="bare-off"),
    pytest.param("  fallback: {mode: no}\n", "Policy p: spec.fallback.mode: expected a string, got bool (YAML reads "
                 "a bare off/on/yes/no as a boolean: quote it)", id="bare-no"),
    pytest.param("  fairness: {mode: 5}\n", "Policy p: spec.fairness.mode: expected a string, got int",
                 id="number-gets-no-boolean-hint"),
])
def test_a_boolean_where_a_string_belongs_says_to_quote_it(tmp_path, capsys, spec, message):
    assert _refused(tmp_path, capsys, _HEAD + spec) == message


_REPO = Path(__file__).resolve().parents[2]
_FAIRNESS_SNIPPETS = sorted({(str(doc.relative_to(_REPO)), snippet)
                             for doc in [_REPO / "README.md", *sorted((_REPO / "docs").rglob("*.md"))]
                             for snippet in re.findall(r"`(fairness: \{[^`]*\})`", doc.read_text(encoding="utf-8"))})


@pytest.mark.parametrize(("doc", "snippet"), _FAIRNESS_SNIPPETS, ids=[f"{d}:{s}" for d, s in _FAIRNESS_SNIPPETS])
def test_the_fairness_settings_the_docs_show_can_be_copied_as_they_are(tmp_path, capsys, doc, snippet):
    f = tmp_path / "p.yaml"
    f.write_text(_HEAD + f"  {snippet}\n")
    assert main(["policy", "check", str(f)]) == 0, capsys.readouterr().err


def test_the_docs_show_fairness_settings():
    assert {doc for doc, _ in _FAIRNESS_SNIPPETS} >= {"README.md", "docs/performance.md"}


QUOTA_POLICY = ("apiVersion: claimtrail.io/v1alpha1\nkind: Policy\nmetadata: {name: p}\n"
                "spec: {version: '1', tenants: [{name: a, quotas: {H100: {nominal: 4}}}]}\n")
SLICE = "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\n"
POOLS = "apiVersion: claimtrail.io/v1alpha1\nkind: Workload\nmetadata: {name: w}\nspec: {nodePools: [%s]}\n"


@pytest.mark.parametrize(
    ("cluster", "message"),
    [
        pytest.param(POOLS % "{model: H100, nodes: two}", "--cluster {f}#0 Workload w: spec.nodePools[0].nodes: "
                     "expected a whole number >= 0, got 'two'", id="nodes-in-words"),
        pytest.param(POOLS % "{model: H100, nodes: 1.5}", "--cluster {f}#0 Workload w: spec.nodePools[0].nodes: "
                     "expected a whole number >= 0, got 1.5", id="half-a-node"),
        pytest.param(POOLS % "{model: H100, nodes: 2, devicePlugin: 'false'}", "--cluster {f}#0 Workload w: "
                     "spec.nodePools[0].devicePlugin: expected true or false, got str 'false'", id="quoted-false"),
        pytest.param("apiVersion: claimtrail.io/v1alpha1\nkind: Workload\nmetadata: {name: w}\nspec: [1]\n",
                     "--cluster {f}#0 Workload w: spec: expected a mapping", id="workload-spec-a-list"),
        pytest.param(SLICE + "spec: [1]\n", "--cluster {f}#0: ResourceSlice s: spec: expected an object, got list",
                     id="slice-spec-a-list"),
        pytest.param(SLICE + "spec: {driver: gpu.nvidia.com, devices: [{name: g, attributes: [productName]}]}\n",
                     "--cluster {f}#0: ResourceSlice s: spec.devices[0].attributes: expected an object, got list",
                     id="attributes-a-list"),
    ],
)
def test_a_cluster_whose_devices_cannot_be_counted_is_named_in_one_line(tmp_path, capsys, cluster, message):
    policy, f = tmp_path / "p.yaml", tmp_path / "c.yaml"
    policy.write_text(QUOTA_POLICY)
    f.write_text(cluster)
    assert main(["policy", "check", str(policy), "--cluster", str(f)]) == 2
    err = capsys.readouterr().err
    assert err == f"claimtrail policy: {message.format(f=f)}\n"


@pytest.mark.parametrize(
    ("quota", "message"),
    [
        pytest.param("{nominal: -4}", "spec.tenants[0].quotas.H100.nominal: must be >= 0", id="negative"),
        pytest.param("{nominal: four}", "spec.tenants[0].quotas.H100.nominal: expected an integer, got str",
                     id="in-words"),
        pytest.param("{nominal: 2.5}", "spec.tenants[0].quotas.H100.nominal: expected an integer, got float",
                     id="fraction"),
        pytest.param("{borrowingLimit: 2}", "spec.tenants[0].quotas.H100.nominal: required field missing",
                     id="missing"),
        pytest.param("{nominal: null}", "spec.tenants[0].quotas.H100.nominal: required field missing", id="null"),
    ],
)
def test_a_bad_nominal_quota_is_named_once_for_what_is_wrong(tmp_path, capsys, quota, message):
    assert _refused(tmp_path, capsys, "apiVersion: claimtrail.io/v1alpha1\nkind: Policy\nmetadata: {name: p}\n"
                    f"spec: {{version: '1', tenants: [{{name: a, quotas: {{H100: {quota}}}}}]}}\n") == f"Policy p: {message}"


@pytest.mark.parametrize(
    ("models", "message"),
    [
        pytest.param("[]", "spec.tenants[0].quotas.H100: model is not produced by any spec.deviceModels rule (the "
                     "table is empty: every device is model unknown)", id="empty-table"),
        pytest.param("[{model: A100, prefix: NVIDIA A100}]", "spec.tenants[0].quotas.H100: model is not produced by "
                     "any spec.deviceModels rule", id="table-of-other-models"),
    ],
)
def test_a_quota_for_a_model_the_table_cannot_produce_is_refused(tmp_path, capsys, models, message):
    assert _refused(tmp_path, capsys, "apiVersion: claimtrail.io/v1alpha1\nkind: Policy\nmetadata: {name: p}\n"
                    f"spec: {{version: '1', deviceModels: {models}, tenants: [{{name: a, quotas: {{H100: {{nominal: 4}}}}}}]}}\n"
                    ) == f"Policy p: {message}"


@pytest.mark.parametrize(
    "models",
    [
        pytest.param("[{model: H100, prefix: NVIDIA H100}]", id="a-rule-for-the-model"),
        pytest.param("[{model: '\\1', match: '^NVIDIA (\\w+)'}]", id="a-rule-that-keeps-the-attribute-text"),
    ],
)
def test_a_quota_for_a_model_the_table_can_produce_passes(tmp_path, capsys, models):
    f = tmp_path / "p.yaml"
    f.write_text("apiVersion: claimtrail.io/v1alpha1\nkind: Policy\nmetadata: {name: p}\n"
                 f"spec: {{version: '1', deviceModels: {models}, tenants: [{{name: a, quotas: {{H100: {{nominal: 4}}}}}}]}}\n")
    assert main(["policy", "check", str(f)]) == 0, capsys.readouterr().err


_NUMBER_HINT = '(YAML reads a bare number as a number, 1.10 as 1.1: quote it, as in "1.10")'


@pytest.mark.parametrize(
    ("document", "message"),
    [
        pytest.param("metadata: {name: p}\nspec: {version: 1.10}\n",
                     f"Policy p: spec.version: expected a string, got float {_NUMBER_HINT}", id="version-1.10"),
        pytest.param("metadata: {name: p}\nspec: {version: 7}\n",
                     f"Policy p: spec.version: expected a string, got int {_NUMBER_HINT}", id="version-7"),
        pytest.param("metadata: {name: p}\nspec: {version: 2026-01-02}\n",
                     'Policy p: spec.version: expected a string, got date (YAML reads a bare date as a date: quote it, '
                     'as in "2026-01-02")', id="version-a-date"),
        pytest.param("metadata: {name: 2026}\nspec: {version: '1'}\n",
                     f"Policy ?: metadata.name: expected a string, got int {_NUMBER_HINT}", id="name-a-year"),
        pytest.param("metadata: {name: p}\nspec: {version: '1', tenants: [{name: 1.10}]}\n",
                     f"Policy p: spec.tenants[0].name: expected a string, got float {_NUMBER_HINT}", id="tenant-name"),
        pytest.param("metadata: {name: p}\nspec: {version: '1', tenants: [{name: a, namespaces: [a, 2024]}]}\n",
                     f"Policy p: spec.tenants[0].namespaces[1]: expected a string, got int {_NUMBER_HINT}",
                     id="namespace"),
        pytest.param("metadata: {name: p}\nspec: {version: '1', tenants: [{name: a, quotas: {H100: {nominal: 1}, "
                     "100: {nominal: 1}}}]}\n",
                     f"Policy p: spec.tenants[0].quotas.100: expected a string, got int {_NUMBER_HINT}",
                     id="quota-model"),
        pytest.param("metadata: {name: p}\nspec: {version: '1', deviceModels: [{model: 100, prefix: NVIDIA 100}]}\n",
                     f"Policy p: spec.deviceModels[0].model: expected a string, got int {_NUMBER_HINT}",
                     id="table-model"),
    ],
)
def test_text_yaml_read_as_a_number_or_date_is_refused_with_a_hint_to_quote_it(tmp_path, capsys, document, message):
    f = tmp_path / "p.yaml"
    f.write_text("apiVersion: claimtrail.io/v1alpha1\nkind: Policy\n" + document)
    assert main(["policy", "check", str(f)]) == 2
    assert capsys.readouterr().err == f"{f}: {message}\n"


def test_a_quoted_version_keeps_its_text(tmp_path, capsys):
    f = tmp_path / "p.yaml"
    f.write_text(_HEAD.replace("'1'", "'1.10'"))
    assert main(["policy", "check", str(f)]) == 0
    assert "Policy p version 1.10: valid" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("  tenants: [{name: a, weight: 1e2}]\n", "spec.tenants[0].weight: expected a number, got str (YAML "
                     "reads 1e2 as text, not a number: write 1.0e+2)", id="a-weight"),
        pytest.param("  retry: {maxAttempts: 1e1}\n", "spec.retry.maxAttempts: expected an integer, got str (YAML "
                     "reads 1e1 as text, not a number: write 10)", id="an-integer"),
        pytest.param("  retry: {backoffBase: 1e0}\n", "spec.retry.backoffBase: invalid duration '1e0' (expected e.g. "
                     "90s, 10m, 1h30m, 250ms) (YAML reads 1e0 as text, not a number: write 1.0e+0)", id="a-duration"),
        pytest.param("  tenants: [{name: a, weight: many}]\n", "spec.tenants[0].weight: expected a number, got str",
                     id="a-word-gets-no-hint"),
    ],
)
def test_a_number_in_exponent_notation_yaml_reads_as_text_says_how_to_write_it(tmp_path, capsys, spec, message):
    assert _refused(tmp_path, capsys, _HEAD + spec) == f"Policy p: {message}"
