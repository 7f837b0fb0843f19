"""Fixtures every test package may use: a fresh embedded chDB store per test, in its tmp directory, and
the data and tools outside the repository (``trace_dir``, ``dra_oracle``), which skip when absent;
and the Hypothesis settings every property test runs under (no wall-clock deadline, the same
examples every run unless ``HYPOTHESIS_PROFILE=explore``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from audit.store.queries import AuditStore
from tests import external

# Hypothesis fails an example that runs past a wall-clock deadline (200 ms by default): a timed
# assertion, which a shared, loaded machine trips with no fault in the code. Speed is measured by
# ``make bench``; property tests check properties only.
# The suite draws the same examples on every run (derandomize): a red run then names a defect of
# the change under test, not one a random draw happened upon in code nobody touched.
# HYPOTHESIS_PROFILE=explore draws new examples, ten times as many, to look for those.
settings.register_profile("claimtrail", deadline=None, derandomize=True)
settings.register_profile("explore", deadline=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "claimtrail"))


@pytest.fixture(scope="session")
def _empty_store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store just created by ``AuditStore.open`` (every migration applied), closed: its copy."""
    root = tmp_path_factory.mktemp("empty-store") / "db"
    AuditStore.open(f"chdb://{root}").close()
    return root


@pytest.fixture
def store(tmp_path: Path, _empty_store_dir: Path) -> Iterator[AuditStore]:
    # a copy of a freshly created store opens in a third of the time creating one takes (forty
    # DDL statements); the table links inside are relative, so the copy is a store of its own
    shutil.copytree(_empty_store_dir, tmp_path / "db", symlinks=True)
    s = AuditStore.open(f"chdb://{tmp_path}/db")
    try:
        yield s
    finally:
        s.close()


# ---- data and tools outside the repository (see tests/external.py) --------------------------------

_MISSING = pytest.StashKey[dict[str, int]]()

@pytest.fixture(scope="session")
def trace_dir() -> str:
    """The Alibaba GPU traces' folder; skips with the command that downloads them when absent."""
    return external.trace_dir()


@pytest.fixture(scope="session")
def dra_oracle() -> str:
    """Path of the upstream allocator command; skips saying how to provide it when absent."""
    return external.dra_oracle()


@pytest.fixture(scope="session")
def dra_fuzzer() -> str:
    """Path of the oracle's case generator; skips saying how to provide it when absent."""
    return external.dra_fuzzer()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    config.stash[_MISSING] = external.missing_count(terminalreporter.stats.get("skipped", []))


def pytest_unconfigure(config: pytest.Config) -> None:
    # after pytest's own summary line, so the run ends with it
    counts = config.stash.get(_MISSING, None)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if counts is None or reporter is None or config.option.collectonly:
        return
    detail = "; ".join(f"{n} for {what}" for what, n in sorted(counts.items()))
    reporter.write_line(f"{sum(counts.values())} test(s) skipped for missing external data"
                        + (f" ({detail})" if detail else ""))
