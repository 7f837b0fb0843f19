"""Scenario files with the mistakes users make: each is refused in one line naming the field."""

import pytest

from audit.cli.main import main

TEMPLATE = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: t, namespace: default}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly: {deviceClassName: gpu.nvidia.com, count: 1}
---
"""


def refused(tmp_path, capsys, spec: str, metadata: str = "{name: w}") -> str:
    """The one line ``simulate`` prints for a scenario with ``spec`` as its Workload's spec."""
    f = tmp_path / "s.yaml"
    f.write_text(f"{TEMPLATE}apiVersion: claimtrail.io/v1alpha1\nkind: Workload\nmetadata: {metadata}\nspec: {spec}\n")
    assert main(["simulate", "--quiet", "--scenario", str(f), "--hours", "1"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    ("sizes", "key"),
    [
        pytest.param("{a: 1}", "a", id="letters"),
        pytest.param("{'1': 0.5, 'two': 0.5}", "two", id="a-word-beside-a-count"),
        pytest.param("{'-1': 1}", "-1", id="negative"),
        pytest.param("{'1.5': 1}", "1.5", id="fraction"),
    ],
)
def test_a_size_that_is_not_a_device_count_is_named(tmp_path, capsys, sizes, key):
    err = refused(tmp_path, capsys, f"{{tenants: [{{namespace: a, templates: [{{name: t}}], sizes: {sizes}}}]}}")
    assert f"Workload w: spec.tenants[0].sizes.{key}: keys are device counts >= 1" in err


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        pytest.param("w", "Workload: metadata: expected a mapping, got str", id="a-name-for-metadata"),
        pytest.param("[w]", "Workload: metadata: expected a mapping, got list", id="a-list"),
        pytest.param("{name: [w]}", "Workload: metadata.name: expected a string, got list", id="a-list-for-name"),
    ],
)
def test_workload_metadata_that_is_not_a_mapping_is_named(tmp_path, capsys, metadata, message):
    err = refused(tmp_path, capsys, "{hours: 1}", metadata)
    assert message in err


@pytest.mark.parametrize(
    ("value", "got"),
    [
        pytest.param("'false'", "str 'false'", id="quoted-false"),
        pytest.param("'no'", "str 'no'", id="quoted-no"),
        pytest.param("0", "int 0", id="zero"),
        pytest.param("1", "int 1", id="one"),
    ],
)
def test_a_device_plugin_flag_that_is_not_a_boolean_is_named(tmp_path, capsys, value, got):
    err = refused(tmp_path, capsys, f"{{nodePools: [{{model: H100, nodes: 1, devicePlugin: {value}}}]}}")
    assert f"Workload w: spec.nodePools[0].devicePlugin: expected true or false, got {got}" in err


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("{nodePools: [{model: H100, nodes: 2.5}]}", "spec.nodePools[0].nodes: expected a whole number >= 0, "
                     "got 2.5", id="half-a-node"),
        pytest.param("{nodePools: [{model: H100, nodes: '2'}]}", "spec.nodePools[0].nodes: expected a whole number >= 0, "
                     "got '2'", id="quoted-nodes"),
        pytest.param("{nodePools: [{model: H100, nodes: -1}]}", "spec.nodePools[0].nodes: expected a whole number >= 0, "
                     "got -1", id="negative-nodes"),
        pytest.param("{nodePools: [{model: H100, nodes: 1, gpusPerNode: 7.5}]}",
                     "spec.nodePools[0].gpusPerNode: expected a whole number >= 1, got 7.5", id="fractional-gpus"),
        pytest.param("{nodePools: [{model: H100, nodes: 1, gpusPerNode: 0}]}",
                     "spec.nodePools[0].gpusPerNode: expected a whole number >= 1, got 0", id="nodes-without-gpus"),
        pytest.param("{tenants: [{namespace: a, templates: [{name: t}], bursts: [{at: 1m, jobs: 2.7}]}]}",
                     "spec.tenants[0].bursts[0].jobs: expected a whole number >= 0, got 2.7", id="fractional-jobs"),
    ],
)
def test_a_count_that_is_not_a_whole_number_is_named(tmp_path, capsys, spec, message):
    assert f"Workload w: {message}" in refused(tmp_path, capsys, spec)


