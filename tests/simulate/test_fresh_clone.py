"""A copy of the repository with nothing beside it: the suite collects, and the tests that need the
traces or the oracle skip naming what is missing and how to get it, instead of failing."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IGNORED = shutil.ignore_patterns(".git", ".venv", ".claimtrail", "__pycache__", ".pytest_cache", ".mypy_cache",
                                 ".ruff_cache", "*.egg-info", "results.json")


@pytest.fixture(scope="module")
def lone_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("fresh") / "claimtrail"
    shutil.copytree(REPO, copy, ignore=IGNORED)
    assert not (copy.parent / "shared").exists()
    return copy


def _pytest(copy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CLAIMTRAIL_TRACE_DIR", "CLAIMTRAIL_DATA_DIR", "CLAIMTRAIL_DRA_ORACLE",
                        "CLAIMTRAIL_REQUIRE_EXTERNAL", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = str(copy)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=copy,
                          capture_output=True, text=True, env=env, timeout=600)


@pytest.mark.slow
def test_the_whole_suite_collects_without_the_shared_folder(lone_copy):
    out = _pytest(lone_copy, "--collect-only", "-q")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    # exit 0 means no collection error (2 would); every module is listed with its count
    assert re.search(r"^tests/simulate/test_traces\.py: [1-9][0-9]*$", out.stdout, re.M), out.stdout[-3000:]


@pytest.mark.slow
def test_trace_tests_skip_with_the_reason_and_are_counted(lone_copy):
    out = _pytest(lone_copy, "tests/simulate/test_traces.py")
    assert out.returncode == 0, out.stdout[-3000:]
    looked = f"{lone_copy}/.claimtrail/traces, {lone_copy.parent}/shared/traces"
    reason = f"MISSING external data: the Alibaba GPU traces (looked in {looked}); run `make traces` to download them"
    skip_lines = [line for line in out.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skip_lines) == 3 and all(line.endswith(reason) for line in skip_lines), out.stdout
    last_two = out.stdout.rstrip().splitlines()[-2:]
    assert re.match(r"[1-9][0-9]* passed, 3 skipped", last_two[0]), last_two
    # the run ends with the count, so a skipped check is not read as a passed one
    assert last_two[1] == "3 test(s) skipped for missing external data (3 for the Alibaba GPU traces)"


@pytest.mark.slow
def test_ci_can_require_the_external_data(lone_copy):
    env_out = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "tests/simulate/test_traces.py"],
                             cwd=lone_copy, capture_output=True, text=True, timeout=600,
                             env={**{k: v for k, v in os.environ.items() if k != "CLAIMTRAIL_TRACE_DIR"},
                                  "PYTHONPATH": str(lone_copy), "CLAIMTRAIL_REQUIRE_EXTERNAL": "1"})
    assert env_out.returncode == 1
    assert re.match(r"[1-9][0-9]* passed, 3 errors", env_out.stdout.rstrip().splitlines()[-2]), env_out.stdout[-2000:]
    assert "MISSING external data: the Alibaba GPU traces (looked in" in env_out.stdout


def test_the_oracle_fixture_skips_naming_it(lone_copy):
    probe = lone_copy / "tests" / "test_probe_oracle.py"
    probe.write_text("def test_needs_oracle(dra_oracle):\n    assert dra_oracle\n")
    try:
        out = _pytest(lone_copy, "tests/test_probe_oracle.py")
    finally:
        probe.unlink()
    assert out.returncode == 0, out.stdout
    assert (f"MISSING external data: the dra-oracle binary (looked in {lone_copy.parent}/shared/tools/dra-oracle/bin/"
            "dra-oracle); set CLAIMTRAIL_DRA_ORACLE to a dra-oracle build of k8s.io/dynamic-resource-allocation "
            "v0.36.2") in out.stdout
    assert out.stdout.rstrip().splitlines()[-1] == (
        "1 test(s) skipped for missing external data (1 for the dra-oracle binary)")
