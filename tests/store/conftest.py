"""Helpers for store tests (the fresh ``store`` fixture is in ``tests/conftest.py``)."""

from __future__ import annotations

from audit.store.queries import AuditStore


def write_all(store: AuditStore, records: list, **opts: object) -> dict[str, int]:
    """Write records through a synchronous writer and return its counters."""
    writer = store.writer(background=False, **opts)
    writer.write_records(records)
    assert writer.flush()
    stats = writer.stats()
    writer.close()
    return stats
