"""``why`` reports the devices a claim constraint rules out, and agrees with the allocator on it.

Each row is a kubectl dump with a pending pod whose claim spans several requests tied by a
``matchAttribute`` or ``distinctAttribute`` constraint. The expected answer is checked three
ways: ``claimtrail why --dump``, ``claimtrail allocate --explain`` on the same objects (a node
where ``why`` finds an H100 available is one where the claim is allocated, with that H100, and
a node where it finds none is unsatisfiable), and the upstream allocator (the ``dra_oracle``
fixture: the same outcome and devices as ``allocate``).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from audit.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "explain"

PCIE = {"constraint": "matchAttribute", "attribute": "resource.kubernetes.io/pcieRoot"}
NUMA = {"constraint": "distinctAttribute", "attribute": "topology.example.com/numa"}

# (dump, pod, claim, expected reasons, expected device rows {device: (reason, detail)},
#  the constraint_unsatisfied count of allocate --explain on the h100 tier, for the nodes it is known on)
ROWS: dict[str, tuple[str, str, str, dict[str, int], dict[str, tuple[str, dict[str, str]]], dict[str, int]]] = {
    "match_across_requests_rules_out_every_free_h100": (
        "cluster-pcie.yaml", "team-a/train-2", "team-a/train-2-devices",
        {"in_use": 1, "constraint_unsatisfied": 3},
        {"gpu.nvidia.com/h100-01/gpu-0": ("in_use", {"by": "pod team-b/serve-1 (claim team-b/serve-1-devices)",
                                                     "claim": "team-b/serve-1-devices", "pod": "team-b/serve-1"}),
         "gpu.nvidia.com/h100-01/gpu-1": ("constraint_unsatisfied",
                                          {**PCIE, "value": "pci0000:40", "requests": "nic,gpu"}),
         "gpu.nvidia.com/h100-01/gpu-2": ("constraint_unsatisfied",
                                          {**PCIE, "value": "pci0000:80", "requests": "nic,gpu"}),
         "gpu.nvidia.com/h100-01/gpu-3": ("constraint_unsatisfied",
                                          {**PCIE, "value": "pci0000:80", "requests": "nic,gpu"})},
        {"h100-01": 3}),
    "match_on_a_subrequest_rules_out_every_free_h100": (
        "cluster-pcie.yaml", "team-a/train-3", "team-a/train-3-devices",
        {"in_use": 1, "constraint_unsatisfied": 3},
        {"gpu.nvidia.com/h100-01/gpu-1": ("constraint_unsatisfied",
                                          {**PCIE, "value": "pci0000:40", "requests": "gpu/h100,nic"})},
        {}),
    "distinct_across_requests_leaves_the_h100_on_the_other_numa_node": (
        "cluster-numa.yaml", "team-a/infer-4", "team-a/infer-4-devices",
        {"node_filtered": 1, "in_use": 1, "constraint_unsatisfied": 1, "available": 1},
        {"gpu.nvidia.com/h100-11/gpu-1": ("constraint_unsatisfied", {**NUMA, "value": "1", "requests": "gpu,nic"}),
         "gpu.nvidia.com/h100-11/gpu-2": ("available", {}),
         "gpu.nvidia.com/h100-12/gpu-0": ("node_filtered", {
             "cause": "claim_unsatisfiable",
             "detail": "request nic of the claim cannot be allocated with this device on node h100-12"})},
        {}),
}


def _why(capsys: pytest.CaptureFixture[str], dump: str, pod: str) -> dict[str, Any]:
    assert main(["why", "--dump", str(FIXTURES / dump), pod, "--model", "H100", "--devices", "-o", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def _flat(dump: str, tmp_path: Path) -> Path:
    """The dump's List items as a multi-document file (the oracle reads no List)."""
    out = tmp_path / dump
    out.write_text(yaml.safe_dump_all(yaml.safe_load((FIXTURES / dump).read_text())["items"]))
    return out


def _allocate(capsys: pytest.CaptureFixture[str], path: Path, node: str, claim: str) -> dict[str, Any]:
    main(["allocate", "-f", str(path), "--node", node, "--claim", claim, "--explain", "-o", "json"])
    return json.loads(capsys.readouterr().out)


def _devices(answer: dict[str, Any]) -> list[tuple[str, str]]:
    return [(r["request"], f"{r['driver']}/{r['pool']}/{r['device']}")
            for a in answer.get("allocations") or [] for r in a["results"]]


@pytest.mark.parametrize("row", sorted(ROWS))
def test_why_names_the_constraint_and_agrees_with_allocate(row: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    dump, pod, claim, reasons, rows, constraint_counts = ROWS[row]
    answer = _why(capsys, dump, pod)
    assert answer["reasons"] == reasons
    devices = {d["device"]: (d["reason"], d["detail"]) for d in answer["devices"]}
    for device, expected in rows.items():
        assert devices[device] == expected
    flat = _flat(dump, tmp_path)
    for node in sorted({d["node"] for d in answer["devices"]}):
        available = [d["device"] for d in answer["devices"] if d["node"] == node and d["reason"] == "available"]
        allocated = _allocate(capsys, flat, node, claim)
        if available:
            # The allocator takes the first device that the rest of the claim goes with.
            assert ("gpu/h100", available[0]) in _devices(allocated)
        else:
            assert allocated.get("unsatisfiable") is True
        if node in constraint_counts:
            tier = next(t for t in allocated["explanation"]["tiers"] if t["request"] == "gpu/h100")
            counted = sum(1 for v in tier["verdicts"] if v["reason"] == "constraint_unsatisfied")
            assert counted == constraint_counts[node]


@pytest.mark.parametrize("row", sorted(ROWS))
def test_the_upstream_allocator_agrees_on_every_node(row: str, tmp_path: Path, dra_oracle: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    dump, pod, claim, _, _, _ = ROWS[row]
    answer = _why(capsys, dump, pod)
    flat = _flat(dump, tmp_path)
    for node in sorted({d["node"] for d in answer["devices"]}):
        ours = _allocate(capsys, flat, node, claim)
        done = subprocess.run([dra_oracle, "allocate", "-f", str(flat), "--node", node, "--claim", claim, "-o", "json"],
                              capture_output=True, text=True, timeout=60, check=False)
        upstream = json.loads(done.stdout)
        available = any(d["node"] == node and d["reason"] == "available" for d in answer["devices"])
        assert done.returncode == (0 if available else 1), done.stdout
        assert upstream.get("unsatisfiable", False) is ours.get("unsatisfiable", False)
        assert _devices(upstream) == _devices(ours)