@pytest.mark.parametrize(
    ("hours", "message"),
    [
        pytest.param("0", "spec.hours: must be > 0", id="zero"),
        pytest.param("0.0", "spec.hours: must be > 0", id="zero-float"),
        pytest.param("-1", "spec.hours: expected a finite non-negative number, got -1", id="negative"),
    ],
)
def test_a_workload_of_no_hours_is_refused_as_the_option_is(tmp_path, capsys, hours, message):
    f = tmp_path / "s.yaml"
    f.write_text(f"apiVersion: claimtrail.io/v1alpha1\nkind: Workload\nmetadata: {{name: w}}\n"
                 f"spec: {{hours: {hours}, nodePools: [{{model: H100, nodes: 1}}]}}\n")
    assert main(["simulate", "--quiet", "--scenario", str(f)]) == 2
    assert f"Workload w: {message}" in capsys.readouterr().err


TINY = "apiVersion: claimtrail.io/v1alpha1\nkind: Workload\nmetadata: {name: w}\nspec: {nodePools: [{model: H100, nodes: 1}]}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--hours", "1e9"], "--hours 1e+09: 1e+09 h from 2026-11-02T00:00:00Z: the window would end "
                     "after 9999-12-31T23:59:59.999Z", id="a-million-centuries"),
        pytest.param(["--hours", "1e300"], "--hours 1e+300: 1e+300 h from 2026-11-02T00:00:00Z: the window would end "
                     "after 9999-12-31T23:59:59.999Z", id="beyond-any-integer"),
        pytest.param(["--start", "9999-12-31T23:00:00Z", "--hours", "2"], "--start 9999-12-31T23:00:00Z --hours 2: "
                     "2 h from 9999-12-31T23:00:00.000Z: the window would end after", id="starting-in-the-last-hour"),
        pytest.param(["--start", "9999-12-31T23:30:00Z"], "--start 9999-12-31T23:30:00Z: 24 h from "
                     "9999-12-31T23:30:00.000Z: the window would end after", id="the-scenarios-hours-past-the-end"),
        pytest.param(["--start", "now", "--hours", "1e8"], "--start now --hours 1e+08: the window would start before",
                     id="ending-now-after-ten-thousand-years"),
        pytest.param(["--start", "now", "--hours", "1e12"], "--start now --hours 1e+12: the window would start before",
                     id="ending-now-after-too-many-hours-for-a-timedelta"),
    ],
)
def test_a_window_past_the_years_times_can_be_written_in_is_refused(tmp_path, capsys, argv, message):
    f = tmp_path / "s.yaml"
    f.write_text(TINY)
    assert main(["simulate", "--quiet", "--scenario", str(f), *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--trace", "spot-2026", "--hours", "1e9"], "--hours 1e+09: 1e+09 h from 2026-11-02T00:00:00Z",
                     id="trace-hours"),
        pytest.param(["--trace", "openb-2023", "--start", "9999-12-31T00:00:00Z", "--hours", "48"],
                     "--start 9999-12-31T00:00:00Z --hours 48: 48 h from", id="trace-start"),
    ],
)
def test_a_trace_window_past_the_years_times_can_be_written_in_is_refused_before_the_trace_is_read(
        capsys, argv, message):
    assert main(["simulate", "--quiet", "--trace-dir", "/nonexistent", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "would end after 9999-12-31T23:59:59.999Z" in err


def test_a_workload_window_past_the_years_times_can_be_written_in_is_named(tmp_path, capsys):
    err = refused(tmp_path, capsys, "{start: '9999-12-31T00:00:00Z', hours: 25, nodePools: [{model: H100, nodes: 1}]}")
    assert ("Workload w: spec.hours: 25 from spec.start 9999-12-31T00:00:00Z: the window would end after "
            "9999-12-31T23:59:59.999Z") in err


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        pytest.param("templates: [{name: t, weight: 0}]", "templates", id="the-one-template"),
        pytest.param("templates: [{name: t, weight: 0}, {name: t, weight: 0.0}]", "templates", id="every-template"),
        pytest.param("templates: [{name: t}], sizes: {'1': 0, '8': 0}", "sizes", id="every-size"),
        pytest.param("templates: [{name: t}], devicePluginModels: {H100: 0}", "devicePluginModels",
                     id="every-pinned-model"),
    ],
)
def test_weights_that_are_all_zero_are_refused(tmp_path, capsys, fields, field):
    err = refused(tmp_path, capsys, "{nodePools: [{model: H100, nodes: 1, devicePlugin: true}], "
                                    f"tenants: [{{namespace: a, {fields}}}]}}")
    assert f"Workload w: spec.tenants[0].{field}: every weight is 0; give at least one a weight > 0" in err


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("{tenants: [{namespace: a, templates: [{name: t}], devicePluginFraction: 10}]}",
                     "spec.tenants[0].devicePluginFraction: a share between 0 and 1, got 10", id="percent-for-fraction"),
        pytest.param("{tenants: [{namespace: a, templates: [{name: t}], devicePluginFraction: 1.5}]}",
                     "spec.tenants[0].devicePluginFraction: a share between 0 and 1, got 1.5", id="fraction-above-1"),
        pytest.param("{disruptions: {bindInterference: 5}}",
                     "spec.disruptions.bindInterference: a share between 0 and 1, got 5", id="percent-for-probability"),
    ],
)
def test_a_share_above_one_is_refused(tmp_path, capsys, spec, message):
    assert f"Workload w: {message}" in refused(tmp_path, capsys, spec)


