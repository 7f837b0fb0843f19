"""The calibration's workload is frozen: the machine's speed is only comparable across runs while
it does exactly the same work, whatever the project's own code becomes."""

from __future__ import annotations

import ast
import hashlib
import json
import sys
from pathlib import Path

import pytest

from benchmarks import calibration_workload as workload


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def test_its_inputs_are_the_ones_the_reference_was_measured_with() -> None:
    # a change here moves every normalised figure: measure benchmarks/reference.json again with it
    assert _digest(workload.records(1000)) == "69649269c74f785726c19f8a2322e05cfcea312ea3a3e8ea613bcd1f8260a057"
    assert _digest([workload._devices(n) for n in range(workload.NODES)]) == "a404a29caec2e058e91d62b463f8f4398e570eb7a8192d1b8c32d3092e3e83ab"


@pytest.mark.parametrize(("node", "count", "model", "expected"), [
    (0, 2, "H100", ["gpu-1", "gpu-9"]),            # the first free pair on one NUMA node
    (0, 3, "A100", ["gpu-3", "gpu-5", "gpu-13"]),  # gpu-4 and gpu-12 skipped: the other NUMA node
    (0, 3, "L40S", None),                          # not enough free devices of the model
    (1, 3, "L40S", ["gpu-3", "gpu-5", "gpu-13"]),
])
def test_its_search_finds_devices_sharing_a_numa_node(node: int, count: int, model: str,
                                                       expected: list[str] | None) -> None:
    assert workload._search(workload._devices(node), count, lambda d: d["model"] == model) == expected


def test_it_calls_nothing_of_the_project() -> None:
    tree = ast.parse(Path(workload.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}
