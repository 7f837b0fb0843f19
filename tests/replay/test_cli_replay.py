"""``claimtrail replay`` end to end: offline files, shards, a real chDB store, and bad input."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from audit.cli.main import main
from audit.records import DecisionRecord, to_jsonl
from audit.replay import CheckpointWriter, StoreHistory, Verifier
from audit.store.queries import AuditStore
from tests.replay.runs import busy

HOURS = 2.0


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    result = busy(HOURS)
    d = tmp_path_factory.mktemp("history")
    records, events = d / "records.jsonl", d / "events.jsonl"
    records.write_text(to_jsonl(result.records))
    events.write_text("".join(json.dumps(e.to_dict(), sort_keys=True) + "\n" for e in result.events))
    return str(records), str(events)


def _run(capsys, *argv):
    code = main(["replay", "--quiet", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("workers", ["1", "2"], ids=["one-process", "two-workers"])
def test_offline_replay_matches_every_decision(files, capsys, workers):
    code, out, _ = _run(capsys, "--records", files[0], "--events", files[1], "--checkpoint-every", "1000",
                        "--workers", workers)
    n = len(busy(HOURS).records)
    assert (code, out.splitlines()[0]) == (0, f"verified {n:,} decisions: {n:,} matched, 0 mismatched")


def test_shards_cover_every_decision_once(files, capsys):
    seen = 0
    for i in range(3):
        code, out, _ = _run(capsys, "--records", files[0], "--events", files[1], "--checkpoint-every", "500",
                            "--segment", "500", "--shard", f"{i}/3", "--json")
        summary = json.loads(out)["summary"]
        assert code == 0 and summary["mismatched"] == 0
        seen += summary["verified"]
    assert seen == len(busy(HOURS).records)


def test_an_edited_record_file_exits_1_and_prints_the_diff(files, capsys, tmp_path):
    lines = Path(files[0]).read_text().splitlines()
    i, rec = next((i, json.loads(line)) for i, line in enumerate(lines) if json.loads(line)["outcome"] == "allocated")
    rec["node"] = "nowhere"
    rec["output_digest"] = DecisionRecord.from_dict(rec).compute_output_digest()  # as a changed engine would seal it
    lines[i] = json.dumps(rec)
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    code, out, _ = _run(capsys, "--records", str(edited), "--events", files[1], "--decision", rec["decision_id"])
    assert code == 1
    assert out.splitlines()[:2] == ["verified 1 decision: 0 matched, 1 mismatched", "  output_mismatch: 1"]
    assert f"  node: recorded nowhere, replayed {busy(HOURS).records[i].node}" in out.splitlines()


@pytest.mark.parametrize(("argv", "message"), [
    (["--shard", "3/3"], "--shard '3/3': need 0 <= i < N and N >= 1"),
    (["--shard", "x"], "--shard 'x': expected i/N with whole numbers, e.g. 0/8"),
    (["--sample", "0"], "--sample 0.0: must be in (0, 1]"),
    (["--since", "noon"], "--since 'noon': not an RFC 3339 time such as 2026-11-02T00:00:00Z"),
    (["--until", "2026-11-02T01:00:00"], "--until '2026-11-02T01:00:00': the time needs a zone (Z or +hh:mm)"),
    (["--workers", "0"], "--workers 0: must be >= 1"),
    (["--since", "2026-11-02T02:00:00Z", "--until", "2026-11-02T01:00:00Z"],
     "--until 2026-11-02T01:00:00Z: must be after --since 2026-11-02T02:00:00Z"),
    (["--since", "2026-11-02T01:00:00Z", "--until", "2026-11-02T01:00:00Z"],
     "no decision matched --since 2026-11-02T01:00:00Z --until 2026-11-02T01:00:00Z in @records: nothing verified"),
    (["--show", "-1"], "--show -1: must be >= 0"),
    (["--since", "2030-01-01T00:00:00Z"], "no decision matched --since 2030-01-01T00:00:00Z in @records: nothing verified"),
    (["--since", "2030-01-01T00:00:00Z", "--until", "2030-01-02T00:00:00Z"],
     "no decision matched --since 2030-01-01T00:00:00Z --until 2030-01-02T00:00:00Z in @records: nothing verified"),
], ids=["shard-out-of-range", "shard-malformed", "sample-zero", "since-not-a-time", "until-without-a-zone",
        "no-workers", "until-before-since",
        "empty-window-at-one-instant", "negative-show", "window-after-the-history", "window-matching-nothing"])
def test_bad_options_are_one_line_errors(files, capsys, argv, message):
    code, out, err = _run(capsys, "--records", files[0], "--events", files[1], *argv)
    assert (code, err.strip()) == (2, f"claimtrail replay: {message.replace('@records', files[0])}")
    assert out == ""


def test_an_empty_shard_is_told_and_passes(files, capsys):
    """A sharded job over a short history has empty shards; they are not failures, but say so."""
    code, out, err = _run(capsys, "--records", files[0], "--events", files[1], "--since", "2030-01-01T00:00:00Z",
                          "--shard", "0/2")
    assert (code, out.splitlines()[0]) == (0, "verified 0 decisions: 0 matched, 0 mismatched")
    assert err == (f"claimtrail replay: --shard 0/2: no decision of --since 2030-01-01T00:00:00Z in {files[0]} "
                   "falls in this shard; nothing verified\n")


def test_an_invalid_record_line_is_named_not_dropped(files, capsys, tmp_path):
    bad = tmp_path / "bad.jsonl"
    first = json.loads(Path(files[0]).read_text().splitlines()[0])
    first["seq"] = "12"
    bad.write_text(json.dumps(first) + "\n")
    code, _, err = _run(capsys, "--records", str(bad), "--events", files[1])
    assert code == 2
    assert err.startswith(f"claimtrail replay: --records {bad}:1 at seq: ")


def test_a_record_line_sent_twice_is_verified_once(files, capsys, tmp_path):
    lines = Path(files[0]).read_text().splitlines()
    doubled = tmp_path / "doubled.jsonl"
    doubled.write_text("\n".join([*lines, lines[3]]) + "\n")
    code, out, _ = _run(capsys, "--records", str(doubled), "--events", files[1], "--checkpoint-every", "1000")
    n = len(lines)
    assert (code, out.splitlines()[0]) == (0, f"verified {n:,} decisions: {n:,} matched, 0 mismatched")


def test_two_different_records_of_one_decision_are_refused(files, capsys, tmp_path):
    lines = Path(files[0]).read_text().splitlines()
    other = json.loads(lines[3])
    other["message"] += " (edited)"
    other["output_digest"] = DecisionRecord.from_dict(other).compute_output_digest()
    clash = tmp_path / "clash.jsonl"
    clash.write_text("\n".join([*lines, json.dumps(other)]) + "\n")
    code, _, err = _run(capsys, "--records", str(clash), "--events", files[1])
    assert (code, err.strip()) == (2, f"claimtrail replay: --records {clash}:4 and {clash}:{len(lines) + 1}: decision "
                                      f"{other['decision_id']} appears twice with different contents; a history holds "
                                      "one record per decision")


def test_a_gzip_history_replays_as_the_plain_one(files, capsys, tmp_path):
    zipped = []
    for name, path in zip(("records.jsonl.gz", "events.jsonl.gz"), files, strict=True):
        zipped.append(tmp_path / name)
        zipped[-1].write_bytes(gzip.compress(Path(path).read_bytes()))
    code, out, _ = _run(capsys, "--records", str(zipped[0]), "--events", str(zipped[1]), "--checkpoint-every", "1000")
    n = len(busy(HOURS).records)
    assert (code, out.splitlines()[0]) == (0, f"verified {n:,} decisions: {n:,} matched, 0 mismatched")


UNREADABLE = {
    "a-line-not-in-utf8": ("r.jsonl", lambda good: good + b"\xff\xfe{}\n",
                           "@:2: invalid JSON: 'utf-8' codec can't decode byte 0xff in position 0: invalid start byte "
                           "(1 invalid item(s); fix or remove them first)"),
    "a-gzip-line-not-in-utf8": ("r.jsonl.gz", lambda good: gzip.compress(good + b"{\x8b}\n"),
                                "@:2: invalid JSON: 'utf-8' codec can't decode byte 0x8b in position 1: invalid start "
                                "byte (1 invalid item(s); fix or remove them first)"),
    "a-line-nested-too-deeply": ("r.jsonl", lambda good: good + b"[" * 100_000 + b"]" * 100_000 + b"\n",
                                 "@:2: invalid JSON: nested too deeply to parse (1 invalid item(s); fix or remove them "
                                 "first)"),
    "yaml-not-in-utf8": ("r.yaml", lambda good: b"- seq: 1\n- seq: \xff\n", "@:2: not UTF-8 text (byte 0xff in column "
                         "8: invalid start byte)"),
    "gzip-cut-short": ("r.jsonl.gz", lambda good: gzip.compress(good)[:-12],
                       "@: not valid gzip (Compressed file ended before the end-of-stream marker was reached)"),
    "gzip-inside-gzip": ("r.jsonl", lambda good: gzip.compress(gzip.compress(good)),
                         "@: gzip data inside gzip; compress the file once"),
}


@pytest.mark.parametrize(("name", "content", "message"), UNREADABLE.values(), ids=UNREADABLE.keys())
def test_a_records_file_that_cannot_be_read_is_named_to_its_line(files, capsys, tmp_path, name, content, message):
    bad = tmp_path / name
    bad.write_bytes(content(Path(files[0]).read_bytes().split(b"\n")[0] + b"\n"))
    code, _, err = _run(capsys, "--records", str(bad), "--events", files[1])
    assert (code, err.strip()) == (2, f"claimtrail replay: --records {message.replace('@', str(bad))}")


def _edited(line):
    return json.dumps({**json.loads(line), "resource_version": "edited"}, sort_keys=True)


# what is done to the event log's lines, and the line that the last line clashes with, if any
DOUBLED_EVENTS = {
    "one-line-given-twice": (lambda lines: [*lines, lines[3]], None),
    "two-overlapping-logs-concatenated": (lambda lines: lines[:len(lines) // 2 + 50] + lines[len(lines) // 2:], None),
    "another-event-under-a-seq-in-use": (lambda lines: [*lines, _edited(lines[3])], 4),
}


def _doubled(events: str, tmp_path: Path, change: Callable[[list[str]], list[str]]) -> tuple[list[str], Path, list[str]]:
    """The event file's lines, and the file ``change`` makes of them with the lines it holds."""
    lines = Path(events).read_text().splitlines()
    changed = change(lines)
    doubled = tmp_path / "events.jsonl"
    doubled.write_text("\n".join(changed) + "\n")
    return lines, doubled, changed


