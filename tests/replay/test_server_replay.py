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


# ---- one job, the same answers as offline ------------------------------------------------------

DECISIONS = 600
WINDOW = ["--since", "2026-11-02T00:00:00Z", "--until", "2026-11-02T01:30:00Z"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    result = busy(HOURS)
    d = tmp_path_factory.mktemp("same-history")
    records, events = d / "records.jsonl", d / "events.jsonl"
    records.write_text(to_jsonl(result.records[:DECISIONS]))
    events.write_text("".join(json.dumps(e.to_dict(), sort_keys=True) + "\n" for e in result.events))
    return str(records), str(events)


@pytest.fixture(scope="module")
def policies(tmp_path_factory):
    import yaml

    doc = busy(HOURS).events[0].payload
    d = tmp_path_factory.mktemp("policies")
    tight = json.loads(json.dumps(doc))
    for t in tight["spec"]["tenants"]:
        if t["name"] == "team-b":
            t["quotas"] = {"H100": {"nominal": 2, "borrowingLimit": 0}}
    (d / "tight.yaml").write_text(yaml.safe_dump(tight))
    return str(d / "tight.yaml")


def _posts(server) -> int:
    prefix = 'claimtrail_http_requests_total{method="POST",route="/v1/replay",'
    return sum(int(line.rsplit(" ", 1)[1]) for line in server.get("/metrics", None).text.splitlines()
               if line.startswith(prefix))


def _json_summary(capsys, *argv):
    code = main(["replay", "--json", *argv])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


@pytest.mark.parametrize("selection", [[], ["--sample", "0.3"], ["--shard", "1/3", "--segment", "400"], WINDOW],
                         ids=["everything", "sample", "shard", "window"])
def test_a_server_replay_is_one_job_with_the_offline_answer(server, files, capsys, selection):
    before = _posts(server)
    code, online, err = _json_summary(capsys, "--server", server.base, "--token", TOKENS["admin"], *selection)
    assert code == 0, err
    assert _posts(server) == before + 1  # one request: the server selects and replays as one job
    offline_code, offline, _ = _json_summary(capsys, "--quiet", "--records", files[0], "--events", files[1], *selection)
    assert (code, online) == (offline_code, offline)
    assert online["summary"]["verified"] > 50
    # the bar follows the job to its end
    total = online["summary"]["verified"]
    assert err.rstrip().endswith(f"100% {total:,}/{total:,} decisions")


def test_a_counterfactual_through_the_api_prints_the_offline_deltas(server, files, policies, capsys):
    code = main(["replay", "--quiet", "--server", server.base, "--token", TOKENS["admin"], "--policy", policies,
                 *WINDOW])
    online = capsys.readouterr().out
    offline_code = main(["replay", "--quiet", "--records", files[0], "--events", files[1], "--policy", policies,
                         *WINDOW])
    offline = capsys.readouterr().out
    assert (code, online) == (offline_code, offline)
    lines = {line[:40].strip(): line[40:].split() for line in online.splitlines()[1:] if len(line) > 40}
    rec, cf = (int(x.replace(",", "")) for x in lines["team-b/H100 pods_started"])
    assert cf < rec


def test_a_counterfactual_through_the_api_needs_an_admin(server, policies, capsys):
    code = main(["replay", "--quiet", "--server", server.base, "--token", TOKENS["team-a"], "--policy", policies,
                 "--cluster", busy(HOURS).world.cluster, *WINDOW])
    err = capsys.readouterr().err
    assert code == 2
    assert err == ("claimtrail replay: POST /v1/replay: the audit API answered 403: a counterfactual run "
                   "re-decides every tenant's pods and needs an admin token\n")


def test_an_invalid_counterfactual_policy_is_refused_by_the_api(server):
    import httpx

    bad = {"apiVersion": "claimtrail.io/v1alpha1", "kind": "Policy", "metadata": {"name": "x"},
           "spec": {"version": "v9", "fairness": {"mode": "lottery"}}}
    r = httpx.post(server.base + "/v1/replay", headers={"Authorization": f"Bearer {TOKENS['admin']}"}, json={
        "cluster": busy(HOURS).world.cluster, "since": WINDOW[1], "until": WINDOW[3],
        "counterfactual_policy_document": bad}, timeout=60)
    assert r.status_code == 400
    assert r.json()["detail"] == ("counterfactual_policy_document: Policy x: spec.fairness.mode: must be one of "
                                  "drf, off (got 'lottery')")


def test_a_window_larger_than_one_job_is_replayed_in_parts(server, files, capsys, monkeypatch):
    monkeypatch.setattr("audit.cli.cmd_replay.SERVER_WINDOW", 250)
    before = _posts(server)
    code, online, err = _json_summary(capsys, "--server", server.base, "--token", TOKENS["admin"])
    assert code == 0, err
    assert _posts(server) == before + 3  # 250 + 250 + 100 decisions
    _, offline, _ = _json_summary(capsys, "--quiet", "--records", files[0], "--events", files[1])
    assert online == offline and online["summary"]["verified"] == DECISIONS


# ---- a store of two clusters -------------------------------------------------------------------

LATE = ["--since", "2026-11-02T01:30:00Z", "--until", "2026-11-02T02:00:00Z"]


@pytest.fixture(scope="module")
def two_clusters(tmp_path_factory):
    """The history as its own cluster and as cluster ``twin``, whose decisions start at 01:30: the
    window ``WINDOW`` holds one cluster's decisions, ``LATE`` both clusters'."""
    import dataclasses

    root = tmp_path_factory.mktemp("replay-api-two-clusters")
    srv, proc = start_server(root)
    try:
        result = busy(HOURS)
        twin_events = [dataclasses.replace(e, cluster="twin") for e in result.events]
        twin_records = [dataclasses.replace(r, cluster="twin", decision_id=f"twin-{r.decision_id}",
                                            output_digest="").seal()
                        for r in result.records if r.time >= "2026-11-02T01:30:00"]
        events = "".join(json.dumps(e.to_dict()) + "\n" for e in result.events + twin_events).encode()
        assert srv.post("/v1/ingest/events", content=events).status_code == 200
        records = to_jsonl(result.records + twin_records).encode()
        assert srv.post("/v1/ingest/records", content=records).status_code == 200
        yield srv
    finally:
        stop(proc)


@pytest.mark.parametrize(("argv", "code", "said"), [
    (WINDOW, 0, "replaying 2026-11-02T00:00:00Z .. 2026-11-02T01:30:00Z of cluster busy under "),
    ([*LATE, "--cluster", "twin"], 0, "replaying 2026-11-02T01:30:00Z .. 2026-11-02T02:00:00Z of cluster twin under "),
    (LATE, 2, "claimtrail replay: --since 2026-11-02T01:30:00Z --until 2026-11-02T02:00:00Z: the window holds "
              "decisions of more than one cluster on @server ("),
], ids=["one-cluster-in-the-window", "cluster-named", "two-clusters-in-the-window"])
def test_a_counterfactual_through_the_api_replays_the_windows_only_cluster_or_the_one_named(
        two_clusters, policies, capsys, argv, code, said):
    got = main(["replay", "--server", two_clusters.base, "--token", TOKENS["admin"], "--policy", policies, *argv])
    err, said = capsys.readouterr().err, said.replace("@server", two_clusters.base)
    assert (got, err[:len(said)]) == (code, said)


@pytest.mark.parametrize(("argv", "verified", "matched"), [
    (["--cluster", "busy"], lambda rs: len(rs), True),
    (["--cluster", "busy", *LATE], lambda rs: sum(r.time >= LATE[1][:19] for r in rs), True),
    (["--cluster", "twin"], lambda rs: sum(r.time >= LATE[1][:19] for r in rs), False),  # its digests are busy's
], ids=["one-cluster", "one-cluster-in-a-window", "the-other-cluster"])
def test_a_server_replay_with_cluster_verifies_that_clusters_decisions_only(two_clusters, capsys, argv, verified,
                                                                           matched):
    code, out, err = _json_summary(capsys, "--quiet", "--server", two_clusters.base, "--token", TOKENS["admin"], *argv)
    n = verified(busy(HOURS).records)
    assert (code, out["summary"]["verified"], out["summary"]["matched"]) == (int(not matched), n, n if matched else 0)


@pytest.mark.parametrize("argv", [["--cluster", "busy"], ["--since", "2030-01-01T00:00:00Z"],
                                  ["--until", "2026-11-02T00:00:00Z"], WINDOW, ["--sample", "0.5"]],
                         ids=["cluster", "since", "until", "window", "sample"])
def test_a_server_replay_of_ids_refuses_a_window_selection(two_clusters, capsys, argv):
    code = main(["replay", "--quiet", "--server", two_clusters.base, "--token", TOKENS["admin"], *argv,
                 "--decision", busy(HOURS).records[0].decision_id])
    assert (code, capsys.readouterr().err) == (2, "claimtrail replay: --decision with --server: --since, --until, "
                                                  "--cluster, --sample and --shard select from a window, not from "
                                                  "ids\n")


# a window (since, until) outside the log, which spans 00:00:00.000 .. 01:59:56.975 on 2026-11-02, and its side
OUTSIDE_THE_LOG = {
    "days-after-the-log": ("2026-11-05T00:30:00Z", "2026-11-05T01:30:00Z", "after"),
    "just-after-its-last-event": ("2026-11-02T01:59:56.976Z", "2026-11-02T03:00:00Z", "after"),
    "up-to-its-first-event": ("2026-11-01T23:00:00Z", "2026-11-02T00:00:00Z", "before"),
}


@pytest.mark.parametrize(("since", "until", "side"), OUTSIDE_THE_LOG.values(), ids=OUTSIDE_THE_LOG.keys())
def test_a_counterfactual_window_outside_the_event_log_is_a_400_problem(server, policies, capsys, since, until, side):
    import httpx
    import yaml

    from audit.api.params import timestamp

    events = busy(HOURS).events
    detail = (f"since {timestamp(since, 'since')}, until {timestamp(until, 'until')}: the window lies {side} the "
              f"event log of cluster busy, which spans {events[0].time} .. {events[-1].time}; a what-if decides "
              "again only a window of recorded history")
    with open(policies) as f:
        doc = yaml.safe_load(f)
    r = httpx.post(server.base + "/v1/replay", headers={"Authorization": f"Bearer {TOKENS['admin']}"}, json={
        "cluster": "busy", "since": since, "until": until, "counterfactual_policy_document": doc}, timeout=60)
    assert (r.status_code, r.json()["detail"]) == (400, detail)
    code = main(["replay", "--quiet", "--server", server.base, "--token", TOKENS["admin"], "--cluster", "busy",
                 "--policy", policies, "--since", since, "--until", until])
    assert (code, capsys.readouterr().err) == (2, f"claimtrail replay: POST /v1/replay: the audit API answered 400: "
                                                  f"{detail}\n")
