"""``claimtrail simulate``: records as JSONL, the event log, the summary table and clear errors."""

import json
import os
from pathlib import Path

import pytest

from audit.cli.main import main
from audit.events import validate_event
from audit.records import validate_record
from audit.world import World

SMALL = os.path.join(os.path.dirname(os.path.dirname(__file__)), "fixtures", "scenarios", "fairness.yaml")


def test_simulate_writes_records_and_events(tmp_path, capsys):
    out, events = tmp_path / "records.jsonl", tmp_path / "events.jsonl"
    assert main(["simulate", "--scenario", SMALL, "--hours", "1", "--seed", "4", "--out", str(out),
                 "--events", str(events)]) == 0
    stdout, stderr = capsys.readouterr()
    records = [validate_record(json.loads(line)) for line in out.read_text().splitlines()]
    evs = [validate_event(json.loads(line)) for line in events.read_text().splitlines()]
    assert records and all(r.cluster == "fairness" for r in records)
    assert f"{len(records):,} decisions" in stdout
    assert "tenant" in stdout and "flood" in stdout and "steady" in stdout
    assert "100%" in stderr
    world = World("fairness")
    for e in evs:
        world.apply(e)
    assert world.seq == evs[-1].seq == len(evs) - 1
    assert {r.seq for r in records} <= {e.seq for e in evs}


def test_simulate_default_scenario_quietly(tmp_path, capsys):
    events = tmp_path / "events.jsonl"
    assert main(["simulate", "--hours", "0.5", "--quiet", "--events", str(events)]) == 0
    stdout, stderr = capsys.readouterr()
    assert "simulated 0.5 h on cluster demo" in stdout
    assert stderr == ""
    # the scenario's burst at 3 h is past this window: the jobs counted are the pods that arrived
    pods = {(e["namespace"], e["name"]) for e in map(json.loads, events.read_text().splitlines())
            if e["object_kind"] == "Pod"}
    assert f"cluster demo: {len(pods):,} jobs," in stdout and len(pods) < 400


A100_TEMPLATE = """---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-a100, namespace: default}
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.nvidia.com
            selectors:
              - cel: {expression: "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA A100')"}
"""
STUCK_TENANT = """    - namespace: stuck
      arrivalsPerHour: 6
      templates: [{name: one-a100}]
      durationMinutes: {median: 30, sigma: 0.2}
"""