@pytest.mark.parametrize(("change", "clash"), DOUBLED_EVENTS.values(), ids=DOUBLED_EVENTS.keys())
def test_an_identical_event_line_is_taken_once_and_a_different_one_under_its_seq_is_refused(
        files, capsys, tmp_path, change, clash):
    lines, doubled, changed = _doubled(files[1], tmp_path, change)
    code, out, err = _run(capsys, "--records", files[0], "--events", str(doubled), "--checkpoint-every", "1000")
    if clash is None:
        n = len(busy(HOURS).records)
        assert (code, out.splitlines()[0], err) == (0, f"verified {n:,} decisions: {n:,} matched, 0 mismatched", "")
    else:
        first = json.loads(lines[clash - 1])
        assert (code, err.strip()) == (2, f"claimtrail replay: --events {doubled}:{clash} and {doubled}:{len(changed)}: "
                                          f"event seq {first['seq']} of cluster {first['cluster']} appears twice with "
                                          "different contents; a history holds one event per cluster and seq")


@pytest.mark.parametrize(("change", "clash"), DOUBLED_EVENTS.values(), ids=DOUBLED_EVENTS.keys())
def test_migration_report_takes_an_identical_event_line_once_and_refuses_a_different_one(
        files, capsys, tmp_path, change, clash):
    lines, doubled, changed = _doubled(files[1], tmp_path, change)
    code = main(["migration", "report", "--records", files[0], "--events", str(doubled), "-o", "json"])
    out, err = capsys.readouterr()
    if clash is None:
        assert (code, err) == (0, "") and json.loads(out)["verdict"]
    else:
        first = json.loads(lines[clash - 1])
        assert (code, err.strip()) == (2, f"claimtrail migration: {doubled}:{clash} and {doubled}:{len(changed)}: "
                                          f"event seq {first['seq']} of cluster {first['cluster']} appears twice with "
                                          "different contents; a history holds one event per cluster and seq")