@pytest.mark.parametrize(
    ("template", "message"),
    [
        pytest.param(TEMPLATE.replace("spec:\n  spec:", "spec:\n  spek:"), "s.yaml#0: ResourceClaimTemplate default/t: "
                     "spec.spek: unknown field", id="typo-in-the-inner-spec"),
        pytest.param(TEMPLATE.replace("spec:\n  spec:", "specs:\n  spec:"), "s.yaml#0: ResourceClaimTemplate default/t: "
                     "specs: unknown field", id="typo-in-the-spec"),
        pytest.param(TEMPLATE.replace("exactly: {deviceClassName: gpu.nvidia.com, count: 1}", "count: 1"),
                     "s.yaml#0: ResourceClaimTemplate default/t: spec.spec.devices.requests[0]", id="request-without-exactly"),
    ],
)
def test_a_template_the_api_server_would_refuse_is_named_before_the_run(tmp_path, capsys, template, message):
    f = tmp_path / "s.yaml"
    f.write_text(template + "apiVersion: claimtrail.io/v1alpha1\nkind: Workload\nmetadata: {name: w}\n"
                 "spec: {nodePools: [{model: H100, nodes: 1}], tenants: [{namespace: a, arrivalsPerHour: 60, "
                 "templates: [{name: t}]}]}\n")
    assert main(["simulate", "--quiet", "--scenario", str(f), "--hours", "1"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("change", "message"),
    [
        pytest.param("{at: 1h}", "spec.policyChanges[0].policy: required field missing", id="no-policy"),
        pytest.param("{at: 1h, policy: null}", "spec.policyChanges[0].policy: required field missing", id="null-policy"),
        pytest.param("{at: 1h, policy: strict.yaml}", "spec.policyChanges[0].policy: expected a mapping, got str",
                     id="a-file-name-for-the-policy"),
        pytest.param("{at: 1h, policy: [a]}", "spec.policyChanges[0].policy: expected a mapping, got list",
                     id="a-list-for-the-policy"),
    ],
)
def test_a_policy_change_without_a_policy_document_names_the_field(tmp_path, capsys, change, message):
    err = refused(tmp_path, capsys, f"{{policyChanges: [{change}]}}")
    assert f"Workload w: {message}\n" in err and "Policy ?" not in err


_NUMBER_HINT = '(YAML reads a bare number as a number, 1.10 as 1.1: quote it, as in "1.10")'


@pytest.mark.parametrize(
    ("spec", "metadata", "message"),
    [
        pytest.param("{hours: 1}", "{name: 2026}", f"Workload: metadata.name: expected a string, got int {_NUMBER_HINT}",
                     id="workload-name"),
        pytest.param("{hours: 1}", "{name: 0}", f"Workload: metadata.name: expected a string, got int {_NUMBER_HINT}",
                     id="workload-name-zero"),
        pytest.param("{cluster: 1.10}", "{name: w}", f"Workload w: spec.cluster: expected a string, got float "
                     f"{_NUMBER_HINT}", id="cluster"),
        pytest.param("{nodePools: [{model: 100, nodes: 1}]}", "{name: w}", "Workload w: spec.nodePools[0].model: "
                     f"expected a string, got int {_NUMBER_HINT}", id="pool-model"),
        pytest.param("{nodePools: [{model: H100, nodes: 1, driverVersion: 580.105}]}", "{name: w}",
                     f"Workload w: spec.nodePools[0].driverVersion: expected a string, got float {_NUMBER_HINT}",
                     id="driver-version"),
        pytest.param("{tenants: [{namespace: 2024, templates: [{name: t}]}]}", "{name: w}",
                     f"Workload w: spec.tenants[0].namespace: expected a string, got int {_NUMBER_HINT}",
                     id="namespace"),
        pytest.param("{nodePools: [{model: '1.10', nodes: 1, devicePlugin: true}], tenants: [{namespace: a, "
                     "templates: [{name: t}], devicePluginModels: {1.10: 1}}]}", "{name: w}",
                     f"Workload w: spec.tenants[0].devicePluginModels.1.1: expected a string, got float {_NUMBER_HINT}",
                     id="pinned-model"),
    ],
)
def test_text_yaml_read_as_a_number_is_refused_with_a_hint_to_quote_it(tmp_path, capsys, spec, metadata, message):
    assert f"{message}\n" in refused(tmp_path, capsys, spec, metadata)


@pytest.mark.parametrize(
    ("tenants", "message"),
    [
        pytest.param("[{namespace: a, templates: [{name: t}]}, {namespace: a, templates: [{name: t}]}]",
                     "spec.tenants[1].namespace: 'a' is already the namespace of spec.tenants[0]", id="next-to-each-other"),
        pytest.param("[{namespace: a, templates: [{name: t}]}, {namespace: b, templates: [{name: t}]}, "
                     "{namespace: a, templates: [{name: t}], arrivalsPerHour: 5}]",
                     "spec.tenants[2].namespace: 'a' is already the namespace of spec.tenants[0]", id="apart"),
    ],
)
def test_two_workload_tenants_in_one_namespace_are_refused(tmp_path, capsys, tenants, message):
    assert f"Workload w: {message}; give each tenant its own\n" in refused(tmp_path, capsys, f"{{tenants: {tenants}}}")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("{hours: 1e9}", "spec.hours: expected a finite non-negative number, got '1e9' (YAML reads 1e9 as "
                     "text, not a number: write 1.0e+9)", id="hours"),
        pytest.param("{hours: 1.5e3}", "spec.hours: expected a finite non-negative number, got '1.5e3' (YAML reads "
                     "1.5e3 as text, not a number: write 1.5e+3)", id="hours-with-a-dot"),
        pytest.param("{nodePools: [{model: H100, nodes: 1e3}]}", "spec.nodePools[0].nodes: expected a whole number >= 0, "
                     "got '1e3' (YAML reads 1e3 as text, not a number: write 1000)", id="a-count"),
        pytest.param("{tenants: [{namespace: a, templates: [{name: t}], arrivalsPerHour: 2E2}]}",
                     "spec.tenants[0].arrivalsPerHour: expected a finite non-negative number, got '2E2' (YAML reads 2E2 "
                     "as text, not a number: write 2.0e+2)", id="a-rate"),
        pytest.param("{tenants: [{namespace: a, templates: [{name: t}], sizes: {'1': 1e-1}}]}",
                     "spec.tenants[0].sizes.1: expected a finite non-negative weight (YAML reads 1e-1 as text, not a "
                     "number: write 1.0e-1)", id="a-size-weight"),
        pytest.param("{tenants: [{namespace: a, templates: [{name: t}], bursts: [{at: 3.6e3, jobs: 1}]}]}",
                     "spec.tenants[0].bursts[0].at: invalid duration '3.6e3' (expected e.g. 90s, 10m, 1h30m, 250ms) "
                     "(YAML reads 3.6e3 as text, not a number: write 3.6e+3)", id="a-duration-in-seconds"),
        pytest.param("{hours: 1e}", "spec.hours: expected a finite non-negative number, got '1e'\n", id="not-a-number"),
        pytest.param("{hours: 1e999}", "spec.hours: expected a finite non-negative number, got '1e999'\n",
                     id="too-large-for-a-float"),
    ],
)
def test_a_number_in_exponent_notation_yaml_reads_as_text_says_how_to_write_it(tmp_path, capsys, spec, message):
    assert f"Workload w: {message}" in refused(tmp_path, capsys, spec)
