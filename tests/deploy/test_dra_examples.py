"""The DRA examples in deploy/ do what they promise: selectors compile in our CEL environment and
the versioned claim templates allocate H100, then A100, then a compatible GPU on a sample cluster
with the hard constraints and the tolerations policy enforced."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from audit.allocator import AllocatedState, Allocator, Inventory
from audit.allocator.outcome import Status
from audit.dra.cel import CelCompileError, CelEnvironment
from audit.dra.model import parse_object
from tests.deploy.kustomize import build

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SAMPLE = ROOT / "tests" / "fixtures" / "kube" / "sample-gpu-cluster.yaml"

DRA_OBJECTS = build(DEPLOY / "dra") + build(DEPLOY / "dra/templates/v1") + build(DEPLOY / "dra/templates/v2")


def _selectors(obj: dict[str, Any]) -> list[str]:
    if obj["kind"] == "DeviceClass":
        return [s["cel"]["expression"] for s in obj["spec"].get("selectors") or []]
    out = []
    for req in obj["spec"]["spec"]["devices"]["requests"]:
        for part in [req.get("exactly")] + list(req.get("firstAvailable") or []):
            if part:
                out += [s["cel"]["expression"] for s in part.get("selectors") or []]
    return out


SELECTORS = [(o["metadata"]["name"], e) for o in DRA_OBJECTS for e in _selectors(o)]


@pytest.mark.parametrize(("owner", "expression"), SELECTORS, ids=[f"{o}-{i}" for i, (o, _) in enumerate(SELECTORS)])
def test_every_selector_compiles_in_our_cel_environment(owner: str, expression: str) -> None:
    CelEnvironment().compile(expression)


def test_a_broken_selector_does_not_compile() -> None:
    with pytest.raises(CelCompileError):
        CelEnvironment().compile("device.attributes['gpu.nvidia.com'].productName.startsWith(")


def test_every_dra_example_parses_as_a_v1_object() -> None:
    for obj in DRA_OBJECTS:
        parse_object(obj)


@pytest.fixture(scope="module")
def cluster() -> tuple[Inventory, dict[str, Any]]:
    docs = [d for d in yaml.safe_load_all(SAMPLE.read_text()) if d]
    classes = [parse_object(o) for o in DRA_OBJECTS if o["kind"] == "DeviceClass"]
    slices = [parse_object(d) for d in docs if d["kind"] == "ResourceSlice"]
    nodes = {d["metadata"]["name"]: parse_object(d) for d in docs if d["kind"] == "Node"}
    return Inventory(slices=slices, classes=classes, taint_rules=[]), nodes


def _claim_from(template_name: str) -> Any:
    tmpl = next(o for o in DRA_OBJECTS if o["kind"] == "ResourceClaimTemplate" and o["metadata"]["name"] == template_name)
    raw = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": f"job-{template_name}", "namespace": "team-a", "uid": f"uid-{template_name}",
                     "labels": tmpl["spec"]["metadata"]["labels"]},
        "spec": tmpl["spec"]["spec"],
    }
    return parse_object(raw)


def _in_use(node: str, device: str) -> AllocatedState:
    raw = {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "other", "namespace": "team-b", "uid": "uid-other"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
        "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": device}]}}},
    }
    return AllocatedState.from_claims([parse_object(raw)])


def _allocate(
    cluster: tuple[Inventory, dict[str, Any]], template: str, node: str, state: AllocatedState | None = None
) -> tuple[str, list[str]]:
    inventory, nodes = cluster
    outcome = Allocator(inventory, state or AllocatedState()).allocate(nodes[node], [_claim_from(template)], explain=True)
    if outcome.status != Status.SUCCESS:
        return outcome.status.value, []
    (alloc,) = outcome.allocations
    return alloc.results[0]["request"], [f"{r['pool']}/{r['device']}" for r in alloc.results]


SINGLE = {
    "h100_node_gets_h100": ("h100-node", "gpu/h100", ["h100-node/gpu-0"]),
    "a100_node_falls_back_to_a100": ("a100-node", "gpu/a100", ["a100-node/gpu-0"]),
    "l40s_node_falls_back_to_compatible": ("l40s-node", "gpu/compatible", ["l40s-node/gpu-0"]),
    "t4_fails_memory_and_architecture": ("t4-node", "unsatisfiable", []),
    "degraded_h100_is_tolerated": ("h100-degraded-node", "gpu/h100", ["h100-degraded-node/gpu-0"]),
    "unhealthy_h100_is_never_used": ("h100-unhealthy-node", "unsatisfiable", []),
}


@pytest.mark.parametrize(("node", "request_name", "devices"), list(SINGLE.values()), ids=list(SINGLE))
def test_single_gpu_template_prefers_h100_then_a100_then_compatible(
    cluster: tuple[Inventory, dict[str, Any]], node: str, request_name: str, devices: list[str]
) -> None:
    assert _allocate(cluster, "gpu-h100-first-v2", node) == (request_name, devices)


def test_gpu_pair_shares_a_pcie_root_and_a_model(cluster: tuple[Inventory, dict[str, Any]]) -> None:
    assert _allocate(cluster, "gpu-pair-h100-first-v2", "h100-node") == ("gpu/h100", ["h100-node/gpu-0", "h100-node/gpu-1"])
    # with gpu-1 taken, gpu-0 has no partner on its PCIe root: the pair moves to gpu-2 + gpu-3
    assert _allocate(cluster, "gpu-pair-h100-first-v2", "h100-node", _in_use("h100-node", "gpu-1")) == (
        "gpu/h100", ["h100-node/gpu-2", "h100-node/gpu-3"])


def test_v1_template_is_h100_only(cluster: tuple[Inventory, dict[str, Any]]) -> None:
    assert _allocate(cluster, "gpu-h100-v1", "h100-node") == ("gpu", ["h100-node/gpu-0"])
    assert _allocate(cluster, "gpu-h100-v1", "a100-node") == ("unsatisfiable", [])


def test_templates_label_their_claims_with_the_template_version() -> None:
    versions = {o["metadata"]["name"]: o["spec"]["metadata"]["labels"]["claimtrail.io/template-version"]
                for o in DRA_OBJECTS if o["kind"] == "ResourceClaimTemplate"}
    assert versions == {"gpu-h100-v1": "v1", "gpu-h100-first-v2": "v2", "gpu-pair-h100-first-v2": "v2"}