def test_an_unknown_decision_id_is_named(files, capsys):
    code, _, err = _run(capsys, "--records", files[0], "--events", files[1], "--decision", "no-such-decision")
    assert (code, err.strip()) == (2, f"claimtrail replay: --decision no-such-decision: not found in {files[0]}")


def test_offline_needs_both_files(files, capsys):
    code, _, err = _run(capsys, "--records", files[0])
    assert (code, err.strip()) == (2, "claimtrail replay: --records and --events: give both for an offline replay")


@pytest.mark.parametrize("workers", ["1", "2"], ids=["one-process", "two-workers-on-the-store-history-in-memory"])
def test_store_replay_writes_runs_and_a_summary(tmp_path, capsys, workers):
    result = busy(HOURS)
    dsn = f"chdb://{tmp_path}/store"
    with AuditStore.open(dsn) as store:
        writer = store.writer(name="history")
        writer.write_events(result.events)
        writer.write_records(result.records[:400])
        writer.flush()
        checkpoints = CheckpointWriter(store.write_checkpoint, every=1000)
        checkpoints.fold(result.events)
        assert checkpoints.written == [999, 1999, 2999, 3999][:len(checkpoints.written)]
    code, out, _ = _run(capsys, "--dsn", dsn, "--workers", workers)
    assert (code, out.splitlines()[0]) == (0, "verified 400 decisions: 400 matched, 0 mismatched")
    with AuditStore.open(dsn) as store:
        [row] = store.replay_summary()
    assert (row["decisions"], row["matches"], row["mismatches"]) == (400, 400, 0)


