"""Differential test: a seeded corpus of random cases against the upstream allocator itself.

The oracle is the upstream structured allocator (k8s.io/dynamic-resource-allocation v0.36.2)
compiled behind the same command line as `claimtrail allocate`; it and its case generator are
found by the ``dra_oracle`` and ``dra_fuzzer`` fixtures (``tests/external.py``). The corpus is the generator's hard
profile (more counters, taints, shared devices, constraints and All mode) for fixed seeds, so
every run checks the same cases. Any difference in outcome, devices, result fields, node
selector or error text fails, naming the seed and index that reproduce it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.allocator.upstream_cases import command_line, divergence, run_claimtrail, write_objects

SEED = 20260
CASES = 320


def _generator(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("dra_oracle_fuzz", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved  # the generator puts its own folder first; keep the suite's imports as they were
    module.HARD = True
    return module


def _oracle(oracle: str, case: dict[str, Any], directory: Path, index: int) -> dict[str, Any]:
    path = write_objects(case, directory, f"oracle-{index}")
    done = subprocess.run([oracle, *command_line(case, path)], capture_output=True, text=True, timeout=60)
    if not done.stdout.strip():
        raise AssertionError(f"oracle printed nothing for case {index} (exit {done.returncode}): {done.stderr.strip()[-300:]}")
    document: dict[str, Any] = json.loads(done.stdout)
    return document


def test_claimtrail_matches_upstream_on_seeded_hard_corpus(tmp_path: Path, dra_oracle: str, dra_fuzzer: str) -> None:
    generator = _generator(dra_fuzzer)
    cases = [generator.gen_case(SEED, index) for index in range(CASES)]
    # The oracle runs as processes in two threads while ClaimTrail runs here.
    with ThreadPoolExecutor(max_workers=2) as pool:
        upstream = [pool.submit(_oracle, dra_oracle, case, tmp_path, i) for i, case in enumerate(cases)]
        ours = [run_claimtrail(case, tmp_path) for case in cases]
        answers = [future.result() for future in upstream]
    kinds = {"allocations": 0, "unsatisfiable": 0, "error": 0}
    problems = []
    for index, (up, got) in enumerate(zip(answers, ours, strict=True)):
        kinds[next(k for k in kinds if k in up)] += 1
        found = divergence(up, got)
        if found:
            problems.append(f"fuzz.py --seed {SEED} --hard --only {index}: {found}"[:600])
    assert not problems, f"{len(problems)} of {CASES} cases diverge:\n" + "\n".join(problems[:10])
    # The corpus must exercise every kind of outcome, or it proves little.
    assert all(n > 0 for n in kinds.values()), kinds
