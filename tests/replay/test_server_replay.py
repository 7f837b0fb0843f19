"""``claimtrail replay --server``: the audit API replays against its own store, jobs included."""

from __future__ import annotations

import json

import pytest

from audit.cli.main import main
from audit.records import to_jsonl
from tests.api.conftest import TOKENS, start_server, stop
from tests.replay.runs import busy

HOURS = 2.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("replay-api")
    # a low synchronous limit: the command must follow the server's replay jobs
    srv, proc = start_server(root, "--replay-sync-limit", "50")
    try:
        result = busy(HOURS)
        events = "".join(json.dumps(e.to_dict()) + "\n" for e in result.events).encode()
        assert srv.post("/v1/ingest/events", content=events).status_code == 200
        assert srv.post("/v1/ingest/records", content=to_jsonl(result.records[:600]).encode()).status_code == 200
        yield srv
    finally:
        stop(proc)


def test_server_replay_of_a_sample_matches_and_is_recorded(server, capsys):
    code = main(["replay", "--quiet", "--server", server.base, "--token", TOKENS["admin"], "--sample", "0.25",
                 "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    summary = out["summary"]
    assert summary["verified"] > 50 and summary["matched"] == summary["verified"]
    metrics = server.get("/metrics", None).text
    assert f'claimtrail_store{{counter="replay_decisions"}} {summary["verified"]}' in metrics


def test_server_replay_by_id_reports_an_unknown_decision(server, capsys):
    code = main(["replay", "--quiet", "--server", server.base, "--token", TOKENS["admin"],
                 "--decision", "00000000-0000-0000-0000-000000000000"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("claimtrail replay: POST /v1/replay: the audit API answered 404: ")