@pytest.fixture(scope="module")
def policies(tmp_path_factory, files):
    import yaml

    doc = busy(HOURS).events[0].payload
    d = tmp_path_factory.mktemp("policies")
    (d / "same.yaml").write_text(yaml.safe_dump(doc))
    tight = json.loads(json.dumps(doc))
    for t in tight["spec"]["tenants"]:
        if t["name"] == "team-b":
            t["quotas"] = {"H100": {"nominal": 2, "borrowingLimit": 0}}
    (d / "tight.yaml").write_text(yaml.safe_dump(tight))
    return str(d / "same.yaml"), str(d / "tight.yaml")


WINDOW = ["--since", "2026-11-02T00:00:00Z", "--until", "2026-11-02T01:30:00Z"]


def test_counterfactual_with_the_recorded_policy_shows_no_delta(files, policies, capsys):
    code, out, _ = _run(capsys, "--records", files[0], "--events", files[1], "--policy", policies[0], "--json",
                        *WINDOW)
    d = json.loads(out)
    assert code == 0
    assert d["decisions"][0] == d["decisions"][1] > 0
    assert d["quota_violations"] == [0, 0]
    assert all(a == b for metrics in d["tenants"].values() for a, b in metrics.values())
    assert all(a == b for a, b in d["models"].values())


def test_counterfactual_with_a_tighter_quota_prints_the_deltas(files, policies, capsys):
    code, out, _ = _run(capsys, "--records", files[0], "--events", files[1], "--policy", policies[1], *WINDOW)
    lines = {line[:40].strip(): line[40:].split() for line in out.splitlines()[1:] if len(line) > 40}
    assert code == 0
    assert lines["quota_violations"] == ["0", "0"]
    rec, cf = (int(x.replace(",", "")) for x in lines["team-b/H100 pods_started"])
    assert cf < rec
    rec_fc, cf_fc = (float(x.rstrip("%")) for x in lines["team-b first_choice_rate"])
    assert cf_fc < rec_fc


