"""``claimtrail serve`` killed with SIGKILL at several points of an ingest run, restarted on the same
data directory, while a sender retries every body until it is answered: at the end the store holds
each decision id and each event seq exactly once, in rows, not only after deduplicating reads."""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from pathlib import Path

import httpx

from audit.store.queries import AuditStore
from tests.api.conftest import Server, auth, start_server, stop
from tests.api.test_hardened_ingest import event, line, record

BODIES, PER_BODY = 12, 150
# (body index, when): "in-flight" kills while that body's request is being served, "answered"
# right after the server answered it, before the sender goes on
KILLS = {2: "in-flight", 5: "answered", 7: "in-flight", 9: "in-flight", 10: "answered"}


def bodies() -> list[tuple[str, bytes]]:
    out: list[tuple[str, bytes]] = []
    for b in range(BODIES):
        first = b * PER_BODY
        out.append(("events", b"\n".join(event(s, {"body": str(b)}) for s in range(first, first + PER_BODY))))
        out.append(("records", b"\n".join(line(record(n)) for n in range(first, first + PER_BODY))))
    return out


def kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def post_until_answered(current: dict[str, Server], kind: str, body: bytes) -> dict[str, int]:
    """The sender's retry loop: connection failures and 503s are retried, anything else is final.
    ``current["server"]`` is where the server listens now (a restart may move it)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            answer = httpx.post(f"{current['server'].base}/v1/ingest/{kind}", content=body, headers=auth("admin"),
                                timeout=60)
        except httpx.TransportError:
            time.sleep(0.2)
            continue
        if answer.status_code == 503:
            time.sleep(float(answer.headers.get("retry-after", "1")))
            continue
        assert answer.status_code == 200, answer.text
        result: dict[str, int] = answer.json()
        return result
    raise AssertionError(f"{kind} body never answered")


def test_sigkill_during_ingest_then_restart_loses_and_doubles_nothing(tmp_path: Path) -> None:
    server, proc = start_server(tmp_path)
    current = {"server": server}
    kills = 0
    try:
        for index, (kind, body) in enumerate(bodies()):
            when = KILLS.get(index // 2) if kind == "records" else None
            if when == "in-flight":
                sender = threading.Thread(target=post_until_answered, args=(current, kind, body), daemon=True)
                sender.start()
                time.sleep(0.05 * (kills + 1))  # a different moment of the request each time
                kill(proc)
                kills += 1
                current["server"], proc = start_server(tmp_path)
                sender.join(timeout=200)
                assert not sender.is_alive()
            post_until_answered(current, kind, body)  # the retry after a kill (absorbed), or the plain send
            if when == "answered":
                kill(proc)
                kills += 1
                current["server"], proc = start_server(tmp_path)
    finally:
        stop(proc)
    assert kills == len(KILLS)
    total = BODIES * PER_BODY
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        rows = store.client.query("SELECT count(), uniqExact(decision_id) FROM decisions").result_rows[0]
        assert tuple(rows) == (total, total)
        ids = {r[0] for r in store.client.query("SELECT decision_id FROM decisions").result_rows}
        assert ids == {record(n).decision_id for n in range(total)}
        rows = store.client.query("SELECT count(), uniqExact(seq), min(seq), max(seq) FROM events "
                                  "WHERE cluster = 'hard'").result_rows[0]
        assert tuple(rows) == (total, total, 0, total - 1)
        bodies_by_seq = dict(store.event_texts("hard", -1, total))
        assert all(json.loads(bodies_by_seq[s])["payload"]["metadata"]["labels"] == {"body": str(s // PER_BODY)}
                   for s in range(total))
        assert store.quarantine_count() == 0