def test_a_tenant_that_started_no_pod_shows_no_wait_percentiles(tmp_path, capsys):
    """A third tenant asks only for A100s, which the cluster (all H100) lacks: its pods are created
    and none is ever bound. Its wait percentiles are null, printed "-" as a null rate is, not "0s"
    (pods served at once), beside the other tenants' real waits."""
    with open(SMALL, encoding="utf-8") as f:
        text = f.read()
    text = text.replace("    - {name: steady, namespaces: [steady], weight: 1}\n",
                        "    - {name: steady, namespaces: [steady], weight: 1}\n"
                        "    - {name: stuck, namespaces: [stuck], weight: 1}\n")
    text = text.replace("---\napiVersion: claimtrail.io/v1alpha1\nkind: Workload", A100_TEMPLATE
                        + "---\napiVersion: claimtrail.io/v1alpha1\nkind: Workload") + STUCK_TENANT
    scenario = tmp_path / "stuck.yaml"
    scenario.write_text(text)
    assert main(["simulate", "--quiet", "--scenario", str(scenario), "--hours", "1", "--seed", "4",
                 "--out", str(tmp_path / "r.jsonl"), "--events", str(tmp_path / "e.jsonl")]) == 0
    rows = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines() if line.strip()}
    # tenant, started, wait p50, p95, p99, pending, failed, ...
    assert rows["stuck"][1] == "0" and int(rows["stuck"][5]) + int(rows["stuck"][6]) > 0
    assert rows["stuck"][2:5] == ["-", "-", "-"]
    assert int(rows["flood"][1].replace(",", "")) > 0 and "-" not in rows["flood"][2:5]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--scenario", "/nope.yaml"], "--scenario /nope.yaml: cannot read file: No such file or directory",
                     id="missing-file"),
        pytest.param(["--trace", "philly"], "unknown trace 'philly'", id="unknown-trace"),
        pytest.param(["--trace", "openb-2023", "--trace-dir", "/nope"], "trace file not found", id="missing-trace-dir"),
        pytest.param(["--hours", "-1"], "--hours -1.0: must be a finite number > 0", id="negative-hours"),
        pytest.param(["--hours", "nan"], "--hours nan: must be a finite number > 0", id="nan-hours"),
        pytest.param(["--hours", "inf"], "--hours inf: must be a finite number > 0", id="infinite-hours"),
        pytest.param(["--out", "/tmp/x.parquet", "--hours", "0.1"], "/tmp/x.parquet", id="unsupported-out"),
    ],
)
def test_bad_arguments_give_one_line(argv, message, capsys):
    assert main(["simulate", "--quiet", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_scenario_that_is_not_text_is_refused_in_one_line(tmp_path, capsys):
    f = tmp_path / "s.yaml"
    f.write_bytes(b"\xff\xfe\x00kind: Workload\n")
    assert main(["simulate", "--quiet", "--scenario", str(f)]) == 2
    assert capsys.readouterr().err == f"claimtrail simulate: --scenario {f}: not UTF-8 text\n"


@pytest.mark.parametrize("text", [
    pytest.param("", id="empty-file"),
    pytest.param("apiVersion: claimtrail.io/v1alpha1\nkind: Workload\nmetadata: {name: w}\nspec: {cluster: c}\n",
                 id="workload-without-pools-or-tenants"),
])
def test_a_scenario_with_nothing_to_simulate_is_refused(tmp_path, capsys, text):
    f = tmp_path / "s.yaml"
    f.write_text(text)
    assert main(["simulate", "--quiet", "--scenario", str(f)]) == 2
    assert capsys.readouterr().err == (f"claimtrail simulate: --scenario {f}: no Workload with nodePools or tenants, "
                                       "no cluster objects: nothing to simulate (see "
                                       "ingest/simulate/scenarios/cluster-day.yaml)\n")


@pytest.mark.parametrize(
    ("bad", "kept"),
    [
        pytest.param("out", "events", id="unwritable-records-keep-the-event-log"),
        pytest.param("events", "out", id="unwritable-event-log-keeps-the-records"),
    ],
)
def test_a_refused_target_leaves_the_earlier_run_intact(tmp_path, capsys, bad, kept):
    """Every output is opened before an earlier run's file is emptied, so a target that cannot
    be written costs nothing of what the earlier run wrote."""
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    earlier = tmp_path / f"{kept}.jsonl"
    earlier.write_text('{"earlier": "run"}\n')
    targets = {kept: str(earlier), bad: str(blocker / f"{bad}.jsonl")}
    assert main(["simulate", "--quiet", "--hours", "0.1", "--out", targets["out"], "--events", targets["events"]]) == 2
    err = capsys.readouterr().err
    assert f"{blocker / bad}.jsonl: cannot open for writing" in err and "Traceback" not in err
    assert earlier.read_text() == '{"earlier": "run"}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([blocker.name, earlier.name])


def test_a_second_run_replaces_the_first_runs_files(tmp_path):
    out, events = tmp_path / "r.jsonl", tmp_path / "e.jsonl"
    argv = ["simulate", "--quiet", "--hours", "0.2", "--out", str(out), "--events", str(events)]
    assert main(argv) == 0
    first = out.read_text(), events.read_text()
    assert main(argv) == 0
    assert (out.read_text(), events.read_text()) == first


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("{tenants: [{namespace: a, templates: [{name: t}], sizes: {'0': 1}}]}",
                     "spec.tenants[0].sizes.0: keys are device counts >= 1", id="zero-size"),
        pytest.param("{tenants: [{namespace: a, templates: [{name: t}], arrivalPerHour: 3}]}",
                     "spec.tenants[0].arrivalPerHour: unknown field", id="typo-in-tenant"),
        pytest.param("{disruptions: {healthFlaps: 1}}", "spec.disruptions.healthFlaps: unknown field",
                     id="typo-in-disruptions"),
        pytest.param("{nodePools: [{model: H100, gpusPerNode: 8}]}", "spec.nodePools[0].nodes: required field missing",
                     id="pool-without-nodes"),
        pytest.param("{tenants: [{namespace: a, templates: [{name: t}], bursts: [{at: soon, jobs: 3}]}]}",
                     "spec.tenants[0].bursts[0].at: invalid duration 'soon'", id="bad-burst-time"),
        pytest.param("{tenants: [{namespace: a, templates: [{name: missing}]}]}",
                     "spec.tenants[0].templates[0].name: no ResourceClaimTemplate 'missing'", id="unknown-template"),
        pytest.param("{nodePools: [{model: L4, nodes: 1, devicePlugin: true}], "
                     "tenants: [{namespace: a, templates: [{name: t}], devicePluginModels: {H100: 1}}]}",
                     "spec.tenants[0].devicePluginModels.H100: no devicePlugin node pool has this model",
                     id="pinned-model-without-a-pool"),
        pytest.param("{tenants: [{namespace: a, templates: [{name: t}], devicePluginModels: {L4: many}}]}",
                     "spec.tenants[0].devicePluginModels.L4: expected a finite non-negative weight", id="bad-pin-weight"),
        pytest.param("{tenants: [{namespace: a, templates: [{name: t}], durationMinutes: {median: .nan}}]}",
                     "spec.tenants[0].durationMinutes.median: expected a finite non-negative number, got nan",
                     id="nan-duration"),
        pytest.param("{tenants: [{namespace: a, templates: [{name: t}], sizes: {'1': .inf}}]}",
                     "spec.tenants[0].sizes.1: expected a finite non-negative weight", id="infinite-size-weight"),
        pytest.param("{tenants: [{namespace: off, templates: [{name: t}]}]}",
                     "spec.tenants[0].namespace: expected a string, got bool (YAML reads a bare off/on/yes/no as a "
                     "boolean: quote it)", id="bare-off-namespace"),
    ],
)
def test_bad_workload_fields_are_named(tmp_path, capsys, spec, message):
    f = tmp_path / "s.yaml"
    f.write_text(f"apiVersion: claimtrail.io/v1alpha1\nkind: Workload\nmetadata: {{name: w}}\nspec: {spec}\n")
    assert main(["simulate", "--quiet", "--scenario", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"Workload w: {message}" in err and "Traceback" not in err


def test_bad_workload_field_is_named(tmp_path, capsys):
    f = tmp_path / "s.yaml"
    f.write_text("apiVersion: claimtrail.io/v1alpha1\nkind: Workload\nmetadata: {name: w}\n"
                 "spec: {tenants: [{namespace: a, templates: [{name: t}], sizes: {'0': 1}}]}\n")
    assert main(["simulate", "--quiet", "--scenario", str(f)]) == 2
    assert "Workload w: spec.tenants[0].sizes.0: keys are device counts >= 1" in capsys.readouterr().err


def test_device_plugin_pods_pin_the_models_their_tenant_names(tmp_path):
    """``devicePluginModels``: each device-plugin pod selects one model's nodes by the label GPU
    feature discovery sets, and is only ever bound to a node of that model."""
    events = tmp_path / "events.jsonl"
    assert main(["simulate", "--quiet", "--hours", "2", "--seed", "1", "--out", str(tmp_path / "r.jsonl"),
                 "--events", str(events)]) == 0
    evs = [validate_event(json.loads(line)) for line in events.read_text().splitlines()]
    products = {e.name: e.payload["metadata"]["labels"].get("nvidia.com/gpu.product")
                for e in evs if e.object_kind == "Node" and e.type == "upsert"}
    pinned: dict[str, str] = {}
    bound: dict[str, str] = {}
    for e in evs:
        spec = e.payload.get("spec") or {}
        if e.object_kind != "Pod" or e.type != "upsert" or "resourceClaims" in spec:
            continue
        pinned.setdefault(e.name, spec["nodeSelector"]["nvidia.com/gpu.product"])
        if spec.get("nodeName"):
            bound[e.name] = spec["nodeName"]
    # the default day: prod-inference pins H100 or L4, team-a H100
    assert set(pinned.values()) == {"NVIDIA-H100-80GB-HBM3", "NVIDIA-L4"} and bound
    assert all(products[node] == pinned[pod] for pod, node in bound.items())


def test_pinning_models_leaves_every_other_draw_of_the_day_alone():
    """The pinned models come from a stream of their own: with or without them, the same jobs
    arrive at the same times with the same sizes, durations, templates and tracks."""
    from pathlib import Path

    from audit.cli.cmd_simulate import DEFAULT_SCENARIO
    from ingest.simulate.loop import Simulator
    from ingest.simulate.scenario import load_scenario_text

    text = Path(DEFAULT_SCENARIO).read_text()
    unpinned = "\n".join(line for line in text.splitlines() if "devicePluginModels" not in line)
    assert unpinned != text

    def jobs(source: str) -> list:
        return Simulator(load_scenario_text(source, "day"), seed=3, hours=6).generate_jobs()

    pinned_jobs, plain_jobs = jobs(text), jobs(unpinned)
    strip = [(j.name, j.namespace, j.arrival_ms, j.size, j.duration_ms, j.template, j.device_plugin) for j in pinned_jobs]
    assert strip == [(j.name, j.namespace, j.arrival_ms, j.size, j.duration_ms, j.template, j.device_plugin)
                     for j in plain_jobs]
    assert {j.node_model for j in pinned_jobs if j.device_plugin} == {"H100", "L4"}
    assert {j.node_model for j in plain_jobs} == {""}


@pytest.mark.parametrize(
    ("argv", "refused"),
    [
        pytest.param(["--out", "{tmp}/typo/run/records.jsonl"], "--out {tmp}/typo/run/records.jsonl: directory "
                     "{tmp}/typo/run does not exist", id="records-file"),
        pytest.param(["--events", "{tmp}/typo/events.jsonl"], "--events {tmp}/typo/events.jsonl: directory "
                     "{tmp}/typo does not exist", id="event-log-alone"),
        pytest.param(["--out", "{tmp}/records.jsonl", "--events", "{tmp}/typo/events.jsonl"],
                     "--events {tmp}/typo/events.jsonl: directory {tmp}/typo does not exist", id="event-log-beside-records"),
        pytest.param(["--out", "chdb://{tmp}/typo/db"], "--out chdb://{tmp}/typo/db: directory {tmp}/typo does not exist",
                     id="store-in-a-missing-directory"),
    ],
)
def test_an_output_in_a_directory_that_does_not_exist_is_refused_not_made(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], refused: str) -> None:
    code = main(["simulate", "--quiet", "--hours", "0.1", *(arg.format(tmp=tmp_path) for arg in argv)])
    assert (code, capsys.readouterr().err) == (2, f"claimtrail simulate: {refused.format(tmp=tmp_path)}\n")
    assert list(tmp_path.iterdir()) == []