@pytest.mark.parametrize(("argv", "message"), [
    (["--since", "2026-11-02T00:00:00Z"], "--policy: give the window as --since and --until"),
    ([*WINDOW, "--shard", "0/2"], "--policy: replays a whole window; --decision, --shard and --sample do not apply"),
    (["--since", "2026-11-02T02:00:00Z", "--until", "2026-11-02T01:00:00Z"],
     "--until 2026-11-02T01:00:00Z: must be after --since 2026-11-02T02:00:00Z"),
], ids=["no-until", "shard-with-policy", "empty-window"])
def test_counterfactual_option_mistakes(files, policies, capsys, argv, message):
    code, _, err = _run(capsys, "--records", files[0], "--events", files[1], "--policy", policies[0], *argv)
    assert (code, err.strip()) == (2, f"claimtrail replay: {message}")


def test_counterfactual_refuses_an_invalid_policy(files, capsys, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: claimtrail.io/v1alpha1\nkind: Policy\nmetadata: {name: bad}\n"
                   "spec: {version: '3', tenants: [{name: a, namespaces: [a], weight: -1}]}\n")
    code, _, err = _run(capsys, "--records", files[0], "--events", files[1], "--policy", str(bad), *WINDOW)
    assert code == 2
    assert err.startswith(f"claimtrail replay: --policy {bad}: Policy bad: spec.tenants[0].weight: ")


def test_checkpoints_written_into_a_store_are_used_by_replay(tmp_path, capsys):
    result = busy(HOURS)
    dsn = f"chdb://{tmp_path}/store"
    with AuditStore.open(dsn) as store:
        writer = store.writer(name="history")
        writer.write_events(result.events)
        writer.write_records(result.records[-200:])
        writer.flush()
    code, out, _ = _run(capsys, "--dsn", dsn, "--write-checkpoints", "1000")
    top = result.events[-1].seq
    assert (code, out.strip()) == (0, f"busy: {(top + 1) // 1000:,} checkpoint(s) written, every 1,000 events "
                                      f"up to seq {top:,}")
    code, out, _ = _run(capsys, "--dsn", dsn, "--write-checkpoints", "1000")  # resumes after the latest
    assert out.strip().startswith("busy: 0 checkpoint(s) written")
    with AuditStore.open(dsn) as store:
        history = StoreHistory(store)
        verifier = Verifier(history)
        results = list(verifier.run(result.records[-200:]))
        assert all(r.match for r in results)
        cursor = verifier.cursor("busy")
        assert cursor.loads == 1 and cursor.folds < 1000 + (result.records[-1].seq - result.records[-200].seq)


@pytest.fixture(scope="module")
def two_clusters(tmp_path_factory, files):
    """The history of ``files`` twice: as its own cluster and as cluster ``twin``, in one pair of
    files and in one store."""
    import dataclasses

    result = busy(HOURS)
    twin_events = [dataclasses.replace(e, cluster="twin") for e in result.events]
    twin_records = [dataclasses.replace(r, cluster="twin", decision_id=f"twin-{r.decision_id}", output_digest="").seal()
                    for r in result.records]
    d = tmp_path_factory.mktemp("two-clusters")
    records, events = d / "records.jsonl", d / "events.jsonl"
    records.write_text(to_jsonl(result.records + twin_records))
    events.write_text("".join(json.dumps(e.to_dict(), sort_keys=True) + "\n"
                              for e in result.events + twin_events))
    dsn = f"chdb://{d}/store"
    with AuditStore.open(dsn) as store:
        writer = store.writer(name="history")
        writer.write_events(result.events + twin_events)
        writer.write_records(result.records + twin_records)
        writer.flush()
    return {"files": ["--records", str(records), "--events", str(events)], "store": ["--dsn", dsn]}


@pytest.mark.parametrize(("history", "cluster"), [("files", "busy"), ("files", "twin"), ("store", "busy"),
                                                  ("store", "twin")])
