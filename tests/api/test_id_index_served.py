"""A server reading decisions by id from its index file answers, byte for byte and for every caller,
what a server reading them from the store engine answers, without asking the engine.

Both servers run on the same store, one after the other: first with ``--no-id-index``, then with
the index, which a restart finds already holding what the first run's ingest stored.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from audit.records import to_jsonl
from tests.api import factory
from tests.api.conftest import Server, start_server, stop

CALLERS = ["admin", "team-a", "team-b"]


def _metric(server: Server, name: str) -> float | None:
    found = re.search(rf"^claimtrail_store{{counter=\"{name}\"}} (\S+)$", server.get("/metrics", who=None).text, re.M)
    return float(found.group(1)) if found else None


def _answers(server: Server) -> list[tuple[int, bytes]]:
    ids = [r.decision_id for r in factory.RECORDS] + ["00000000-0000-4000-8000-000000000000"]
    return [(a.status_code, a.content) for a in (server.get(f"/v1/decisions/{d}", who=who)
                                                  for d in ids for who in CALLERS)]


def test_reads_by_id_from_the_index_are_the_engines_answers(tmp_path: Path) -> None:
    server, proc = start_server(tmp_path, "--no-id-index")
    try:
        assert server.post("/v1/ingest/records", content=to_jsonl(factory.RECORDS).encode()).status_code == 200
        engine = _answers(server)
        assert _metric(server, "id_index_hits") is None  # no index: every read asked the engine
    finally:
        stop(proc)
    # the index file starts with this run and copies the store before its first answer is counted
    server, proc = start_server(tmp_path)
    try:
        deadline = time.monotonic() + 60
        while _metric(server, "id_index_backfilled") != 1.0 and time.monotonic() < deadline:
            time.sleep(0.1)
        lookups = _metric(server, "id_lookups")
        assert _answers(server) == engine
        # the admin finds all five, each tenant its own, nobody the unknown id
        assert [status for status, _ in engine].count(200) == 2 * len(factory.RECORDS)
        assert _metric(server, "id_index_hits") == 3 * len(factory.RECORDS)  # every caller's read of a stored id
        assert _metric(server, "id_index_misses") == 3.0  # the unknown id, once per caller
        assert _metric(server, "id_lookups") == (lookups or 0) + 3  # which alone asked the engine
    finally:
        stop(proc)
