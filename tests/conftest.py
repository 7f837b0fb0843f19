"""Fixtures every test package may use: a fresh embedded chDB store per test, in its tmp directory."""

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