def test_a_whatif_of_a_history_of_two_clusters_replays_the_cluster_named(files, policies, two_clusters, capsys,
                                                                         history, cluster):
    code, out, err = _run(capsys, *two_clusters[history], "--cluster", cluster, "--policy", policies[1], "--json",
                          *WINDOW)
    assert code == 0, err
    _, alone, _ = _run(capsys, "--records", files[0], "--events", files[1], "--policy", policies[1], "--json",
                       *WINDOW)
    assert json.loads(out) == json.loads(alone)


@pytest.mark.parametrize(("history", "argv", "message"), [
    ("files", [], "--policy: @events holds 2 clusters (busy, twin); name the one to replay with --cluster"),
    ("store", [], "--policy: the store holds 2 clusters (busy, twin); name the one to replay with --cluster"),
    ("files", ["--cluster", "nope"], "--cluster nope: no world events of this cluster in @events (it holds busy, twin)"),
    ("store", ["--cluster", "nope"], "--cluster nope: no world events of this cluster in the store (it holds busy, "
                                     "twin)"),
], ids=["files-without-cluster", "store-without-cluster", "files-unknown-cluster", "store-unknown-cluster"])
def test_a_whatif_of_a_history_of_two_clusters_needs_one_it_holds(policies, two_clusters, capsys, history, argv,
                                                                   message):
    given = two_clusters[history]
    code, _, err = _run(capsys, *given, *argv, "--policy", policies[1], *WINDOW)
    events = given[3] if history == "files" else ""
    assert (code, err.strip()) == (2, f"claimtrail replay: {message.replace('@events', events)}")


@pytest.mark.parametrize(("history", "argv"), [
    ("files", []),
    ("store", []),
    ("files", ["--sample", "0.5"]),
    ("store", WINDOW),
], ids=["files", "store", "files-and-sample", "store-and-window"])
def test_a_replay_with_cluster_verifies_that_clusters_decisions_only(files, two_clusters, capsys, history, argv):
    """The history holds cluster busy and its copy twin (whose digests, made for busy, cannot match)."""
    code, out, err = _run(capsys, *two_clusters[history], "--cluster", "busy", *argv, "--json")
    _, alone, _ = _run(capsys, "--records", files[0], "--events", files[1], *argv, "--json")
    summary = json.loads(out)["summary"]
    assert (code, summary) == (0, json.loads(alone)["summary"]), err
    assert summary["matched"] == summary["verified"] > 0


@pytest.mark.parametrize("history", ["files", "store"])
def test_a_replay_of_a_cluster_the_history_lacks_verifies_nothing_and_says_so(two_clusters, capsys, history):
    code, _, err = _run(capsys, *two_clusters[history], "--cluster", "nope")
    where = two_clusters[history][1] if history == "files" else "the store"
    assert (code, err.strip()) == (2, f"claimtrail replay: no decision matched --cluster nope in {where}: "
                                      "nothing verified")


@pytest.mark.parametrize(("records", "expected"), [
    (0, "busy: 1 checkpoint(s) written, every 1,000 events up to seq @top"),
    (50, "busy: 1 checkpoint(s) written, every 1,000 events up to seq @top"),
    (None, "claimtrail replay: --write-checkpoints: no world events in the store at @dsn: nothing to checkpoint"),
], ids=["events-without-decisions", "events-and-decisions", "empty-store"])
def test_checkpoints_are_written_for_every_cluster_with_events(tmp_path, capsys, records, expected):
    result = busy(HOURS)
    dsn = f"chdb://{tmp_path}/store"
    with AuditStore.open(dsn) as store:
        if records is not None:
            writer = store.writer(name="history")
            writer.write_events(result.events[:1500])
            writer.write_records([r for r in result.records if r.seq < 1500][:records])
            writer.flush()
    code, out, err = _run(capsys, "--dsn", dsn, "--write-checkpoints", "1000")
    said = expected.replace("@top", "1,499").replace("@dsn", dsn)
    assert (code, (out or err).strip()) == (0 if records is not None else 2, said)


NOWHERE = ["--server", "http://127.0.0.1:9"]  # refused before anything is sent

