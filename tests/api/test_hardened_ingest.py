"""Ingest against a real ``claimtrail serve`` on loopback: hostile bodies cost bounded memory and
work, never a 5xx, and never take the good lines of the same body down with them; history is
append-only; server conditions are not reported as client errors."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from audit.events import WorldEvent
from audit.records import DecisionRecord
from audit.store.ingest import MAX_LINES
from audit.store.queries import AuditStore
from audit.store.rows import event_json
from tests.api.conftest import Server, start_server, stop
from tests.builders import decision

MAX_BODY_MB = 16


def record(n: int, *, hour: int = 8, pod: str = "", tenant: str = "team-a") -> DecisionRecord:
    uid = f"10000000-0000-4000-8000-{n:012d}"
    return decision("hard", uid, 1, seq=n, time=f"2026-05-01T{hour:02d}:00:00.000Z", tenant=tenant,
                    pod=pod or f"job-{n}", pod_uid=f"uid-{n}", claims=[f"job-{n}-gpu"], engine_version="test")


def line(r: DecisionRecord) -> bytes:
    return json.dumps(r.to_dict(), sort_keys=True).encode()


def event(seq: int, labels: dict[str, str]) -> bytes:
    return json.dumps({"cluster": "hard", "seq": seq, "time": "2026-05-01T07:00:00.000Z", "type": "upsert",
                       "object_kind": "Node", "namespace": "", "name": f"node-{seq}",
                       "payload": {"apiVersion": "v1", "kind": "Node",
                                   "metadata": {"name": f"node-{seq}", "labels": labels}}}).encode()


def metric(server: Server, name: str) -> float:
    text = server.get("/metrics", who=None).text
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    assert found, f"{name} not in /metrics"
    return float(found.group(1))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path]]:
    root = tmp_path_factory.mktemp("hardened")
    server, proc = start_server(root, "--max-body-mb", str(MAX_BODY_MB))
    try:
        yield server, root
    finally:
        stop(proc)


def test_a_deeply_nested_line_is_quarantined_and_the_good_lines_of_its_body_are_stored(
        served: tuple[Server, Path]) -> None:
    server, _ = served
    first, last = record(1), record(2)
    quarantined_before = metric(server, 'claimtrail_store{counter="writer_quarantined"}')
    body = b"\n".join([line(first), b"[" * 10_000 + b"]" * 10_000, line(last)])
    answer = server.post("/v1/ingest/records", content=body)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert (result["accepted"], result["quarantined"]) == (2, 1)
    assert result["errors"][0]["line"] == 2 and "nested too deeply" in result["errors"][0]["error"]
    assert metric(server, 'claimtrail_store{counter="writer_quarantined"}') == quarantined_before + 1
    for r in (first, last):
        assert server.get(f"/v1/decisions/{r.decision_id}").json()["pod"] == r.pod


def _bomb(layers: int) -> bytes:
    body = b"\n" * (200 * 2**20)  # 200 MiB of nothing: about 200 KiB gzipped once, under 1 KiB twice
    for _ in range(layers):
        body = gzip.compress(body)
    return body


@pytest.mark.parametrize(("layers", "headers", "message"), [
    (2, {"Content-Encoding": "gzip"}, "gzip data inside a gzip body"),
    (1, {}, "without Content-Encoding: gzip"),
], ids=["double-gzip", "gzip-without-content-encoding"])
def test_gzip_where_json_lines_belong_is_refused_without_expanding_it(
        served: tuple[Server, Path], layers: int, headers: dict[str, str], message: str) -> None:
    server, _ = served
    peak_before = metric(server, "process_max_resident_memory_bytes")
    answer = server.post("/v1/ingest/records", content=_bomb(layers), headers=headers)
    assert answer.status_code == 415 and message in answer.json()["detail"]
    # the inner layer is never opened: the peak moves by far less than the 200 MiB it holds
    assert metric(server, "process_max_resident_memory_bytes") - peak_before < 64 * 2**20


@pytest.mark.parametrize(("kind", "item"), [
    ("records", line(record(7001))), ("events", event(7001, {})),
], ids=["records", "events"])
def test_a_form_upload_is_refused_whole_not_split_into_quarantined_lines(served: tuple[Server, Path], kind: str,
                                                                       item: bytes) -> None:
    server, _ = served
    answer = server.post(f"/v1/ingest/{kind}", files={"file": ("day.jsonl", item + b"\n")})  # curl -F file=@day.jsonl
    assert answer.status_code == 415, answer.text
    assert "multipart/form-data" in answer.json()["detail"] and "--data-binary" in answer.json()["detail"]
    plain = server.post(f"/v1/ingest/{kind}", content=item, headers={"Content-Type": "application/x-ndjson"})
    assert (plain.json()["accepted"], plain.json()["quarantined"]) == (1, 0)  # nothing of the upload was kept


@pytest.mark.parametrize(("lines", "status"), [(MAX_LINES + 1, 413), (5 * 2**20, 413)],
                         ids=["just-over-the-line-limit", "millions-of-tiny-lines"])
def test_bodies_of_too_many_lines_are_refused_whole_before_any_line_is_parsed(
        served: tuple[Server, Path], lines: int, status: int) -> None:
    server, _ = served
    quarantined_before = metric(server, 'claimtrail_store{counter="writer_quarantined"}')
    peak_before = metric(server, "process_max_resident_memory_bytes")
    answer = server.post("/v1/ingest/records", content=gzip.compress(b"[]\n" * (lines - 1) + b"[]"),
                         headers={"Content-Encoding": "gzip"})
    assert answer.status_code == status and f"lines exceed the limit of {MAX_LINES}" in answer.json()["detail"]
    assert metric(server, 'claimtrail_store{counter="writer_quarantined"}') == quarantined_before
    assert metric(server, "process_max_resident_memory_bytes") - peak_before < 4 * MAX_BODY_MB * 2**20


# (a record of its own, the body around it, the lines counted when that is over the limit)
LINE_COUNTS = {
    "as-many-lines-as-allowed-each-ended-by-a-newline": (61, lambda last: b"\n" * (MAX_LINES - 1) + last + b"\n", None),
    "as-many-lines-as-allowed-the-last-unended": (62, lambda last: b"\n" * (MAX_LINES - 1) + last, None),
    "one-line-more-each-ended-by-a-newline": (63, lambda last: b"\n" * MAX_LINES + last + b"\n", MAX_LINES + 1),
    "one-line-more-the-last-unended": (64, lambda last: b"\n" * MAX_LINES + last, MAX_LINES + 1),
    "one-line-more-the-last-blank": (65, lambda last: last + b"\n" * MAX_LINES + b" ", MAX_LINES + 1),
}


@pytest.mark.parametrize(("n", "body", "counted"), LINE_COUNTS.values(), ids=LINE_COUNTS.keys())
def test_the_line_limit_counts_lines_as_a_json_lines_reader_does(served: tuple[Server, Path], n: int, body: Any,
                                                                  counted: int | None) -> None:
    server, _ = served
    answer = server.post("/v1/ingest/records", content=body(line(record(n))))
    if counted is None:
        assert (answer.status_code, answer.json()["accepted"], answer.json()["errors"]) == (200, 1, [])
    else:
        assert (answer.status_code, answer.json()["detail"]) == (
            413, f"ingest body: {counted} lines exceed the limit of {MAX_LINES} per request; send them in smaller bodies")


def test_a_gzip_body_that_expands_past_the_limit_stops_at_the_limit(served: tuple[Server, Path]) -> None:
    server, _ = served
    peak_before = metric(server, "process_max_resident_memory_bytes")
    answer = server.post("/v1/ingest/records", content=gzip.compress(b" " * (1 << 30)),
                         headers={"Content-Encoding": "gzip"})
    assert answer.status_code == 413 and "decompressed body exceeds the limit" in answer.json()["detail"]
    assert metric(server, "process_max_resident_memory_bytes") - peak_before < 4 * MAX_BODY_MB * 2**20


def test_unknown_record_fields_are_counted_and_named_in_the_answer(served: tuple[Server, Path]) -> None:
    server, _ = served
    tiers = [{"index": 0, "request": "gpu", "model": "H100", "considered": 1}]
    data = {**DecisionRecord.from_dict({**record(3).to_dict(), "tiers": tiers}).seal().to_dict(), "colour": "blue"}
    data["tiers"][0]["shade"] = 1
    answer = server.post("/v1/ingest/records", content=json.dumps(data).encode()).json()
    assert (answer["accepted"], answer["unknown_fields"]) == (1, 2)
    assert [(w["line"], w["path"]) for w in answer["warnings"]] == [(1, "colour"), (1, "tiers.0.shade")]


def test_an_identical_resend_is_absorbed_and_a_conflicting_one_is_quarantined_with_both_digests(
        served: tuple[Server, Path]) -> None:
    server, _ = served
    original = record(10, hour=8)
    assert server.post("/v1/ingest/records", content=line(original)).json()["accepted"] == 1
    stored = server.get(f"/v1/decisions/{original.decision_id}").content
    again = server.post("/v1/ingest/records", content=line(original)).json()
    assert (again["accepted"], again["absorbed"], again["quarantined"]) == (0, 1, 0)
    moved = record(10, hour=9)  # the same decision id, re-sent in another hour
    answer = server.post("/v1/ingest/records", content=line(moved)).json()
    assert (answer["accepted"], answer["absorbed"], answer["quarantined"]) == (0, 0, 1)
    assert answer["errors"][0]["error"] == (
        f"decision {original.decision_id}: conflicts with the stored one (stored output_digest "
        f"{original.output_digest}, sent output_digest {moved.output_digest}); history is append-only, the stored "
        "one is kept")
    assert server.get(f"/v1/decisions/{original.decision_id}").content == stored
    listed = server.get("/v1/decisions", pod=original.pod).json()["items"]
    assert [r["time"] for r in listed] == [original.time]


def test_two_versions_of_a_new_decision_in_one_body_are_told_apart_from_a_stored_conflict(
        served: tuple[Server, Path]) -> None:
    server, _ = served
    first, second = record(11, hour=8), record(11, hour=10)
    answer = server.post("/v1/ingest/records", content=b"\n".join([line(first), line(second)])).json()
    assert (answer["accepted"], answer["quarantined"]) == (1, 1)
    assert answer["errors"] == [{"line": 2, "path": "decision_id", "error": (
        f"decision {first.decision_id}: conflicts with an earlier one in this request (earlier output_digest "
        f"{first.output_digest}, sent output_digest {second.output_digest}); history is append-only, the earlier "
        "one is kept")}]
    assert server.get(f"/v1/decisions/{first.decision_id}").json()["time"] == first.time


def test_concurrent_first_ingests_after_a_start_all_succeed(tmp_path: Path) -> None:
    server, proc = start_server(tmp_path)
    try:
        bodies = [b"\n".join(line(record(100 + 10 * i + j)) for j in range(10)) for i in range(8)]
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda b: server.post("/v1/ingest/records", content=b), bodies))
        assert [a.status_code for a in answers] == [200] * 8
        assert sum(a.json()["accepted"] for a in answers) == 80
    finally:
        stop(proc)


def test_a_method_the_route_does_not_have_is_405_with_allow(served: tuple[Server, Path]) -> None:
    server, _ = served
    answer = server.post("/v1/decisions", content=b"{}")
    assert answer.status_code == 405 and answer.headers["allow"] == "GET"
    assert answer.headers["content-type"] == "application/problem+json"


def test_conflicting_event_and_decision_resends_leave_the_stored_history_byte_identical(tmp_path: Path) -> None:
    server, proc = start_server(tmp_path)
    events = [event(1, {"zone": "a"}), event(2, {"zone": "b"})]
    decisions = [record(20, hour=8), record(21, hour=8)]
    try:
        assert server.post("/v1/ingest/events", content=b"\n".join(events)).json()["accepted"] == 2
        assert server.post("/v1/ingest/records", content=b"\n".join(map(line, decisions))).json()["accepted"] == 2
        rewritten = server.post("/v1/ingest/events", content=b"\n".join([event(2, {"zone": "c"}), events[0]])).json()
        assert (rewritten["accepted"], rewritten["absorbed"], rewritten["quarantined"]) == (0, 1, 1)
        assert "event hard/2: conflicts with the stored one" in rewritten["errors"][0]["error"]
        moved = server.post("/v1/ingest/records", content=line(record(21, hour=11))).json()
        assert (moved["accepted"], moved["quarantined"]) == (0, 1)
    finally:
        stop(proc)
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        assert [body for _, body in store.event_texts("hard", 0, 10)] == [
            event_json(WorldEvent.from_dict(json.loads(e))).encode() for e in events]
        rows = store.client.query("SELECT decision_id, toHour(time), count() FROM decisions WHERE cluster = 'hard' "
                                  "GROUP BY decision_id, time ORDER BY decision_id").result_rows
        assert sorted(rows) == sorted((d.decision_id, 8, 1) for d in decisions)
        conflicts = [row for row in store.quarantined(10) if "conflicts with the stored one" in row["error"]]
        assert sorted(row["kind"] for row in conflicts) == ["event", "record"]


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_an_oversized_otlp_body_is_refused_while_it_streams_in(served: tuple[Server, Path], declared: bool) -> None:
    server, _ = served
    size = 3 * MAX_BODY_MB * 2**20
    peak_before = metric(server, "process_max_resident_memory_bytes")

    def chunks() -> Iterator[bytes]:
        for _ in range(size // 2**20):
            yield b"\0" * 2**20

    content = b"\0" * size if declared else chunks()
    try:
        answer = server.post("/v1/traces", content=content, headers={"Content-Type": "application/x-protobuf"})
    except httpx.WriteError:  # the server may answer and close before the whole body is sent
        pass
    else:
        assert answer.status_code == 413
    assert metric(server, "process_max_resident_memory_bytes") - peak_before < 2 * MAX_BODY_MB * 2**20


def test_a_decision_and_its_why_are_served_from_the_cache_once_found(served: tuple[Server, Path]) -> None:
    server, _ = served
    r = record(30)
    assert server.get(f"/v1/decisions/{r.decision_id}").status_code == 404  # not found is not remembered
    assert server.post("/v1/ingest/records", content=line(r)).json()["accepted"] == 1
    first = [server.get(f"/v1/decisions/{r.decision_id}", who=who).content for who in ("admin", "team-a")]
    whys = [server.get(f"/v1/decisions/{r.decision_id}/why", who=who, model="H100").json()
            for who in ("admin", "team-a")]
    hits = metric(server, 'claimtrail_answer_cache{counter="hits"}')
    assert [server.get(f"/v1/decisions/{r.decision_id}", who=who).content for who in ("admin", "team-a")] == first
    assert [server.get(f"/v1/decisions/{r.decision_id}/why", who=who, model="H100").json()
            for who in ("admin", "team-a")] == whys
    assert metric(server, 'claimtrail_answer_cache{counter="hits"}') == hits + 4  # 2 bodies, 2 whys: a kept answer is found without its record
    assert json.loads(first[0])["pod"] == r.pod and json.loads(first[1])["pod"] != r.pod  # per caller: hashed
    assert whys[1]["pod"] != whys[0]["pod"]
    assert server.get(f"/v1/decisions/{r.decision_id}", who="team-b").status_code == 404  # scope is in the key


# (ingested record, first route, second route, second route's status): the detailed "why" needs
# the recorded world, which a store holding only records cannot rebuild, so it answers 422, after
# finding the record all the same
ROUTE_PAIRS = [(31, "why", "record", 200), (32, "record", "why", 200), (33, "why", "detail", 422)]


@pytest.mark.parametrize("n, first, then, status", ROUTE_PAIRS,
                         ids=["record-after-why", "why-after-record", "detail-after-why"])
def test_a_decision_read_for_one_route_is_not_read_again_for_another(
        served: tuple[Server, Path], n: int, first: str, then: str, status: int) -> None:
    server, _ = served
    r = record(n)
    assert server.post("/v1/ingest/records", content=line(r)).json()["accepted"] == 1
    paths = {"record": (f"/v1/decisions/{r.decision_id}", {}),
             "why": (f"/v1/decisions/{r.decision_id}/why", {"model": "H100"}),
             "detail": (f"/v1/decisions/{r.decision_id}/why", {"model": "H100", "detail": "devices"})}
    path, query = paths[first]
    assert server.get(path, **query).status_code == 200
    lookups = metric(server, 'claimtrail_store{counter="id_lookups"}')
    path, query = paths[then]
    answer = server.get(path, **query)
    assert answer.status_code == status, answer.text
    assert metric(server, 'claimtrail_store{counter="id_lookups"}') == lookups


@pytest.mark.parametrize("tenant", ["(others)", "team\x07a", "team-a\n", "\x9bteam"],
                         ids=["reserved-aggregate-name", "bell", "newline", "c1-control"])
def test_records_of_an_unusable_tenant_name_are_quarantined_naming_the_field(
        served: tuple[Server, Path], tenant: str) -> None:
    server, _ = served
    answer = server.post("/v1/ingest/records", content=line(record(40, tenant=tenant))).json()
    assert (answer["accepted"], answer["quarantined"]) == (0, 1)
    assert answer["errors"][0]["path"] == "tenant"


@pytest.mark.parametrize("tenant", ["(others)", "team\x00a"], ids=["reserved-aggregate-name", "nul"])
def test_a_tokens_file_naming_an_unusable_tenant_is_refused(tmp_path: Path, tenant: str) -> None:
    from audit.api.auth import load_tokens
    from audit.errors import UserError

    path = tmp_path / "tokens.yaml"
    path.write_text(json.dumps({"tokens": [{"token": "s3cret", "tenant": tenant}]}))
    with pytest.raises(UserError, match=r"tokens\[0\]\.tenant: "):
        load_tokens(str(path))


def _full_spool(tmp_path: Path) -> None:
    from audit.store.spool import Spool

    spool = Spool(tmp_path / "full", max_bytes=64, block_seconds=0)
    spool.append("records", b"x" * 32)
    spool.append("records", b"y" * 32)  # waits for room that never comes: full


def _busy_spool(tmp_path: Path) -> None:
    from audit.store.spool import Spool

    first = Spool(tmp_path / "busy")
    try:
        Spool(tmp_path / "busy")  # a second writer on the same spool
    finally:
        first.close()


def _over_the_line_limit(tmp_path: Path) -> None:
    from audit.store.ingest import parse_jsonl

    parse_jsonl(b"{}\n" * (MAX_LINES + 1), "records", "t", compressed=False)


@pytest.mark.parametrize(("fails", "status", "retry_after"), [
    (_full_spool, 503, "1"), (_busy_spool, 503, "1"), (_over_the_line_limit, 413, None),
], ids=["spool-full", "spool-busy", "line-limit"])
def test_server_conditions_are_503_with_retry_after_and_limits_are_413(
        tmp_path: Path, fails: Any, status: int, retry_after: str | None) -> None:
    from audit.api import storeport
    from audit.api.problems import Problem, problem_response

    with pytest.raises(Problem) as raised:
        storeport.call(fails, tmp_path)
    response = problem_response(raised.value.kind, raised.value.detail)
    assert response.status_code == status
    assert response.headers.get("retry-after") == retry_after


def test_a_decision_resent_over_otlp_with_other_content_leaves_the_stored_one(served: tuple[Server, Path]) -> None:
    from tests.otlp.payloads import exported

    server, _ = served
    original = record(50)
    changed = DecisionRecord.from_dict({**original.to_dict(), "message": "rewritten"}).seal()
    quarantined_before = metric(server, 'claimtrail_store{counter="writer_quarantined"}')
    for sent in (original, original, changed):
        spans, _ = exported([sent])
        answer = server.post("/v1/traces", content=spans.SerializeToString(),
                             headers={"Content-Type": "application/x-protobuf"})
        assert answer.status_code == 200, answer.text
    stored = server.get(f"/v1/decisions/{original.decision_id}").json()
    assert stored["message"] == original.message and stored["output_digest"] == original.output_digest
    assert metric(server, 'claimtrail_store{counter="writer_quarantined"}') == quarantined_before + 1
