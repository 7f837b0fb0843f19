"""Run allocation cases the way `claimtrail allocate -o json` does and compare with upstream's output.

A case is one YAML document: ``features`` (the DRA features that are on), ``node``, optional
``nodeLabels``, ``objects`` (resource.k8s.io/v1 objects), ``claimsToAllocate`` in order, and for
a fixture ``expect``: the JSON document the upstream allocator printed for it. ``divergence``
names the first difference that matters between two such documents: the kind of outcome, the
devices and result fields of each claim, its node selector, or the error text.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import yaml

from audit.cli import cmd_allocate
from audit.dra.quantity import Quantity

# DRA feature -> the kube-scheduler gates that switch it.
FEATURE_GATES = {
    "AdminAccess": ("DRAAdminAccess",),
    "ConsumableCapacity": ("DRAConsumableCapacity",),
    "DeviceBindingConditions": ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"),
    "DeviceTaints": ("DRADeviceTaints",),
    "ListTypeAttributes": ("DRAListTypeAttributes",),
    "PartitionableDevices": ("DRAPartitionableDevices",),
    "PrioritizedList": ("DRAPrioritizedList",),
}

# ClaimTrail's one deliberate addition to an upstream message: which pools are invalid and why.
INVALID_POOLS = "invalid resource pools were encountered"


def feature_gates(features: list[str]) -> str:
    """Every gate of FEATURE_GATES, on exactly for the listed features."""
    on = {gate for feature in features for gate in FEATURE_GATES[feature]}
    every = sorted({gate for gates in FEATURE_GATES.values() for gate in gates})
    return ",".join(f"{gate}={'true' if gate in on else 'false'}" for gate in every)


def command_line(case: dict[str, Any], path: str) -> list[str]:
    """The `allocate` arguments for a case whose objects are in ``path`` (after the program name)."""
    args = ["allocate", "-f", path, "--node", case["node"], "--feature-gates", feature_gates(case.get("features") or []),
            "-o", "json"]
    for key, value in (case.get("nodeLabels") or {}).items():
        args += ["--node-label", f"{key}={value}"]
    for name in case.get("claimsToAllocate") or []:
        args += ["--claim", name]
    return args


def write_objects(case: dict[str, Any], directory: Path, stem: str) -> str:
    path = directory / f"{stem}.yaml"
    path.write_text(yaml.safe_dump_all(case["objects"], sort_keys=False))
    return str(path)


def run_claimtrail(case: dict[str, Any], directory: Path | None = None) -> dict[str, Any]:
    """The document `claimtrail allocate -o json` prints for the case, run in this process."""
    with contextlib.ExitStack() as stack:
        if directory is None:
            directory = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        path = write_objects(case, directory, "claimtrail")
        ns = argparse.Namespace(files=[path], node=case["node"],
                                node_labels=[f"{k}={v}" for k, v in (case.get("nodeLabels") or {}).items()],
                                feature_gates=[feature_gates(case.get("features") or [])],
                                claims=list(case.get("claimsToAllocate") or []), explain=False, output="json")
        out = io.StringIO()
        # API validation findings go to stderr as warnings; only the document matters here.
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            cmd_allocate.run(ns)
    document: dict[str, Any] = json.loads(out.getvalue())
    return document


def kind(document: dict[str, Any]) -> str:
    if document.get("error"):
        return "error"
    if document.get("unsatisfiable"):
        return "unsatisfiable"
    return "allocations"


def _quantity(text: Any) -> int:
    return Quantity.parse(str(text)).nanos


def _result(item: dict[str, Any]) -> dict[str, Any]:
    """The fields of one result that upstream fixes; shareID is random upstream, so only its presence counts."""
    out = {k: item.get(k) for k in ("request", "driver", "pool", "device")}
    if item.get("adminAccess"):
        out["adminAccess"] = True
    for key in ("bindingConditions", "bindingFailureConditions"):
        if item.get(key):
            out[key] = list(item[key])
    if item.get("tolerations"):
        # Upstream defaults an empty toleration operator to Equal; both spellings mean the same.
        out["tolerations"] = [{**{k: v for k, v in t.items() if v not in (None, "")},
                               "operator": t.get("operator") or "Equal"} for t in item["tolerations"]]
    if item.get("consumedCapacity"):
        out["consumedCapacity"] = {k: _quantity(v) for k, v in item["consumedCapacity"].items()}
    out["shared"] = bool(item.get("shareID"))
    return out


def _selector(selector: dict[str, Any] | None) -> list[list[tuple[str, str, str, tuple[str, ...]]]] | None:
    if not selector:
        return None
    terms = []
    for term in selector.get("nodeSelectorTerms") or []:
        reqs = [(part, e.get("key"), e.get("operator"), tuple(sorted(e.get("values") or [])))
                for part in ("matchFields", "matchExpressions") for e in term.get(part) or []]
        terms.append(sorted(reqs))
    return sorted(terms)


def _message_matches(upstream: str, ours: str) -> bool:
    if ours == upstream:
        return True
    return upstream == INVALID_POOLS and ours.startswith(INVALID_POOLS + ": ")


def divergence(upstream: dict[str, Any], ours: dict[str, Any]) -> str | None:
    """None when ClaimTrail's document says what upstream's says, else the first difference."""
    k_up, k_ours = kind(upstream), kind(ours)
    if k_up != k_ours:
        return f"outcome: upstream {k_up}, claimtrail {k_ours}"
    if k_up == "error":
        up_msg, our_msg = upstream["error"]["message"], ours["error"]["message"]
        return None if _message_matches(up_msg, our_msg) else f"error text: upstream {up_msg!r}, claimtrail {our_msg!r}"
    if k_up == "unsatisfiable":
        return None
    up_allocs, our_allocs = upstream["allocations"], ours["allocations"]
    if len(up_allocs) != len(our_allocs):
        return f"allocations: upstream {len(up_allocs)}, claimtrail {len(our_allocs)}"
    for up, got in zip(up_allocs, our_allocs, strict=True):
        claim = up["claim"].split("/")[-1]
        if got["claim"].split("/")[-1] != claim:
            return f"claim order: upstream {claim}, claimtrail {got['claim']}"
        up_results = [_result(r) for r in up.get("results") or []]
        our_results = [_result(r) for r in got.get("results") or []]
        if up_results != our_results:
            return f"claim {claim} results: upstream {up_results}, claimtrail {our_results}"
        if _selector(up.get("nodeSelector")) != _selector(got.get("nodeSelector")):
            return f"claim {claim} nodeSelector: upstream {up.get('nodeSelector')}, claimtrail {got.get('nodeSelector')}"
    return None
