"""Replay and the counterfactual give the same bytes whichever way they are asked for.

A small simulated day is verified by replay, and a window of it is decided again under a
tighter quota, through every entry point users have: the core functions, the store path the API
uses, and ``claimtrail replay`` with files. The canonical digests of what each returns are
pinned, so moving the code that wires these use cases (the CLI, the API, the store's read side)
cannot change a single byte of a replay result or a counterfactual answer without this failing.
A digest moves only with a commit that changes decisions on purpose, which says so.
"""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from audit.canonical import canonical_digest
from audit.cli.main import main
from audit.records import to_jsonl
from audit.replay import CheckpointWriter, MemorySource, Verifier
from audit.replay.whatif import deltas, whatif
from audit.store.queries import AuditStore
from audit.timestamps import format_time_ms, parse_time_ms
from audit.world import World
from tests.replay.runs import busy

HOURS = 3.0
WINDOW_H = 2.5  # from the first event, before the recorded policy change at 3h

# canonical digests of the results, pinned before the replay use cases were given one home
SIMULATED_DAY = "2b493c7864bd232f0b01430d405c15256b50019060761a7d49b47e92c708ae28"
VERIFIED = "83af68dd61bf78c273f9082c733c542da97489afe607e8c56704e518822c48d3"
VERIFIED_FROM_STORE = "83af68dd61bf78c273f9082c733c542da97489afe607e8c56704e518822c48d3"
CLI_VERIFY = "3af7191331e7300b35ab7daa17b0121f6c215e6386559b59094d4d6e2761491f"
COUNTERFACTUAL_RECORDS = "c4f9e2bb3ff0912f79eed3d21ff40226bdee4567835b09d2a38ae1dac443cf1d"
# The deltas moved when they became audit.metrics' pod figures over each side's lifecycle; being
# folded from the event log, not summed over records, they no longer depend on the order a store
# returns the records in, so the files and the store give the same bytes.
COUNTERFACTUAL_DELTAS = "fda6765132087a5a7598594e43b41c9e5e00983c7a5d330a4ba22d7991958e93"
STORE_COUNTERFACTUAL_DELTAS = COUNTERFACTUAL_DELTAS
API_COUNTERFACTUAL = "7f26d44e5d7e0ef0d3095ba3dea2a0bff93b46a8d39dc4667ef2a9864d2b36af"


def _day():
    return busy(HOURS)


def _tighter() -> dict:
    doc = copy.deepcopy(_day().events[0].payload)
    for t in doc["spec"]["tenants"]:
        if t["name"] == "team-b":
            t["quotas"] = {"H100": {"nominal": 2, "borrowingLimit": 0}}
    return doc


def _window() -> tuple[int, int]:
    since = parse_time_ms(_day().events[0].time)
    return since, since + int(WINDOW_H * 3_600_000)


@pytest.fixture(scope="module")
def dsn(tmp_path_factory):
    result = _day()
    name = f"chdb://{tmp_path_factory.mktemp('pinned')}/db"
    with AuditStore.open(name) as s:
        writer = s.writer(background=False)
        writer.write_events(result.events)
        writer.write_records(result.records)
        assert writer.flush()
        writer.close()
        CheckpointWriter(s.write_checkpoint, 1000).fold(result.events)
    return name


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    result = _day()
    d = tmp_path_factory.mktemp("pinned-files")
    records, events, policy = d / "records.jsonl", d / "events.jsonl", d / "tighter.yaml"
    records.write_text(to_jsonl(result.records))
    events.write_text("".join(json.dumps(e.to_dict(), sort_keys=True) + "\n" for e in result.events))
    policy.write_text(yaml.safe_dump(_tighter(), sort_keys=False))
    return str(records), str(events), str(policy)


def _cli(capsys, *argv: str) -> tuple[int, object]:
    code = main(["replay", "--quiet", "--json", *argv])
    return code, json.loads(capsys.readouterr().out)


def test_the_simulated_day_is_the_one_pinned():
    assert canonical_digest([r.to_dict() for r in _day().records], 1) == SIMULATED_DAY


def test_verifying_the_day_in_memory_gives_the_pinned_results():
    results = list(Verifier(MemorySource(_day().events)).run(_day().records))
    assert all(r.match for r in results)
    assert canonical_digest([r.to_dict() for r in results], 1) == VERIFIED


def test_verifying_the_day_from_the_store_gives_the_pinned_results(dsn):
    from audit.replay import StoreHistory
    from audit.replay.service import verify_ids

    with AuditStore.open(dsn, create=False) as store:
        runs = [r.to_dict() for r in verify_ids(StoreHistory(store), [r.decision_id for r in _day().records])]
    assert canonical_digest(runs, 1) == VERIFIED_FROM_STORE


def test_the_cli_verifies_the_day_from_the_store_to_the_pinned_answer(dsn, capsys):
    code, answer = _cli(capsys, "--dsn", dsn, "--show", "100000")
    assert code == 0
    assert canonical_digest(answer) == CLI_VERIFY


def test_the_cli_verifies_the_day_from_files_to_the_pinned_answer(files, capsys):
    code, answer = _cli(capsys, "--records", files[0], "--events", files[1], "--show", "100000")
    assert code == 0
    assert canonical_digest(answer) == CLI_VERIFY


def test_the_counterfactual_window_gives_the_pinned_records_and_deltas():
    since, until = _window()
    result = whatif(World(_day().world.cluster), _day().events, _day().records, _tighter(), since, until)
    assert canonical_digest([r.to_dict() for r in result.counterfactual.records], 1) == COUNTERFACTUAL_RECORDS
    assert canonical_digest(deltas(result)) == COUNTERFACTUAL_DELTAS


def test_the_cli_counterfactual_from_files_prints_the_pinned_deltas(files, capsys):
    since, until = _window()
    code, answer = _cli(capsys, "--records", files[0], "--events", files[1], "--policy", files[2],
                        "--since", format_time_ms(since), "--until", format_time_ms(until))
    assert code == 0
    assert canonical_digest(answer) == COUNTERFACTUAL_DELTAS


def test_the_cli_counterfactual_from_the_store_prints_the_pinned_deltas(dsn, files, capsys):
    since, until = _window()
    code, answer = _cli(capsys, "--dsn", dsn, "--policy", files[2],
                        "--since", format_time_ms(since), "--until", format_time_ms(until))
    assert code == 0
    assert canonical_digest(answer) == STORE_COUNTERFACTUAL_DELTAS


def test_the_api_counterfactual_from_the_store_gives_the_pinned_answer(dsn):
    from audit.api.counterfactual import counterfactual_window

    since, until = _window()
    with AuditStore.open(dsn, create=False) as store:
        answer = counterfactual_window(store, _day().world.cluster, format_time_ms(since), format_time_ms(until),
                                       "", _tighter())
    assert canonical_digest(answer["deltas"]) == STORE_COUNTERFACTUAL_DELTAS
    assert canonical_digest(answer, 1) == API_COUNTERFACTUAL
