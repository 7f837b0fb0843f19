"""Fixtures for store tests: a fresh embedded chDB store per test, in the test's tmp directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from audit.store.queries import AuditStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[AuditStore]:
    s = AuditStore.open(f"chdb://{tmp_path}/db")
    try:
        yield s
    finally:
        s.close()


def write_all(store: AuditStore, records: list, **opts: object) -> dict[str, int]:
    """Write records through a synchronous writer and return its counters."""
    writer = store.writer(background=False, **opts)
    writer.write_records(records)
    assert writer.flush()
    stats = writer.stats()
    writer.close()
    return stats
