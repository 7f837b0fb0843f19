"""Bodies of records parsed in the child process are stored, absorbed and quarantined exactly as
when they are parsed in the server's own process.

One embedded engine per process: both ways run on one store, each case twice under its own id
prefix, and the answers, stored texts and quarantine rows are compared with the prefix (and the
digests that depend on it) masked.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
from collections.abc import Callable, Iterator

import pytest

from audit.records import DecisionRecord, to_jsonl
from audit.store.connection import StoreError
from audit.store.queries import AuditStore
from tests.store.conftest import write_all
from tests.store.factory import make_record

Case = Callable[[AuditStore, str], bytes]  # stores what the case needs, returns the body to ingest


def _rec(prefix: str, i: int, **changes: object) -> DecisionRecord:
    return dataclasses.replace(make_record(i), decision_id=f"{prefix}{i:03d}", **changes).seal()  # type: ignore[arg-type]


def _line(record: DecisionRecord) -> bytes:
    return to_jsonl([record]).strip().encode()


def _good_and_bad_lines(store: AuditStore, p: str) -> bytes:
    unknown = json.loads(_line(_rec(p, 3)))
    unknown["color"] = "blue"
    missing = json.loads(_line(_rec(p, 4)))
    del missing["tenant"]
    return b"\n".join([
        _line(_rec(p, 1)),
        f'{{"decision_id": "{p}broken", '.encode(),  # not JSON
        f'{{"decision_id": "{p}deep", "x": '.encode() + b"[" * 10_000 + b"]" * 10_000 + b"}",
        _line(_rec(p, 2)),
        json.dumps(unknown).encode(),
        json.dumps(missing).encode(),
        _line(_rec(p, 5, attempt=70_000)),  # valid JSON and record, too large for its column
        b"",
        _line(_rec(p, 6)),
    ])


def _resends_of_stored_decisions(store: AuditStore, p: str) -> bytes:
    write_all(store, [_rec(p, 10), _rec(p, 11), _rec(p, 12)])
    return b"\n".join([
        _line(_rec(p, 10)),  # identical: absorbed
        _line(_rec(p, 11, node="node-elsewhere")),  # conflicts with the stored one: quarantined
        _line(_rec(p, 12, duration_us=12_345)),  # the same decision measured again: absorbed
        _line(_rec(p, 13)),  # new
    ])


def _one_new_id_twice_in_a_body(store: AuditStore, p: str) -> bytes:
    return b"\n".join([_line(_rec(p, 20)), _line(_rec(p, 20, node="node-elsewhere")), _line(_rec(p, 20))])


def _mask(value: object, prefix: str) -> str:
    return re.sub(r"\b[0-9a-f]{64}\b", "<sha256>", json.dumps(value, sort_keys=True).replace(prefix, "<p>"))


def _outcome(store: AuditStore, prefix: str, body: bytes) -> tuple[str, str, str]:
    answer = store.ingest_jsonl(body, "records", "api")
    stored = store._query("SELECT decision_id, any(record) FROM decisions WHERE startsWith(decision_id, {p:String}) "
                          "GROUP BY decision_id ORDER BY decision_id", {"p": prefix}).result_rows
    quarantined = sorted((row["error"], row["path"], row["raw"], row["raw_size"]) for row in store.quarantined(1000)
                         if prefix in row["raw"])
    return _mask(answer.to_dict(), prefix), _mask(stored, prefix), _mask(quarantined, prefix)


@pytest.fixture
def worker_store(store: AuditStore) -> Iterator[AuditStore]:
    store.parse_in_child_process()
    yield store


@pytest.mark.parametrize("case", [_good_and_bad_lines, _resends_of_stored_decisions, _one_new_id_twice_in_a_body],
                         ids=["good-and-bad-lines", "re-sends-of-stored-decisions", "one-new-id-twice"])
def test_a_body_parsed_in_the_child_is_stored_as_one_parsed_here(store: AuditStore, case: Case) -> None:
    here = _outcome(store, "here-", case(store, "here-"))
    store.parse_in_child_process()
    child = _outcome(store, "kid--", case(store, "kid--"))  # same length as "here-": same raw sizes
    assert child == here
    answer = json.loads(child[0])
    assert answer["accepted"] > 0 and (answer["quarantined"] > 0 or answer["absorbed"] > 0)


def test_bodies_are_parsed_in_another_process(worker_store: AuditStore) -> None:
    pid = worker_store._parser.pid() if worker_store._parser else None
    assert pid is not None and pid != os.getpid()
    os.kill(pid, 0)  # alive


def test_the_parser_yields_the_cores_to_reads(worker_store: AuditStore) -> None:
    from audit.store.ingest_worker import NICENESS

    pid = worker_store._parser.pid() if worker_store._parser else None
    assert pid is not None
    assert os.getpriority(os.PRIO_PROCESS, pid) == min(19, os.getpriority(os.PRIO_PROCESS, 0) + NICENESS)


def test_a_killed_parser_fails_that_body_as_unavailable_and_the_next_body_is_parsed(worker_store: AuditStore) -> None:
    parser = worker_store._parser
    assert parser is not None
    first = parser.pid()
    assert first is not None
    os.kill(first, signal.SIGKILL)
    with pytest.raises(StoreError, match="parser process stopped"):
        worker_store.ingest_jsonl(_line(_rec("dead-", 1)), "records", "api")
    assert worker_store.get_decision("dead-001", None) is None
    answer = worker_store.ingest_jsonl(_line(_rec("next-", 1)), "records", "api")
    assert answer.accepted == 1 and answer.delivered
    assert parser.pid() not in (None, first)
    assert worker_store.get_decision("next-001", None) is not None


def test_the_parser_ends_when_the_server_process_is_killed(tmp_path) -> None:
    """A server killed outright leaves no parser process behind."""
    import subprocess
    import sys
    import time

    script = ("import sys\nfrom audit.store.queries import AuditStore\n"
              f"s = AuditStore.open('chdb://{tmp_path}/db')\ns.parse_in_child_process()\n"
              "print(s._parser.pid(), flush=True)\nsys.stdin.read()\n")
    server = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        child = int(server.stdout.readline())
        os.kill(child, 0)  # running while the server runs
        server.kill()
        server.wait(timeout=60)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        os.kill(child, signal.SIGKILL)
        pytest.fail(f"parser process {child} outlived the killed server")
    finally:
        if server.poll() is None:
            server.kill()
