"""Append-only history as a property: whatever mix of new items, identical re-sends and conflicting
versions arrives, in whatever bodies, the store ends with the first version sent of each key, once,
and the answers account for every line (accepted + absorbed + quarantined)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from audit.records import DecisionRecord, record_text
from audit.store.queries import AuditStore
from audit.store.rows import event_json
from tests.builders import decision

CLUSTERS = itertools.count()


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuditStore]:
    with AuditStore.open(f"chdb://{tmp_path_factory.mktemp('history')}/db") as store:
        yield store


def make_record(cluster: str, key: int, version: int) -> DecisionRecord:
    uid = f"uid-{key}"
    return decision(cluster, uid, 1, seq=key, time=f"2026-05-01T{8 + version:02d}:00:00Z", pod=f"p-{key}", pod_uid=uid,
                    duration_us=version * 7 + key,  # a clock field: differing here alone is still the same decision
                    message=f"version {version}")


def make_event(cluster: str, key: int, version: int) -> bytes:
    return json.dumps({"cluster": cluster, "seq": key, "time": "2026-05-01T07:00:00Z", "type": "upsert",
                       "object_kind": "Node", "namespace": "", "name": f"n-{key}",
                       "payload": {"metadata": {"name": f"n-{key}", "labels": {"v": str(version)}}}}).encode()


sends = st.lists(st.tuples(st.integers(0, 5), st.integers(0, 2)), min_size=1, max_size=25)  # (key, version)
cuts = st.lists(st.integers(1, 6), min_size=1, max_size=8)


def bodies(lines: list[bytes], sizes: list[int]) -> Iterator[bytes]:
    start = 0
    for size in itertools.cycle(sizes):
        if start >= len(lines):
            return
        yield b"\n".join(lines[start:start + size])
        start += size


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sent=sends, sizes=cuts)
def test_the_store_keeps_the_first_version_of_every_key(shared_store: AuditStore, sent: list[tuple[int, int]],
                                                        sizes: list[int]) -> None:
    cluster = f"h{next(CLUSTERS)}"
    first: dict[int, int] = {}
    for key, version in sent:
        first.setdefault(key, version)
    conflicting = sum(1 for key, version in sent if version != first[key])
    for kind, lines in (("records", [json.dumps(make_record(cluster, k, v).to_dict()).encode() for k, v in sent]),
                        ("events", [make_event(cluster, k, v) for k, v in sent])):
        totals = [0, 0, 0]
        for body in bodies(lines, sizes):
            result = shared_store.ingest_jsonl(body, kind, "prop", compressed=False)  # type: ignore[arg-type]
            totals = [totals[0] + result.accepted, totals[1] + result.absorbed, totals[2] + result.quarantined]
        assert totals == [len(first), len(sent) - len(first) - conflicting, conflicting]
    stored = shared_store.client.query("SELECT record FROM decisions WHERE cluster = {c:String} ORDER BY seq",
                                       parameters={"c": cluster}).result_rows
    assert [r[0] for r in stored] == [record_text(make_record(cluster, k, first[k])) for k in sorted(first)]
    events = list(shared_store.event_texts(cluster, -1, 100))
    from audit.events import WorldEvent

    assert [body.decode() for _, body in events] == [
        event_json(WorldEvent.from_dict(json.loads(make_event(cluster, k, first[k])))) for k in sorted(first)]


def test_a_record_differing_only_in_its_measured_duration_is_the_same_decision(shared_store: AuditStore) -> None:
    a = make_record("duration", 1, 0)
    b = DecisionRecord.from_dict({**a.to_dict(), "duration_us": a.duration_us + 1})
    assert shared_store.ingest_jsonl(record_text(a).encode(), "records", "t").accepted == 1
    again = shared_store.ingest_jsonl(record_text(b).encode(), "records", "t")
    assert (again.accepted, again.absorbed, again.quarantined) == (0, 1, 0)


def test_a_line_over_the_size_limit_is_quarantined_unparsed_and_its_neighbours_stored(
        shared_store: AuditStore) -> None:
    from audit.store.ingest import MAX_LINE_BYTES

    good = [json.dumps(make_record("long", k, 0).to_dict()).encode() for k in (1, 2)]
    huge = b"[" + b"0," * (MAX_LINE_BYTES // 2) + b"0]"
    result = shared_store.ingest_jsonl(b"\n".join([good[0], huge, good[1]]), "records", "t", compressed=False)
    assert (result.accepted, result.quarantined) == (2, 1)
    assert result.errors == [{"line": 2, "path": "",
                              "error": f"line 2: {len(huge)} bytes exceed the limit of {MAX_LINE_BYTES} per line; "
                                       "not parsed"}]