# the history, the options given and the line refusing the one that would do nothing
UNUSED = {
    "workers-with-server": ("server", ["--workers", "2"],
                            "--workers with --server: the audit API replays the selection as one job"),
    "workers-at-its-default-with-server": ("server", ["--workers", "1"],
                                           "--workers with --server: the audit API replays the selection as one job"),
    "checkpoint-every-with-server": ("server", ["--checkpoint-every", "500"],
                                     "--checkpoint-every with --server: the audit API replays from its store's "
                                     "checkpoints"),
    "checkpoint-every-with-a-whatif-through-the-server": (
        "server", ["--policy", "@same", *WINDOW, "--checkpoint-every", "500"],
        "--checkpoint-every with --server: the audit API replays from its store's checkpoints"),
    "checkpoint-every-with-dsn": ("store", ["--checkpoint-every", "500"],
                                  "--checkpoint-every with --dsn: a store's replay starts from the checkpoints stored in "
                                  "it (write them with --write-checkpoints)"),
    "workers-with-policy": ("files", ["--policy", "@same", *WINDOW, "--workers", "2"],
                            "--workers with --policy: a what-if decides its window again in one process"),
    "workers-with-policy-through-the-server": ("server", ["--policy", "@same", *WINDOW, "--workers", "2"],
                                               "--workers with --policy: a what-if decides its window again in one "
                                               "process"),
    "segment-with-policy": ("files", ["--policy", "@same", *WINDOW, "--segment", "500"],
                            "--segment with --policy: a what-if replays its whole window, not the segments of --shard"),
    "show-with-policy": ("files", ["--policy", "@same", *WINDOW, "--show", "5"],
                         "--show with --policy: a what-if prints deltas, not mismatches"),
    "sample-of-one-with-policy": ("store", ["--cluster", "busy", "--policy", "@same", *WINDOW, "--sample", "1"],
                                  "--policy: replays a whole window; --decision, --shard and --sample do not apply"),
    "segment-without-shard": ("files", ["--segment", "500"],
                              "--segment without --shard: it sizes the segments --shard deals out"),
    "token-with-files": ("files", ["--token", "secret"], "--token with --records/--events: it authenticates to --server"),
    "token-with-dsn": ("store", ["--token", "secret"], "--token with --dsn: it authenticates to --server"),
    "since-with-write-checkpoints": ("store", ["--write-checkpoints", "1000", "--since", WINDOW[1]],
                                     "--since with --write-checkpoints: it checkpoints whole event logs; --since "
                                     "selects decisions to replay"),
    "policy-with-write-checkpoints": ("store", ["--write-checkpoints", "1000", "--policy", "@same"],
                                      "--policy with --write-checkpoints: it only writes checkpoints; run the what-if "
                                      "on its own"),
    "workers-with-write-checkpoints": ("store", ["--write-checkpoints", "1000", "--workers", "2"],
                                       "--workers with --write-checkpoints: it folds each event log in one process"),
    "checkpoint-every-with-write-checkpoints": ("store", ["--write-checkpoints", "1000", "--checkpoint-every", "500"],
                                                "--checkpoint-every with --write-checkpoints: its own N is the "
                                                "interval of the checkpoints it writes"),
    "json-with-write-checkpoints": ("store", ["--write-checkpoints", "1000", "--json"],
                                    "--json with --write-checkpoints: it prints one line per cluster, no summary or "
                                    "mismatches"),
    "a-second-history-with-policy": ("files", ["--dsn", "chdb:///nowhere", "--cluster", "busy", "--policy", "@same",
                                               *WINDOW],
                                     "--records/--events, --dsn and --server: choose one history"),
}


@pytest.mark.parametrize(("history", "argv", "message"), UNUSED.values(), ids=UNUSED.keys())
def test_an_option_that_does_nothing_where_it_is_given_is_refused(files, policies, two_clusters, capsys, monkeypatch,
                                                                  history, argv, message):
    monkeypatch.delenv("CLAIMTRAIL_API", raising=False)
    given = {"files": ["--records", files[0], "--events", files[1]], "store": two_clusters["store"],
             "server": NOWHERE}[history]
    code, out, err = _run(capsys, *given, *(policies[0] if a == "@same" else a for a in argv))
    assert (code, err.strip(), out) == (2, f"claimtrail replay: {message}", "")


