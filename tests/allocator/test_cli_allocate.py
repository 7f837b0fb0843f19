"""The ``claimtrail allocate`` contract: one JSON object on stdout and exit codes 0/1/2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from audit.cli.main import main
from tests.allocator.upstream_cases import divergence

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "allocator"
CLUSTER = str(FIXTURES / "cluster.yaml")
CLAIMS = str(FIXTURES / "claims.yaml")
PAIR = str(FIXTURES / "two-gpus.json")


def allocate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict, str]:
    code = main(["allocate", *argv])
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1, out
    return code, json.loads(lines[0]), err


def test_success_document(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = allocate(capsys, "-f", CLUSTER, "-f", CLAIMS, "--node", "node-a")
    assert code == 0
    assert doc == {"allocations": [{
        "claim": "train-0",
        # gpu-1 is allocated to serve-0, so the H100 subrequest takes gpu-0.
        "results": [{"request": "gpu/h100", "driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-0"}],
        "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-a"]}]}]},
        "config": [{"source": "FromClass", "requests": ["gpu/h100"], "opaque": {"driver": "gpu.nvidia.com", "parameters": {
            "apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig", "sharing": {"strategy": "TimeSlicing"}}}}],
    }]}


def test_fallback_on_another_node(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = allocate(capsys, "-f", CLUSTER, "-f", CLAIMS, "--node", "node-b")
    assert code == 0
    assert doc["allocations"][0]["results"][0]["request"] == "gpu/a100"


def test_unsatisfiable_document(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = allocate(capsys, "-f", CLUSTER, "-f", CLAIMS, "-f", PAIR, "--node", "node-a", "--claim", "team-a/pair")
    assert (code, doc) == (1, {"unsatisfiable": True, "message": "cannot allocate all claims"})


def test_allocated_claim_named_explicitly_is_reallocated(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = allocate(capsys, "-f", CLUSTER, "-f", CLAIMS, "-f", PAIR, "--node", "node-a", "--claim", "serve-0", "--claim", "pair")
    assert code == 1  # serve-0 and pair need three H100s, node-a has two
    code, doc, _ = allocate(capsys, "-f", CLUSTER, "-f", CLAIMS, "-f", PAIR, "--node", "node-a", "--claim", "pair")
    assert code == 1
    code, doc, _ = allocate(capsys, "-f", CLUSTER, "-f", CLAIMS, "--node", "node-a", "--claim", "serve-0")
    assert [r["device"] for r in doc["allocations"][0]["results"]] == ["gpu-1"]


def test_claims_in_the_given_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = allocate(capsys, "-f", CLUSTER, "-f", PAIR, "-f", CLAIMS, "--node", "node-a", "--claim", "pair", "--claim", "train-0")
    assert code == 1  # pair needs both H100s of node-a but gpu-1 is busy
    code, doc, _ = allocate(capsys, "-f", CLUSTER, "-f", CLAIMS, "--node", "node-a", "--claim", "train-0")
    assert [a["claim"] for a in doc["allocations"]] == ["train-0"]


def test_error_document_with_upstream_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = allocate(capsys, "-f", CLUSTER, "-f", CLAIMS, "--node", "node-a", "--feature-gates", "DRAPrioritizedList=false")
    assert code == 2
    assert doc == {"error": {"code": "feature_disabled", "message":
                             "claim team-a/train-0, request gpu: has subrequests, but the DRAPrioritizedList feature is disabled"}}


@pytest.mark.parametrize(("max_steps", "code", "doc"), [
    pytest.param("5", 0, None, id="enough-steps-allocates"),  # the search takes 5
    pytest.param("4", 2, {"error": {"code": "step_budget", "message":
                                    "gave up trying to allocate devices after 4 search steps (the step budget)"}},
                 id="one-step-short-gives-up"),
    pytest.param("0", 2, {"error": {"code": "step_budget", "message":
                                    "gave up trying to allocate devices after 0 search steps (the step budget)"}},
                 id="no-step-gives-up"),
])
def test_step_budget_gives_up_with_an_error_document(capsys: pytest.CaptureFixture[str], max_steps: str, code: int,
                                                     doc: dict | None) -> None:
    exit_code, got, _ = allocate(capsys, "-f", CLUSTER, "-f", CLAIMS, "--node", "node-a", "--max-steps", max_steps)
    assert exit_code == code
    if doc is None:  # the unbounded run's document
        assert got == allocate(capsys, "-f", CLUSTER, "-f", CLAIMS, "--node", "node-a")[1]
    else:
        assert got == doc


@pytest.mark.parametrize(("argv", "code", "needle"), [
    pytest.param(["-f", str(FIXTURES / "missing.yaml")], "invalid_input", "missing.yaml: cannot read file", id="missing-file"),
    pytest.param(["-f", str(FIXTURES / "broken.yaml")], "invalid_input", "broken.yaml: invalid YAML", id="bad-yaml"),
    pytest.param(["-f", str(FIXTURES / "wrong-type.yaml")], "invalid_input",
                 "wrong-type.yaml#1: ResourceSlice node-1: spec.devices[2].attributes.memory: expected one of int/bool/string/version",
                 id="wrong-attribute-type"),
    pytest.param(["-f", CLUSTER, "--feature-gates", "DRANope=true"], "invalid_argument", "unknown gate", id="unknown-gate"),
    pytest.param(["-f", CLUSTER, "--feature-gates", "DRAAdminAccess=maybe"], "invalid_argument", "NAME=true", id="bad-gate-value"),
    pytest.param(["-f", CLUSTER, "--claim", "nope"], "claim_not_found", "--claim nope", id="unknown-claim"),
    pytest.param(["-f", CLUSTER, "--node-label", "novalue"], "invalid_argument", "KEY=VALUE", id="bad-node-label"),
    pytest.param(["-f", CLAIMS, "--claim", "train-0", "--claim", "team-a/train-0"], "invalid_argument",
                 "ResourceClaim team-a/train-0 is already listed", id="claim-listed-twice"),
    pytest.param(["-f", CLUSTER, "--max-steps", "-1"], "invalid_argument", "--max-steps: -1 is negative",
                 id="negative-step-budget"),
])
def test_bad_input_is_one_json_error(capsys: pytest.CaptureFixture[str], argv: list[str], code: str, needle: str) -> None:
    exit_code, doc, _ = allocate(capsys, *argv, "--node", "node-1")
    assert exit_code == 2
    assert doc["error"]["code"] == code
    assert needle in doc["error"]["message"]


def test_bad_input_in_text_mode_is_one_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["allocate", "-f", str(FIXTURES / "broken.yaml"), "--node", "n", "-o", "text"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_explain_adds_evidence(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, _ = allocate(capsys, "-f", CLUSTER, "-f", CLAIMS, "--node", "node-a", "--explain")
    assert code == 0
    explanation = doc["explanation"]
    assert explanation["steps"] == 5  # request, subrequest h100, slot done, claim done, all done
    tiers = {(t["request"], t["subrequestIndex"]): t["verdicts"] for t in explanation["tiers"]}
    assert tiers[("gpu/h100", 0)] == [
        {"device": "gpu.nvidia.com/node-a/gpu-1", "reason": "in_use", "detail": {"by": "allocated"}},
        {"device": "gpu.nvidia.com/node-a/gpu-0", "reason": "selected"},
    ]
    assert [v["reason"] for v in tiers[("gpu/a100", 1)]] == ["not_reached", "not_reached"]


def test_node_label_override_and_node_object(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    zonal = tmp_path / "zonal.yaml"
    zonal.write_text(yaml.safe_dump_all([
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "any"}, "spec": {}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "zonal"}, "spec": {
            "driver": "net.example.com", "pool": {"name": "zone-2", "generation": 0, "resourceSliceCount": 1},
            "nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["zone-2"]}]}]},
            "devices": [{"name": "nic-0"}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "net"},
         "spec": {"devices": {"requests": [{"name": "nic", "exactly": {"deviceClassName": "any", "selectors": [
             {"cel": {"expression": "device.driver == 'net.example.com'"}}]}}]}}},
    ]))
    code, _, _ = allocate(capsys, "-f", CLUSTER, "-f", str(zonal), "--node", "node-a", "--claim", "net")
    assert code == 1  # node-a's object says zone-1
    code, doc, _ = allocate(capsys, "-f", CLUSTER, "-f", str(zonal), "--node", "node-a", "--claim", "net",
                            "--node-label", "topology.kubernetes.io/zone=zone-2")
    assert code == 0
    assert doc["allocations"][0]["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["zone-2"]


def test_yaml_output_is_the_same_document(capsys: pytest.CaptureFixture[str]) -> None:
    main(["allocate", "-f", CLUSTER, "-f", CLAIMS, "--node", "node-a"])
    as_json = json.loads(capsys.readouterr().out)
    main(["allocate", "-f", CLUSTER, "-f", CLAIMS, "--node", "node-a", "-o", "yaml"])
    assert yaml.safe_load(capsys.readouterr().out) == as_json


def test_text_output_for_people(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["allocate", "-f", CLUSTER, "-f", CLAIMS, "--node", "node-a", "-o", "text"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.splitlines() == [
        "node node-a: allocated 1 claim(s) in 5 steps",
        "claim team-a/train-0",
        "  gpu/h100 -> gpu.nvidia.com/node-a/gpu-0",
        "tier team-a/train-0 gpu/h100: in_use=1, selected=1",
        "tier team-a/train-0 gpu/a100: not_reached=2",
    ]


def test_ignored_kinds_are_reported(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    extra = tmp_path / "ns.yaml"
    extra.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n")
    code, _, err = allocate(capsys, "-f", CLUSTER, "-f", CLAIMS, "-f", str(extra), "--node", "node-a")
    assert code == 0
    assert "ignoring kind 'Namespace'" in err


def test_real_command_line_entry_point() -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run([sys.executable, "-m", "audit.cli.main", "allocate", "-f", CLUSTER, "-f", CLAIMS, "--node", "node-b"],
                          capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["allocations"][0]["results"][0]["device"] == "gpu-0"


def test_validation_findings_are_warnings_and_allocation_proceeds(capsys: pytest.CaptureFixture[str]) -> None:
    code, doc, err = allocate(capsys, "-f", CLUSTER, "-f", str(FIXTURES / "invalid-request-name.yaml"), "--node", "node-a")
    assert code == 0
    assert doc["allocations"][0]["results"][0]["request"] == "GPU_0"
    assert err.startswith('warning: ResourceClaim team-a/bad-name: spec.devices.requests[0].name: Invalid value: "GPU_0"')


@pytest.mark.parametrize(("argv", "needle"), [
    pytest.param(["--node", "node-a"], "-f FILE is required", id="no-files"),
    pytest.param(["-f", CLUSTER], "--node NAME is required", id="no-node"),
])
def test_missing_required_options_are_json_errors(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    code, doc, _ = allocate(capsys, *argv)
    assert code == 2
    assert doc["error"]["code"] == "invalid_argument" and needle in doc["error"]["message"]


def test_a_class_defined_twice_is_reported(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    again = tmp_path / "class.yaml"
    again.write_text("apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.nvidia.com}\nspec: {}\n")
    code, _, err = allocate(capsys, "-f", CLUSTER, "-f", str(again), "-f", CLAIMS, "--node", "node-a")
    assert code == 0
    assert "warning: class.yaml#1: DeviceClass gpu.nvidia.com is also defined in cluster.yaml#1" in err


def test_a_file_given_twice_allocates_as_given_once_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    once = allocate(capsys, "-f", CLUSTER, "-f", CLAIMS, "--node", "node-a")
    code, doc, err = allocate(capsys, "-f", CLUSTER, "-f", CLAIMS, "-f", CLAIMS, "--node", "node-a")
    assert (code, doc) == once[:2]
    assert err.splitlines() == [
        "warning: claims.yaml#1: ResourceClaim team-a/train-0 is also defined in claims.yaml#1; the later definition "
        "is used",
        "warning: claims.yaml#2: ResourceClaim team-b/serve-0 is also defined in claims.yaml#2; the later definition "
        "is used"]


UNSATISFIABLE = {"unsatisfiable": True, "message": "cannot allocate all claims"}
NODE_TYPO = "--node node-zz: no node node-zz in the input (nodes: node-a, node-b)"
NO_NODES = "--node node-zz: no node node-zz in the input (the files hold no Node and no ResourceSlice)"
NO_CLASS = {"error": {"code": "class_not_found", "message": 'claim team-a/train-0, request h100: could not retrieve '
                      'device class gpu.nvidia.com: deviceclass.resource.k8s.io "gpu.nvidia.com" not found'}}


def _every_node_slices(tmp_path: Path) -> str:
    """cluster.yaml without its Nodes and with each slice serving every node (``allNodes``)."""
    docs = [d for d in yaml.safe_load_all(Path(CLUSTER).read_text()) if d["kind"] != "Node"]
    for doc in docs:
        if doc["kind"] == "ResourceSlice":
            del doc["spec"]["nodeName"]
            doc["spec"]["allNodes"] = True
    path = tmp_path / "every-node.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return str(path)


# (files, --node, extra arguments, the JSON document's exit code and document, the text refusal)
UNKNOWN_NODES = [
    # upstream's allocator answers an unknown node (it has no devices there), so the document must too
    pytest.param(["{cluster}", "{claims}"], "node-zz", [], 1, UNSATISFIABLE, NODE_TYPO,
                 id="typo-among-the-nodes-of-the-files"),
    pytest.param(["{claims}"], "node-zz", [], 2, NO_CLASS, NO_NODES, id="files-that-describe-no-node"),
    pytest.param(["{cluster}", "{claims}"], "node-a", [], 0, None, None, id="node-object-is-known"),
    pytest.param(["{cluster}", "{claims}"], "node-zz", ["--node-label", "zone=z"], 1, UNSATISFIABLE, None,
                 id="labelled-hypothetical-node-is-allowed"),
    pytest.param(["{claims}"], "node-zz", ["--node-label", "zone=z"], 2, NO_CLASS, None,
                 id="labelled-hypothetical-node-without-slices-is-allowed"),
    pytest.param(["{every_node}", "{claims}"], "node-zz", [], 0, None, None, id="slices-for-every-node"),
]


def _files(tmp_path: Path, files: list[str]) -> list[str]:
    paths = {"cluster": CLUSTER, "claims": CLAIMS, "every_node": _every_node_slices(tmp_path)}
    return [arg for name in files for arg in ("-f", name.format(**paths))]


@pytest.mark.parametrize(("files", "node", "extra", "code", "doc", "refusal"), UNKNOWN_NODES)
def test_a_node_the_files_never_name_gets_upstreams_answer_and_a_warning(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, files: list[str], node: str, extra: list[str], code: int,
        doc: dict | None, refusal: str | None) -> None:
    exit_code, got, stderr = allocate(capsys, *_files(tmp_path, files), "--node", node, *extra)
    assert (exit_code, stderr) == (code, f"warning: {refusal}; answered as kube-scheduler would\n" if refusal else "")
    if doc is not None:
        assert got == doc


@pytest.mark.parametrize(("files", "node", "extra", "code", "doc", "refusal"), UNKNOWN_NODES)
def test_a_node_the_files_never_name_is_refused_in_text(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, files: list[str], node: str, extra: list[str], code: int,
        doc: dict | None, refusal: str | None) -> None:
    exit_code = main(["allocate", *_files(tmp_path, files), "--node", node, *extra, "-o", "text"])
    out, err = capsys.readouterr()
    if refusal:
        assert (exit_code, out, err) == (2, "", f"claimtrail allocate: {refusal}\n")
    else:
        assert (exit_code, out.startswith(f"node {node}: "), "Traceback" in err) == (code, True, False)


def test_a_slice_node_name_counts_as_naming_the_node(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    only_slices = tmp_path / "slices.yaml"
    only_slices.write_text("\n---\n".join(
        d for d in FIXTURES.joinpath("cluster.yaml").read_text().split("\n---\n") if "kind: Node\n" not in d))
    code, doc, _ = allocate(capsys, "-f", str(only_slices), "-f", CLAIMS, "--node", "node-a")
    assert code == 0, doc


def test_output_defaults_to_text_on_a_terminal_and_json_in_a_pipe(tmp_path: Path) -> None:
    import pty

    argv = [sys.executable, "-m", "audit.cli.main", "allocate", "-f", CLUSTER, "-f", CLAIMS, "--node", "node-zz"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    piped = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert (piped.returncode, json.loads(piped.stdout)) == (1, UNSATISFIABLE)
    assert piped.stderr == f"warning: {NODE_TYPO}; answered as kube-scheduler would\n"
    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, stdout=follower, stderr=subprocess.PIPE, env=env)
    os.close(follower)
    _, err = proc.communicate(timeout=60)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert (proc.returncode, out) == (2, b"")
    assert err.decode() == ("claimtrail allocate: --node node-zz: no node node-zz in the input "
                            "(nodes: node-a, node-b)\n")


def _mistakes(tmp_path: Path) -> dict[str, str]:
    """Files that hold nothing to allocate, by the name the tables below use for them."""
    (tmp_path / "empty.yaml").write_text("")
    (tmp_path / "separators.yaml").write_text("---\n---\n")
    allocated = [d for d in yaml.safe_load_all(Path(CLAIMS).read_text()) if d.get("status")]
    (tmp_path / "allocated.yaml").write_text(yaml.safe_dump_all(allocated))
    return {"cluster": CLUSTER, "claims": CLAIMS, **{p.stem: str(p) for p in tmp_path.glob("*.yaml")}}


NOTHING_TO_ALLOCATE = [
    pytest.param(["empty"], "-f {empty}: no ResourceClaim in the file, so nothing to allocate", id="empty-file"),
    pytest.param(["separators"], "-f {separators}: no ResourceClaim in the file, so nothing to allocate",
                 id="only-document-separators"),
    pytest.param(["empty", "empty"], "-f {empty}: no ResourceClaim in the file, so nothing to allocate",
                 id="same-empty-file-twice"),
    pytest.param(["cluster"], "-f {cluster}: no ResourceClaim in the file, so nothing to allocate",
                 id="cluster-without-claims"),
    pytest.param(["cluster", "allocated"], "-f {cluster}, {allocated}: every ResourceClaim in the files is already "
                 "allocated, so nothing to allocate (--claim NAME allocates one again)", id="every-claim-allocated"),
]


@pytest.mark.parametrize(("files", "mistake"), NOTHING_TO_ALLOCATE)
def test_files_with_nothing_to_allocate_get_upstreams_empty_answer_and_a_warning(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, files: list[str], mistake: str) -> None:
    paths = _mistakes(tmp_path)
    argv = [arg for name in files for arg in ("-f", paths[name])]
    code, doc, err = allocate(capsys, *argv, "--node", "node-a")
    assert (code, doc) == (0, {"allocations": []})
    assert err == f"warning: {mistake.format(**paths)}; answered as kube-scheduler would\n"


@pytest.mark.parametrize(("files", "mistake"), NOTHING_TO_ALLOCATE)
def test_files_with_nothing_to_allocate_are_refused_in_text(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, files: list[str], mistake: str) -> None:
    paths = _mistakes(tmp_path)
    argv = [arg for name in files for arg in ("-f", paths[name])]
    code = main(["allocate", *argv, "--node", "node-a", "-o", "text"])
    assert (code, *capsys.readouterr()) == (2, "", f"claimtrail allocate: {mistake.format(**paths)}\n")


@pytest.mark.parametrize("argv", [
    pytest.param(["-f", "{cluster}", "-f", "{claims}", "--node", "node-zz"], id="unknown-node"),
    pytest.param(["-f", "{cluster}", "-f", "{claims}", "--node", "node-zz", "--claim", "serve-0"],
                 id="unknown-node-allocated-claim"),
    pytest.param(["-f", "{claims}", "--node", "node-zz"], id="unknown-node-no-slices-or-classes"),
    pytest.param(["-f", "{empty}", "--node", "node-zz"], id="empty-file"),
    pytest.param(["-f", "{empty}"], id="empty-file-without-node"),
    pytest.param(["-f", "{cluster}", "--node", "node-a"], id="cluster-without-claims"),
    pytest.param(["-f", "{cluster}", "-f", "{allocated}", "--node", "node-a"], id="every-claim-allocated"),
])
def test_a_mistaken_command_line_gets_upstreams_answer(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                       dra_oracle: str, argv: list[str]) -> None:
    """What ClaimTrail warns about in JSON, upstream's allocator answers: the documents must agree."""
    paths = _mistakes(tmp_path)
    argv = [arg.format(**paths) for arg in argv]
    upstream = subprocess.run([dra_oracle, "allocate", *argv, "-o", "json"], capture_output=True, text=True, timeout=60)
    code, ours, _ = allocate(capsys, *argv)
    assert code == upstream.returncode
    assert divergence(json.loads(upstream.stdout), ours) is None
