"""A line of records or events is refused for the same reason, with the same message, by the API's
ingest (a real ``claimtrail serve`` on an embedded store) and by the offline import of files
(``claimtrail replay --records F --events F``, ``claimtrail migration report``): offline, the
message names the file and line where the API names the line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from audit.cli.main import main
from tests.api.conftest import THRESHOLDS, Server, own_server
from tests.builders import decision

CLUSTER = "admission"
RECORD = decision(CLUSTER, "claim-1", 1, seq=5, time="2026-05-01T08:00:00.000Z", engine_version="test").to_dict()
EVENT = {"cluster": CLUSTER, "seq": 0, "time": "2026-05-01T07:00:00.000Z", "type": "upsert", "object_kind": "Node",
         "namespace": "", "name": "node-0",
         "payload": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-0"}}}
NOT_A_TIME = "is not an ISO 8601 time like 2026-11-01T08:00:00.000Z"
U64 = "0..18446744073709551615"


server = own_server("admission")


def refused_by_the_api(server: Server, kind: str, item: dict[str, Any]) -> list[dict[str, Any]]:
    answer = server.post(f"/v1/ingest/{kind}", content=json.dumps(item).encode())
    assert answer.status_code == 200, answer.text
    assert answer.json()["accepted"] == 0
    errors: list[dict[str, Any]] = answer.json()["errors"]
    return errors


def refused_offline(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str,
                    item: dict[str, Any]) -> tuple[int, str, Path]:
    records, events = tmp_path / "records.jsonl", tmp_path / "events.jsonl"
    records.write_text(json.dumps(item if kind == "records" else RECORD) + "\n")
    events.write_text(json.dumps(item if kind == "events" else EVENT) + "\n")
    code = main(["replay", "--quiet", "--records", str(records), "--events", str(events)])
    return code, capsys.readouterr().err.strip(), records if kind == "records" else events


REFUSED = {
    "record-time-not-a-time": ("records", {"time": "yesterday"}, "time", f"time: 'yesterday' {NOT_A_TIME}"),
    "record-year-of-five-digits": ("records", {"time": "99999-12-01T09:00:00Z"}, "time",
                                   f"time: '99999-12-01T09:00:00Z' {NOT_A_TIME}"),
    "record-seq-beyond-64-bits": ("records", {"seq": 10**30}, "seq", f"seq: {10**30} is outside {U64}"),
    "record-negative-seq": ("records", {"seq": -1}, "seq", f"seq: -1 is outside {U64}"),
    "record-wait-beyond-64-bits": ("records", {"wait_ms": 2**64}, "wait_ms", f"wait_ms: {2**64} is outside {U64}"),
    "record-attempt-beyond-16-bits": ("records", {"attempt": 2**63}, "attempt",
                                      f"attempt: {2**63} is outside 0..65535"),
    "record-negative-duration": ("records", {"duration_us": -5}, "duration_us",
                                 "duration_us: -5 is outside 0..4294967295"),
    "record-policy-version-with-a-newline": ("records", {"policy_version": "v1\nv2"}, "policy_version",
                                             "DecisionRecord: policy_version: 'v1\\nv2': control characters are not "
                                             "allowed in a policy version"),
    "record-empty-decision-id": ("records", {"decision_id": ""}, "decision_id", "decision_id: must not be empty"),
    "event-time-not-a-time": ("events", {"time": "yesterday"}, "time", f"time: 'yesterday' {NOT_A_TIME}"),
    "event-year-of-five-digits": ("events", {"time": "99999-12-01T09:00:00Z"}, "time",
                                  f"time: '99999-12-01T09:00:00Z' {NOT_A_TIME}"),
    "event-seq-beyond-64-bits": ("events", {"seq": 10**30}, "seq", f"seq: {10**30} is outside {U64}"),
}


@pytest.mark.parametrize(("kind", "change", "path", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_a_line_the_api_refuses_is_refused_offline_with_the_same_message(
        server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, change: dict[str, Any],
        path: str, message: str) -> None:
    item = {**(RECORD if kind == "records" else EVENT), **change}
    assert refused_by_the_api(server, kind, item) == [{"line": 1, "path": path, "error": message}]
    code, err, file = refused_offline(tmp_path, capsys, kind, item)
    assert (code, err) == (2, f"claimtrail replay: --{kind} {file}:1 at {path}: {message} "
                              "(1 invalid item(s); fix or remove them first)")


@pytest.mark.parametrize(("kind", "change", "path", "message"), REFUSED.values(), ids=REFUSED.keys())
def test_migration_report_refuses_a_line_with_the_message_replay_gives(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, change: dict[str, Any], path: str,
        message: str) -> None:
    files = {"records": tmp_path / "records.jsonl", "events": tmp_path / "events.jsonl"}
    for name, good in (("records", RECORD), ("events", EVENT)):
        files[name].write_text(json.dumps({**good, **change} if name == kind else good) + "\n")
    code = main(["migration", "report", "--thresholds", str(THRESHOLDS), "--records", str(files["records"]),
                 "--events", str(files["events"])])
    assert (code, capsys.readouterr().err.strip()) == (
        2, f"claimtrail migration: --{kind} {files[kind]}:1 at {path}: {message} (1 invalid item(s); fix or remove them "
           "first)")


ZONE = "the time needs a zone (Z or +hh:mm)"
UPPER = "write T and Z in upper case"
# a time nearly of the form records and events carry, and what keeps it from it
NEAR_MISSES = {
    "record": ("records", "2026-05-01T08:00:00", ZONE),
    "record-with-a-fraction": ("records", "2026-05-01T08:00:00.000", ZONE),
    "event": ("events", "2026-05-01T07:00:00", ZONE),
    "event-with-a-space-for-the-t": ("events", "2026-05-01 07:00:00.5", ZONE),
    "record-nanoseconds": ("records", "2026-05-01T08:00:00.123456789Z",
                           "9 fraction digits: at most 6 (microseconds) are taken"),
    "event-lower-case-z": ("events", "2026-05-01T07:00:00z", UPPER),
    "record-lower-case-t": ("records", "2026-05-01t08:00:00Z", UPPER),
}


@pytest.mark.parametrize(("kind", "time", "problem"), NEAR_MISSES.values(), ids=NEAR_MISSES.keys())
def test_a_time_nearly_of_the_form_is_refused_by_the_api_and_offline_saying_why(
        server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, time: str, problem: str) -> None:
    item = {**(RECORD if kind == "records" else EVENT), "time": time}
    message = f"time: {time!r}: {problem}"
    assert refused_by_the_api(server, kind, item) == [{"line": 1, "path": "time", "error": message}]
    code, err, file = refused_offline(tmp_path, capsys, kind, item)
    assert (code, err) == (2, f"claimtrail replay: --{kind} {file}:1 at time: {message} "
                              "(1 invalid item(s); fix or remove them first)")


UNUSABLE_CLUSTERS = {
    "record-empty": ("records", "", "DecisionRecord: cluster: must not be empty"),
    "record-newline": ("records", "x\ny", "DecisionRecord: cluster: 'x\\ny': control characters are not allowed in a "
                       "cluster name"),
    "event-empty": ("events", "", "WorldEvent: cluster: must not be empty"),
    "event-newline": ("events", "x\ny", "WorldEvent: cluster: 'x\\ny': control characters are not allowed in a cluster "
                      "name"),
    "event-c1-control": ("events", "\x9bprod", "WorldEvent: cluster: '\\x9bprod': control characters are not "
                         "allowed in a cluster name"),
}


@pytest.mark.parametrize(("kind", "cluster", "message"), UNUSABLE_CLUSTERS.values(), ids=UNUSABLE_CLUSTERS.keys())
def test_an_empty_cluster_name_or_one_with_control_characters_is_refused(
        server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, cluster: str,
        message: str) -> None:
    item = {**(RECORD if kind == "records" else EVENT), "cluster": cluster}
    assert refused_by_the_api(server, kind, item) == [{"line": 1, "path": "cluster", "error": message}]
    code, err, file = refused_offline(tmp_path, capsys, kind, item)
    assert (code, err) == (2, f"claimtrail replay: --{kind} {file}:1 at cluster: {message} "
                              "(1 invalid item(s); fix or remove them first)")


def _sealed_then(n: int, change: dict[str, Any], *, sealed: bool = True) -> dict[str, Any]:
    """A record of its own claim, sealed (or not), then changed as a sender might."""
    record = decision(CLUSTER, f"claim-{n}", 1, sealed=sealed, seq=5, time="2026-05-01T08:00:00.000Z",
                      message="allocated", engine_version="test").to_dict()
    return {**record, **change}


DIGESTS = {
    "decision-id-changed": (_sealed_then(10, {"decision_id": "6c3f7a90-0000-4000-8000-000000000010"}), False),
    "message-changed": (_sealed_then(11, {"message": "allocated (edited)"}), False),
    "tier-evidence-changed": (_sealed_then(12, {"tiers": [{"index": 0, "request": "gpu", "model": "H100",
                                                           "considered": 3}]}), False),
    "time-moved": (_sealed_then(13, {"time": "2026-05-01T09:00:00.000Z"}), False),
    "not-sealed": (_sealed_then(14, {}, sealed=False), True),
    "only-the-measured-duration-changed": (_sealed_then(15, {"duration_us": 1234}), True),
}


@pytest.mark.parametrize(("item", "taken"), DIGESTS.values(), ids=DIGESTS.keys())
def test_a_record_changed_after_it_was_sealed_is_refused_naming_output_digest(
        server: Server, tmp_path: Path, item: dict[str, Any], taken: bool) -> None:
    from audit.canonical import digest
    from audit.records import DecisionRecord, output_view
    from ingest.files import import_file

    content = digest(output_view(DecisionRecord.from_dict(item).to_dict()))
    message = f"DecisionRecord: output_digest: declared {item['output_digest']} but the record's content digests to {content}"
    answer = server.post("/v1/ingest/records", content=json.dumps(item).encode()).json()
    file = tmp_path / "records.jsonl"
    file.write_text(json.dumps(item) + "\n")
    offline = [(e.location, e.path, e.error) for e in import_file(file, "records").errors]
    if taken:
        assert (answer["accepted"], answer["errors"], offline) == (1, [], [])
    else:
        assert (answer["accepted"], answer["errors"]) == (0, [{"line": 1, "path": "output_digest", "error": message}])
        assert offline == [(f"{file}:1", "output_digest", message)]


def test_every_name_ingest_takes_can_be_filtered_on(server: Server) -> None:
    """Filters take the names ingest takes (any text without control characters), so a stored
    cluster, tenant or policy version can always be asked for by name."""
    names = {"cluster": "prod eu (west)", "tenant": "team a/β", "policy_version": "2026-05 night; v2"}
    record = decision(names["cluster"], "claim-named", 1, seq=9, time="2026-05-01T08:00:00.000Z", tenant=names["tenant"],
                      namespace="team-a", policy_version=names["policy_version"], engine_version="test")
    assert server.post("/v1/ingest/records", content=json.dumps(record.to_dict()).encode()).json()["accepted"] == 1
    found = server.get("/v1/decisions", "admin", **names)
    assert found.status_code == 200, found.text
    assert [r["decision_id"] for r in found.json()["items"]] == [record.decision_id]
    stats = server.get("/v1/stats/fallback", "admin", **names, group_by="tenant")
    assert stats.status_code == 200, stats.text
    assert [(r["tenant"], r["decisions"]) for r in stats.json()["rows"]] == [(names["tenant"], 1)]
    for name in names:
        refused = server.get("/v1/decisions", "admin", **{name: "bad\tname"})
        assert refused.status_code == 400, refused.text
        assert refused.json()["detail"].startswith(f"{name}: 'bad\\tname': control characters are not allowed in a")


BOM = b"\xef\xbb\xbf"
BOM_ITEMS = {
    "records": decision("bom", "claim-1", 1, seq=5, time="2026-05-01T08:00:00.000Z", engine_version="test").to_dict(),
    "events": {**EVENT, "cluster": "bom", "resource_version": ""},
}


@pytest.mark.parametrize("kind", BOM_ITEMS)
def test_a_byte_order_mark_before_a_line_is_skipped_by_the_api_and_offline(server: Server, tmp_path: Path,
                                                                           kind: str) -> None:
    from ingest.files import import_file

    body = BOM + json.dumps(BOM_ITEMS[kind]).encode() + b"\n"
    answer = server.post(f"/v1/ingest/{kind}", content=body)
    assert (answer.status_code, answer.json()["accepted"], answer.json()["quarantined"]) == (200, 1, 0)
    path = tmp_path / f"{kind}.jsonl"
    path.write_bytes(body)
    imported = import_file(path, kind)  # type: ignore[arg-type]
    assert imported.errors == []
    assert [i.to_dict() for i in (imported.records if kind == "records" else imported.events)] == [BOM_ITEMS[kind]]
