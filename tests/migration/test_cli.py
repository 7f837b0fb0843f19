"""``claimtrail migration report|plan`` on records files and the audit API's wire format."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from audit.cli.main import main
from audit.records import to_jsonl
from audit.timestamps import parse_time_ms
from tests.migration.cohorts import cohort_records

THRESHOLDS = str(Path(__file__).resolve().parents[2] / "deploy" / "migration" / "thresholds.yaml")


def _canary(worse: bool) -> list:
    rng = random.Random(9)
    base, _ = cohort_records(rng, track="device-plugin", template_version="", pods=3000, success=0.97)
    cand, _ = cohort_records(rng, track="dra", template_version="v2", pods=3000, success=0.85 if worse else 0.97)
    return base + cand


@pytest.fixture(scope="module")
def worse_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("m") / "records.jsonl"
    path.write_text(to_jsonl(_canary(worse=True)))
    return str(path)


def test_report_prints_rollback_for_a_worse_dra_cohort(worse_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migration", "report", "--records", worse_file, "--thresholds", THRESHOLDS, "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["verdict"] == "rollback"
    assert out["baseline_pods"] == 3000 and out["candidate_pods"] == 3000
    assert {c["metric"]: c["state"] for c in out["comparisons"]}["success_rate"] == "worse"


def test_plan_computes_the_verdict_and_prints_rollback_steps(worse_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migration", "plan", "--records", worse_file, "--thresholds", THRESHOLDS, "--canary", "team-a"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "plan for verdict rollback:"
    assert "1. [freeze] stop publishing ResourceClaimTemplate gpu-h100-first-v2" in out


def _node_event(seq: int, cluster: str = "canary") -> dict:
    return {"cluster": cluster, "seq": seq, "time": "2026-11-01T00:00:00.000000Z", "type": "upsert",
            "object_kind": "Node", "namespace": "", "name": f"n{seq}",
            "payload": {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{seq}"}}, "resource_version": ""}


class _Api(BaseHTTPRequestHandler):
    """Serves /v1/decisions pages the way the audit API does (items + next cursor), and /v1/events
    (a cluster's events after after_seq, at most EVENT_PAGE at once, + next_after_seq) answering
    ``events_status`` with ``events_body``; keeps every GET's path and query in ``asked``."""

    EVENT_PAGE = 2  # fewer than the client asks for: it must follow next_after_seq
    pages: list[list[dict]] = []
    events: list[dict] = []
    events_status = 200
    events_body = ""
    asked: list[tuple[str, dict[str, str]]] = []

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        url = urlparse(self.path)
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        _Api.asked.append((url.path, q))
        if url.path == "/v1/events":
            after = int(q["after_seq"])
            items = [e for e in self.events if e["cluster"] == q["cluster"] and e["seq"] > after][: self.EVENT_PAGE]
            following = items[-1]["seq"] if len(items) == self.EVENT_PAGE else None
            self._answer(self.events_status, self.events_body or json.dumps(
                {"cluster": q["cluster"], "items": items, "next_after_seq": following}))
            return
        index = int(q.get("cursor", "0"))
        body = {"items": self.pages[index], "next": str(index + 1) if index + 1 < len(self.pages) else None}
        self._answer(200, json.dumps(body))

    def _answer(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture()
def api() -> Iterator[str]:
    records = [r.to_dict() for r in _canary(worse=False)]
    _Api.pages = [records[i : i + 1000] for i in range(0, len(records), 1000)]
    _Api.events = [_node_event(s) for s in range(5)] + [_node_event(0, "elsewhere")]
    _Api.events_status, _Api.events_body, _Api.asked = 200, "", []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_report_reads_every_page_from_the_api_and_promotes_an_equal_cohort(api: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migration", "report", "--server", api, "--thresholds", THRESHOLDS]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "verdict: promote"
    assert "baseline device-plugin (3000 pods) vs candidate dra/v2 (3000 pods)" in out


def test_report_from_the_api_reads_the_event_log_of_its_records_clusters_page_by_page(
        api: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migration", "report", "--server", api, "--thresholds", THRESHOLDS]) == 0
    assert capsys.readouterr().err == ""
    assert [q for path, q in _Api.asked if path == "/v1/events"] == [
        {"cluster": "canary", "after_seq": after, "limit": "10000"} for after in ("-1", "1", "3")]


def test_report_from_the_api_takes_an_events_file_instead_of_the_event_log(
        api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps(e) + "\n" for e in _Api.events))
    _Api.events_status = 403  # never asked
    assert main(["migration", "report", "--server", api, "--thresholds", THRESHOLDS, "--events", str(events)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "verdict: promote"
    assert [path for path, _ in _Api.asked if path == "/v1/events"] == []


EVENT_LOG_ERRORS = {
    "tenant_token": (403, '{"type": "https://claimtrail.io/problems/forbidden"}',
                     "GET /v1/events answered 403: the world events carry every tenant's pods and need an admin token "
                     "(--token or CLAIMTRAIL_TOKEN); or give the run's world events with --events FILE"),
    "server_without_the_log": (404, "{}", "GET /v1/events answered 404: this server does not serve the event log; "
                                          "give the run's world events with --events FILE"),
    "server_error": (503, '{"detail":\n "the store cannot answer"}',
                     'GET /v1/events answered 503: {"detail": "the store cannot answer"}'),
    "not_a_page": (200, "[]", "GET /v1/events answered 200 without an event page"),
    "bad_event": (200, '{"items": [{"cluster": "canary", "seq": 4}], "next_after_seq": null}',
                  "GET /v1/events: cluster canary event 4: WorldEvent: time: required field missing"),
    "next_not_after": (200, '{"items": [], "next_after_seq": -1}',
                       "GET /v1/events: next_after_seq -1 does not follow -1"),
}


@pytest.mark.parametrize(("status", "body", "message"), list(EVENT_LOG_ERRORS.values()), ids=list(EVENT_LOG_ERRORS))
def test_an_event_log_the_report_cannot_read_is_one_line_naming_server_and_endpoint(
        api: str, capsys: pytest.CaptureFixture[str], status: int, body: str, message: str) -> None:
    _Api.events_status, _Api.events_body = status, body
    assert main(["migration", "report", "--server", api, "--thresholds", THRESHOLDS]) == 2
    err = capsys.readouterr().err
    assert err == f"claimtrail migration: --server {api}: {message}\n"


@pytest.mark.parametrize(("extra", "code"), [([], 0), (["--exit-code"], 4), (["--exit-code", "--min-pods", "9999"], 4)],
                         ids=["report_only", "rollback_is_4", "rollback_beats_too_few_pods"])
def test_exit_code_gates_on_the_verdict(worse_file: str, extra: list[str], code: int) -> None:
    assert main(["migration", "report", "--records", worse_file, "--thresholds", THRESHOLDS, *extra]) == code


def test_flags_override_the_thresholds_file(worse_file: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["migration", "report", "--records", worse_file, "--thresholds", THRESHOLDS, "-o", "json",
            "--baseline", "dra/v2", "--candidate", "device-plugin", "--min-pods", "5000"]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["baseline"], out["candidate"], out["verdict"]) == ("dra/v2", "device-plugin", "hold")
    assert "need at least 5000 matched pods per cohort (baseline 3000, candidate 3000)" in out["reasons"]


BAD = {
    "missing_file": (["--records", "/nonexistent.jsonl"], "/nonexistent.jsonl: cannot read"),
    "bad_record": (["--records", "@bad"], ":1 at outcome: DecisionRecord: outcome"),
    "both_sources": (["--records", "x", "--server", "http://127.0.0.1:9"], "either --records FILE or --server URL"),
    "bad_candidate_flag": (["--records", "@bad", "--candidate", "gpu/v2"],
                           f"--candidate (over {THRESHOLDS}): thresholds.candidate.track: unknown track 'gpu'"),
    "binary_records": (["--records", "@binary"],
                       "binary.jsonl:1: invalid JSON: 'utf-8' codec can't decode byte 0xff in position 0"),
    "same_cohort_twice": (["--records", "@bad", "--baseline", "dra/v2", "--candidate", "dra/v2"],
                          f"--baseline, --candidate (over {THRESHOLDS}): thresholds.candidate: dra/v2 shares pods with "
                          "the baseline dra/v2; compare two cohorts no pod is in both of"),
    "candidate_inside_the_baseline": (["--records", "@bad", "--baseline", "dra"],
                                      f"--baseline (over {THRESHOLDS}): thresholds.candidate: dra/v2 shares pods with "
                                      "the baseline dra; compare two cohorts no pod is in both of"),
    "empty_version": (["--records", "@bad", "--candidate", "dra/"],
                      "--candidate 'dra/': no template version after '/' (give TRACK for every version, or TRACK/VERSION)"),
    "bad_confidence_flag": (["--records", "@bad", "--confidence", "0"],
                            f"--confidence (over {THRESHOLDS}): confidence: must be in (0.5, 1), got 0.0"),
    "since_not_a_time": (["--records", "@bad", "--since", "yesterday"], "--since 'yesterday': not an RFC 3339 time"),
    "until_not_a_time": (["--records", "@bad", "--until", "noon"], "--until 'noon': not an RFC 3339 time"),
    "until_before_since": (["--records", "@bad", "--since", "2026-11-01T12:00:00Z", "--until", "2026-11-01T11:00:00Z"],
                           "--until 2026-11-01T11:00:00Z: must be after --since 2026-11-01T12:00:00Z"),
}


@pytest.mark.parametrize(("extra", "message"), list(BAD.values()), ids=list(BAD))
def test_bad_input_is_one_line_naming_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    rec = _canary(False)[0].to_dict()
    rec["outcome"] = 5
    bad.write_text(json.dumps(rec) + "\n")
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\xff\xfe\x00{}\n")
    argv = ["migration", "report", "--thresholds", THRESHOLDS] + [
        {"@bad": str(bad), "@binary": str(binary)}.get(a, a) for a in extra]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(("since", "pods"), [
    pytest.param("2026-11-01T00:00:00Z", 3000, id="the-first-instant"),
    pytest.param("2026-11-01T01:00:00+01:00", 3000, id="the-same-instant-in-another-offset"),
    pytest.param("2026-11-01T12:00:00+12:00", 3000, id="the-same-instant-written-later-in-the-day"),
])
def test_since_is_compared_as_a_time_not_as_text(worse_file: str, capsys: pytest.CaptureFixture[str], since: str,
                                                   pods: int) -> None:
    assert main(["migration", "report", "--records", worse_file, "--thresholds", THRESHOLDS, "--since", since,
                 "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["baseline_pods"], out["candidate_pods"]) == (pods, pods)


def test_until_reports_on_the_records_before_it(worse_file: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The same report as on a file holding only the records before ``--until``."""
    until = "2026-11-01T12:00:00Z"
    before = tmp_path / "before.jsonl"
    before.write_text(to_jsonl([r for r in _canary(worse=True) if parse_time_ms(r.time) < parse_time_ms(until)]))
    answers = []
    for argv in (["--records", worse_file, "--until", until], ["--records", str(before)]):
        assert main(["migration", "report", "--thresholds", THRESHOLDS, *argv, "-o", "json"]) == 0
        answers.append(json.loads(capsys.readouterr().out))
    assert answers[0] == answers[1]
    assert 0 < answers[0]["candidate_pods"] < 3000


@pytest.mark.parametrize("command", [["report", "-o", "json"], ["plan", "-o", "json"]])
def test_report_and_plan_default_to_the_shipped_thresholds(
    worse_file: str, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    assert main(["migration", command[0], "--records", worse_file, "-o", "json"]) == 0
    without = json.loads(capsys.readouterr().out)
    assert main(["migration", command[0], "--records", worse_file, "--thresholds", THRESHOLDS, "-o", "json"]) == 0
    assert without == json.loads(capsys.readouterr().out)
    assert without["verdict"] == "rollback"


def test_plan_for_a_given_verdict_takes_the_template_version_from_the_shipped_thresholds(
    capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["migration", "plan", "--verdict", "rollback"]) == 0
    assert "1. [freeze] stop publishing ResourceClaimTemplate gpu-h100-first-v2" in capsys.readouterr().out


def test_a_missing_shipped_thresholds_file_is_named(
    worse_file: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # an install without the repository's deploy/ folder
    monkeypatch.setattr("audit.cli.cmd_migration.SHIPPED_THRESHOLDS", str(tmp_path / "thresholds.yaml"))
    assert main(["migration", "report", "--records", worse_file]) == 2
    assert capsys.readouterr().err == (
        f"claimtrail migration: --thresholds: not given, and the shipped thresholds file {tmp_path}/thresholds.yaml "
        "is not there (installed without the repository's deploy/ folder); give --thresholds FILE\n")


@pytest.fixture(scope="module")
def simulated_hour(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Half an hour of the default scenario, whose tenants run device-plugin pods beside DRA ones."""
    tmp = tmp_path_factory.mktemp("hour")
    records, events = str(tmp / "r.jsonl"), str(tmp / "e.jsonl")
    assert main(["simulate", "--hours", "0.5", "--seed", "3", "--quiet", "--out", records, "--events", events]) == 0
    return records, events


@pytest.mark.parametrize("with_events", [False, True], ids=["records-alone", "with-events"])
def test_a_report_without_events_says_why_device_plugin_pods_match_nothing(
        simulated_hour: tuple[str, str], capsys: pytest.CaptureFixture[str], with_events: bool) -> None:
    records, events = simulated_hour
    capsys.readouterr()
    assert main(["migration", "report", "--records", records, *(["--events", events] if with_events else [])]) == 0
    out, err = capsys.readouterr()
    matched = out.splitlines()[2]
    if with_events:
        assert err == "" and "compared within 0 strata" not in matched
    else:
        assert matched.startswith("compared within 0 strata")
        unmatched = sum(int(n.rstrip(",")) for n in matched.split("unmatched baseline ")[1].replace("candidate ", "")
                        .split())
        assert err == (f"note: without --events the model each device-plugin pod asked for is unknown, so {unmatched:,} "
                       "pods match no counterpart; give the run's world events (--events FILE) to compare them within "
                       "strata\n")


@pytest.mark.parametrize(("argv", "env", "command"), [
    pytest.param(["--records", "{records}"], None, "claimtrail migration report --records {records}",
                 id="from-a-records-file"),
    pytest.param(["--records", "{records}", "--thresholds", THRESHOLDS], None,
                 "claimtrail migration report --records {records}", id="shipped-thresholds-named"),
    pytest.param(["--records", "{records}", "--cluster", "c1", "--since", "2026-01-01T00:00:00Z",
                  "--until", "2027-01-01T00:00:00Z", "--seed", "7"], None,
                 "claimtrail migration report --records {records} --cluster c1 --since 2026-01-01T00:00:00Z --seed 7",
                 id="filters-kept-but-until"),
    pytest.param(["--verdict", "hold", "--records", "{spaced}", "--thresholds", "{custom}"], None,
                 "claimtrail migration report --thresholds {custom} --records '{spaced}'", id="quoted-and-own-thresholds"),
    pytest.param(["--verdict", "hold", "--server", "http://audit.example:8080", "--token", "s3cret"], None,
                 "claimtrail migration report --server http://audit.example:8080", id="from-a-server-without-its-token"),
    pytest.param(["--verdict", "hold"], "http://audit.example:8080", "claimtrail migration report --server $CLAIMTRAIL_API",
                 id="from-CLAIMTRAIL_API"),
    pytest.param(["--verdict", "hold"], None, "claimtrail migration report --server http://127.0.0.1:8080",
                 id="from-the-default-server"),
])
def test_the_plans_report_command_reads_what_the_plan_read(
    worse_file: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    argv: list[str], env: str | None, command: str
) -> None:
    paths = {"records": worse_file, "spaced": str(tmp_path / "canary records.jsonl"), "custom": str(tmp_path / "t.yaml")}
    Path(paths["custom"]).write_text(Path(THRESHOLDS).read_text())
    if env:
        monkeypatch.setenv("CLAIMTRAIL_API", env)
    else:
        monkeypatch.delenv("CLAIMTRAIL_API", raising=False)
    assert main(["migration", "plan", *(arg.format(**paths) for arg in argv), "-o", "json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    reports = {s["command"] for s in steps if s["command"].startswith("claimtrail migration report")}
    assert reports == {command.format(**paths)}
