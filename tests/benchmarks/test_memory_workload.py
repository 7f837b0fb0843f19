"""The memory calibration's workload is frozen and does the same work on every machine: the
machine's speed is only comparable across runs while it does exactly the same work."""

from __future__ import annotations

import ast
import hashlib
import json
import sys
from pathlib import Path

import pytest

from benchmarks import memory_workload as workload


def test_its_heap_is_the_one_the_reference_was_measured_with() -> None:
    # a change here moves every memory-scaled figure: measure benchmarks/reference.json again with it
    keys, index, nodes = workload.build(1000)
    digest = hashlib.sha256(json.dumps([keys, index, nodes], sort_keys=True).encode()).hexdigest()
    assert digest == "3bf98205446eb9860f6deae9d301d695b47c306b4968acddc2f2292a3ea5ca10"
    assert (workload.RECORDS, workload.NODES, workload.STEP) == (300_000, 1_000, 2_654_435_761)


def test_its_rounds_read_the_same_checksums_on_every_run() -> None:
    work = workload.make(1000)
    assert [work(), work()] == [14_997, 20_497]  # each round updates what the next one reads


@pytest.mark.parametrize("count", [1000, 7, workload.RECORDS])
def test_its_scattered_order_visits_every_record_exactly_once(count: int) -> None:
    assert sorted(j * workload.STEP % count for j in range(count)) == list(range(count))


def test_its_scattered_order_is_far_from_the_order_the_records_were_made_in() -> None:
    n = workload.RECORDS
    gaps = [abs((j + 1) * workload.STEP % n - j * workload.STEP % n) for j in range(1000)]
    assert min(gaps) > 10_000  # consecutive lookups land megabytes apart, beyond any cache line's neighbours


def test_it_calls_nothing_of_the_project() -> None:
    tree = ast.parse(Path(workload.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}
