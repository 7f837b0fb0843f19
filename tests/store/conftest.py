"""Helpers for store tests (the fresh ``store`` fixture is in ``tests/conftest.py``)."""

from __future__ import annotations

from audit.records import DecisionRecord
from audit.store.queries import AuditStore


def write_all(store: AuditStore, records: list, **opts: object) -> dict[str, int]:
    """Write records through a synchronous writer and return its counters."""
    writer = store.writer(background=False, **opts)
    writer.write_records(records)
    assert writer.flush()
    stats = writer.stats()
    writer.close()
    return stats


def asks_by_id(records: list[DecisionRecord]) -> list[tuple[str, str | None]]:
    """(decision id, tenant scope) of every record as the admin, its own tenant and another tenant
    ask for it, then an unknown id as the admin."""
    out: list[tuple[str, str | None]] = []
    for r in records:
        out += [(r.decision_id, None), (r.decision_id, r.tenant), (r.decision_id, "nobody")]
    return [*out, ("no-such-decision", None)]


def engine_text(store: AuditStore, decision_id: str, tenant: str | None) -> str | None:
    """The record text the engine's single-id query gives, bypassing batching and the id index."""
    with store._reads.client() as client:
        return store._decision_text(client, decision_id, tenant)