@pytest.mark.parametrize(("argv", "code", "said", "checkpointed"), [
    ([], 0, "busy: 1 checkpoint(s) written, every 1,000 events up to seq 1,499\n"
            "twin: 1 checkpoint(s) written, every 1,000 events up to seq 1,499", ["busy", "twin"]),
    (["--cluster", "busy"], 0, "busy: 1 checkpoint(s) written, every 1,000 events up to seq 1,499", ["busy"]),
    (["--cluster", "twin"], 0, "twin: 1 checkpoint(s) written, every 1,000 events up to seq 1,499", ["twin"]),
    (["--cluster", "nope"], 2, "claimtrail replay: --cluster nope: no world events of this cluster in the store (it "
                               "holds busy, twin)", []),
], ids=["every-cluster", "cluster-busy", "cluster-twin", "a-cluster-the-store-lacks"])
def test_write_checkpoints_with_cluster_checkpoints_that_cluster_only(tmp_path, capsys, argv, code, said,
                                                                      checkpointed):
    import dataclasses

    events = busy(HOURS).events[:1500]
    dsn = f"chdb://{tmp_path}/store"
    with AuditStore.open(dsn) as store:
        writer = store.writer(name="history")
        writer.write_events(events + [dataclasses.replace(e, cluster="twin") for e in events])
        writer.flush()
    got, out, err = _run(capsys, "--dsn", dsn, "--write-checkpoints", "1000", *argv)
    assert (got, (out or err).strip()) == (code, said)
    with AuditStore.open(dsn, create=False) as store:
        history = StoreHistory(store)
        assert [c for c in ("busy", "twin") if history.nearest_checkpoint(c, 1499) is not None] == checkpointed


def _span_refused(side: str) -> str:
    events = busy(HOURS).events
    return (f"the window lies {side} the event log of cluster busy, which spans {events[0].time} .. "
            f"{events[-1].time}; a what-if decides again only a window of recorded history")


# a window (since, until) and its refusal, if any: the log spans 00:00:00.000 .. 01:59:55.084 on 2026-11-02
OUTSIDE_THE_LOG = {
    "days-after-the-log": ("2026-11-05T00:30:00Z", "2026-11-05T01:30:00Z", _span_refused("after")),
    "just-after-its-last-event": ("2026-11-02T01:59:55.085Z", "2026-11-02T03:00:00Z", _span_refused("after")),
    "before-the-log": ("2026-11-01T22:00:00Z", "2026-11-01T23:00:00Z", _span_refused("before")),
    "up-to-its-first-event": ("2026-11-01T23:00:00Z", "2026-11-02T00:00:00Z", _span_refused("before")),
    "from-its-last-event": ("2026-11-02T01:59:55.084Z", "2026-11-02T03:00:00Z", None),  # a decision lies there
    "across-its-end": ("2026-11-02T01:30:00Z", "2026-11-02T03:00:00Z", None),
}


@pytest.mark.parametrize("history", ["files", "store"])
@pytest.mark.parametrize(("since", "until", "refused"), OUTSIDE_THE_LOG.values(), ids=OUTSIDE_THE_LOG.keys())
def test_a_whatif_window_outside_the_event_log_is_refused_with_the_logs_span(files, policies, two_clusters, capsys,
                                                                            history, since, until, refused):
    given = ["--records", files[0], "--events", files[1]] if history == "files" else [*two_clusters["store"],
                                                                                      "--cluster", "busy"]
    code, out, err = _run(capsys, *given, "--policy", policies[0], "--since", since, "--until", until, "--json")
    if refused is None:
        assert (code, err) == (0, "")
        assert json.loads(out)["decisions"][0] > 0
    else:
        assert (code, err.strip(), out) == (2, f"claimtrail replay: --since {since} --until {until}: {refused}", "")
