"""Tests that need data or tools not in this repository: find them, or skip saying what is missing.

Two things live outside the repository: the public Alibaba GPU traces (``make traces`` downloads
them) and ``dra-oracle``, the upstream Go allocator (k8s.io/dynamic-resource-allocation v0.36.2)
built as a command, used by the differential tests. Both are looked for in a ``shared`` checkout
beside the repository (``../shared/traces``, ``../shared/tools/dra-oracle/bin/dra-oracle``) after
their settings (``CLAIMTRAIL_TRACE_DIR`` and ``.claimtrail/traces``; ``CLAIMTRAIL_DRA_ORACLE``).

Use the ``trace_dir`` and ``dra_oracle`` fixtures of ``tests/conftest.py``: when the thing is
missing the test is skipped with one line that starts with ``MISSING`` and names what is missing,
where it was looked for and the command that provides it. The suite's last lines count these
skips, so a skipped check is never taken for a passed one. With ``CLAIMTRAIL_REQUIRE_EXTERNAL=1``
(CI, which has them) a missing one fails the test instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ingest.simulate import trace_files

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
MISSING = "MISSING external data:"
REQUIRE_ENV = "CLAIMTRAIL_REQUIRE_EXTERNAL"

TRACE_FILES = tuple(f.path for f in trace_files.TRACE_FILES)  # what the simulator reads


def _missing(what: str, looked: list[Path], provider: str) -> None:
    message = f"{MISSING} {what} (looked in {', '.join(str(p) for p in looked)}); {provider}"
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def trace_dir() -> str:
    """The folder holding the traces the simulator reads, or a skip naming ``make traces``."""
    looked = [Path(os.environ["CLAIMTRAIL_TRACE_DIR"])] if os.environ.get("CLAIMTRAIL_TRACE_DIR") else []
    looked += [REPO / ".claimtrail" / "traces", SHARED / "traces"]
    for folder in looked:
        if all((folder / f).is_file() for f in TRACE_FILES):
            return str(folder)
    _missing("the Alibaba GPU traces", looked, "run `make traces` to download them")
    raise AssertionError("unreachable")


def dra_oracle() -> str:
    """The upstream allocator as a command, or a skip naming how to provide it."""
    looked = [Path(os.environ["CLAIMTRAIL_DRA_ORACLE"])] if os.environ.get("CLAIMTRAIL_DRA_ORACLE") else []
    looked.append(SHARED / "tools" / "dra-oracle" / "bin" / "dra-oracle")
    for path in looked:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    _missing("the dra-oracle binary", looked,
             "set CLAIMTRAIL_DRA_ORACLE to a dra-oracle build of k8s.io/dynamic-resource-allocation v0.36.2")
    raise AssertionError("unreachable")


def dra_fuzzer() -> str:
    """The oracle's random case generator (``fuzz.py`` beside its ``bin/``), or a skip."""
    looked = [Path(os.environ["CLAIMTRAIL_DRA_FUZZER"])] if os.environ.get("CLAIMTRAIL_DRA_FUZZER") else []
    looked.append(Path(dra_oracle()).resolve().parents[1] / "fuzz.py")
    for path in looked:
        if path.is_file():
            return str(path)
    _missing("the dra-oracle case generator", looked,
             "set CLAIMTRAIL_DRA_FUZZER to the fuzz.py that comes with the dra-oracle build")
    raise AssertionError("unreachable")


def missing_count(skipped: list[pytest.TestReport]) -> dict[str, int]:
    """How many skips were for missing external data, by what was missing."""
    counts: dict[str, int] = {}
    for report in skipped:
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        if MISSING in reason:
            what = reason.split(MISSING, 1)[1].split(" (looked", 1)[0].strip()
            counts[what] = counts.get(what, 0) + 1
    return counts
