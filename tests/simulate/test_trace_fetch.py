"""``claimtrail traces fetch`` (``make traces``) against a local file server: downloads, verifies, refuses.

The real download needs the internet; these tests serve small fixture CSVs (laid out as upstream
lays them out) from a real HTTP server on loopback, with a manifest pinning their sha256.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.simulate.loop import simulate
from ingest.simulate.trace_files import TRACE_FILES, UPSTREAM_URL, sha256_of
from ingest.simulate.traces import openb_scenario, spot_scenario

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"
REPO = Path(__file__).resolve().parents[2]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass


def _serve(root: Path) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def mirror(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A writable copy of the fixture mirror, served on loopback."""
    root = tmp_path / "mirror"
    shutil.copytree(FIXTURES / "mirror", root)
    yield from ((root, url) for url in _serve(root))


def _fetch(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    import os

    env = {**os.environ, **(env_extra or {})}
    env.pop("CLAIMTRAIL_TRACE_DIR", None)
    return subprocess.run([sys.executable, "-m", "audit.cli.main", "traces", "fetch", *args],
                          capture_output=True, text=True, env=env, cwd=REPO, timeout=120)


def test_fetch_downloads_verifies_and_prints_the_citation(mirror, tmp_path):
    _, url = mirror
    dest = tmp_path / "traces"
    out = _fetch("--dir", str(dest), "--base-url", url, "--manifest", str(FIXTURES / "manifest.json"))
    assert out.returncode == 0, out.stderr
    manifest = json.loads((FIXTURES / "manifest.json").read_text())
    for item in manifest:
        assert sha256_of(str(dest / item["path"])) == item["sha256"]
        assert f"{item['path']}: downloaded, {item['size']:,} bytes, sha256 verified" in out.stdout
    assert not list(dest.rglob("*.part"))
    assert 'Beware of Fragmentation' in out.stdout and "ASPLOS '26" in out.stdout
    assert "Alibaba Cluster Trace Program (github.com/alibaba/clusterdata)" in out.stdout


def test_fetched_traces_are_what_the_simulator_reads(mirror, tmp_path):
    _, url = mirror
    dest = tmp_path / "traces"
    assert _fetch("--dir", str(dest), "--base-url", url, "--manifest", str(FIXTURES / "manifest.json")).returncode == 0
    # at the recorded arrival times: the mirror's five pods, each once
    result = simulate(openb_scenario(str(dest), seed=1, hours=24, load=None), seed=1, keep_events=False)
    outcomes = sorted({(r.pod, r.outcome, r.allocated_model) for r in result.records})
    # pod-0003 asks for no GPU; pod-0005 wants all 8 V100M32 while pods 0000 and 0002 hold two
    assert outcomes == [("openb-pod-0000", "allocated", "V100M32"), ("openb-pod-0001", "allocated", "P100"),
                        ("openb-pod-0002", "allocated", "V100M32"), ("openb-pod-0004", "allocated", "T4"),
                        ("openb-pod-0005", "unschedulable", "")]
    assert sum(1 for o in spot_scenario(str(dest), seed=1, hours=1).objects if o["kind"] == "Node") == 4


def test_a_checksum_mismatch_is_refused_and_nothing_is_written(mirror, tmp_path):
    root, url = mirror
    tampered = root / "cluster-trace-v2026-spot-gpu" / "node_info_df.csv"
    tampered.write_text(tampered.read_text().replace("H800,8", "H800,9"))
    dest = tmp_path / "traces"
    out = _fetch("--dir", str(dest), "--base-url", url, "--manifest", str(FIXTURES / "manifest.json"))
    assert out.returncode == 2
    got = hashlib.sha256(tampered.read_bytes()).hexdigest()
    assert out.stderr == (
        f"claimtrail traces: cluster-trace-v2026-spot-gpu/node_info_df.csv: sha256 mismatch for "
        f"{url}cluster-trace-v2026-spot-gpu/node_info_df.csv: expected "
        f"4eae4914c3bc201d2160328fd0d54b08415ad0c65b10edef6ec1d366f097128f, got {got} (114 bytes); "
        "refused, nothing written\n")
    assert not (dest / "cluster-trace-v2026-spot-gpu" / "node_info_df.csv").exists()
    assert not list(dest.rglob("*.part"))


@pytest.mark.parametrize(("change", "message"), [
    ("grow", "sent more than the expected 179 bytes; refused, nothing written"),
    ("remove", "answered HTTP 404"),
])
def test_an_oversized_or_missing_file_is_refused(mirror, tmp_path, change, message):
    root, url = mirror
    target = root / "cluster-trace-gpu-v2023" / "csv" / "openb_node_list_gpu_node.csv"
    if change == "grow":
        target.write_bytes(target.read_bytes() * 1000)
    else:
        target.unlink()
    out = _fetch("--dir", str(tmp_path / "t"), "--base-url", url, "--manifest", str(FIXTURES / "manifest.json"))
    assert out.returncode == 2 and message in out.stderr, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


def test_a_second_fetch_verifies_in_place_and_replaces_a_corrupted_file(mirror, tmp_path):
    _, url = mirror
    dest = tmp_path / "traces"
    args = ("--dir", str(dest), "--base-url", url, "--manifest", str(FIXTURES / "manifest.json"))
    assert _fetch(*args).returncode == 0
    spot = dest / "cluster-trace-v2026-spot-gpu" / "node_info_df.csv"
    spot.write_text("corrupted\n")
    again = _fetch(*args)
    assert again.returncode == 0
    assert "cluster-trace-gpu-v2023/openb_node_list_gpu_node.csv: present, sha256 verified" in again.stdout
    assert "cluster-trace-v2026-spot-gpu/node_info_df.csv: downloaded, 114 bytes, sha256 verified" in again.stdout
    assert spot.read_bytes() == (FIXTURES / "mirror" / "cluster-trace-v2026-spot-gpu" / "node_info_df.csv").read_bytes()


def test_the_mirror_can_come_from_the_environment(mirror, tmp_path):
    _, url = mirror
    out = _fetch("--dir", str(tmp_path / "t"), "--manifest", str(FIXTURES / "manifest.json"),
                 env_extra={"CLAIMTRAIL_TRACE_URL": url})
    assert out.returncode == 0, out.stderr
    assert f"from {url} into {tmp_path / 't'}" in out.stdout


def test_pinned_digests_match_the_upstream_files(trace_dir, tmp_path):
    # the shipped pins, checked against a copy of the upstream files served as upstream lays them out
    root = tmp_path / "upstream"
    for f in TRACE_FILES:
        (root / f.upstream).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(Path(trace_dir) / f.path, root / f.upstream)
        assert (root / f.upstream).stat().st_size == f.size
    for url in _serve(root):
        out = _fetch("--dir", str(tmp_path / "t"), "--base-url", url)
        assert out.returncode == 0, out.stderr
    assert UPSTREAM_URL == ("https://raw.githubusercontent.com/alibaba/clusterdata/"
                            "7a6c496e4f4b6ce6150be8f881cb051bf2abff42/")


SETTINGS = ("CLAIMTRAIL_TRACE_DIR", "CLAIMTRAIL_DATA_DIR", "TRACE_DIR")


@pytest.mark.parametrize(("make_vars", "settings", "lands_in", "where"), [
    pytest.param({}, {}, ".claimtrail/traces", "-> .claimtrail/traces  (the data directory, found)", id="default"),
    pytest.param({}, {"CLAIMTRAIL_DATA_DIR": "{tmp}/data"}, "{tmp}/data/traces",
                 "-> {tmp}/data/traces  (the data directory, found)", id="data-directory-setting"),
    pytest.param({}, {"CLAIMTRAIL_TRACE_DIR": "{tmp}/env", "CLAIMTRAIL_DATA_DIR": "{tmp}/data"}, "{tmp}/env",
                 "-> {tmp}/env  (CLAIMTRAIL_TRACE_DIR, found)", id="trace-dir-setting"),
    pytest.param({"TRACE_DIR": "{tmp}/chosen"}, {"CLAIMTRAIL_TRACE_DIR": "{tmp}/env"}, "{tmp}/chosen", None,
                 id="make-variable-chooses-another"),
])
def test_make_traces_fetches_where_the_command_and_the_simulator_look(mirror, tmp_path, make_vars, settings,
                                                                     lands_in, where):
    """``make traces`` runs the fetch as printed by ``make -n``; its files land where ``claimtrail
    traces fetch`` and ``simulate --trace`` look under the same settings, unless TRACE_DIR says otherwise."""
    import os

    _, url = mirror
    settings = {k: v.format(tmp=tmp_path) for k, v in settings.items()}
    env = {**{k: v for k, v in os.environ.items() if k not in SETTINGS}, **settings}
    make = subprocess.run(["make", "-n", "traces", "VENV=/opt/v", *(f"{k}={v.format(tmp=tmp_path)}"
                                                                    for k, v in make_vars.items())],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert make.returncode == 0, make.stderr
    (line,) = [line for line in make.stdout.splitlines() if "traces fetch" in line]
    program, *args = shlex.split(line)
    assert program == "/opt/v/bin/claimtrail"
    env["PYTHONPATH"] = str(REPO)
    fetch = subprocess.run([sys.executable, "-m", "audit.cli.main", *args, "--base-url", url,
                            "--manifest", str(FIXTURES / "manifest.json")],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert fetch.returncode == 0, fetch.stderr
    landed = tmp_path / lands_in.format(tmp=tmp_path)
    assert sorted(str(p.relative_to(landed)) for p in landed.rglob("*.csv")) == sorted(
        item["path"] for item in json.loads((FIXTURES / "manifest.json").read_text()))
    if where is not None:
        found = subprocess.run([sys.executable, "-m", "audit.cli.main", "traces", "where"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=120)
        assert found.stdout.splitlines()[0] == where.format(tmp=tmp_path)


def test_simulate_and_where_find_the_traces_through_the_setting(mirror, tmp_path):
    import os

    _, url = mirror
    dest = tmp_path / "traces"
    assert _fetch("--dir", str(dest), "--base-url", url, "--manifest", str(FIXTURES / "manifest.json")).returncode == 0
    env = {**os.environ, "CLAIMTRAIL_TRACE_DIR": str(dest), "CLAIMTRAIL_DATA_DIR": str(tmp_path / "data")}
    where = subprocess.run([sys.executable, "-m", "audit.cli.main", "traces", "where"], capture_output=True, text=True,
                           env=env, cwd=REPO, timeout=120)
    assert where.returncode == 0, where.stderr
    assert where.stdout.splitlines()[0] == f"-> {dest}  (CLAIMTRAIL_TRACE_DIR, found)"
    assert where.stdout.splitlines()[1] == f"   {tmp_path}/data/traces  (the data directory, absent)"
    out = tmp_path / "records.jsonl"
    sim = subprocess.run([sys.executable, "-m", "audit.cli.main", "simulate", "--trace", "openb-2023", "--hours", "24",
                          "--load", "recorded",
                          "--out", str(out)], capture_output=True, text=True, env=env, cwd=REPO, timeout=300)
    assert sim.returncode == 0, sim.stderr
    pods = sorted({json.loads(line)["pod"] for line in out.read_text().splitlines()})
    assert pods == ["openb-pod-0000", "openb-pod-0001", "openb-pod-0002", "openb-pod-0004", "openb-pod-0005"]


def test_where_without_any_trace_folder_says_how_to_get_them(tmp_path):
    import os

    env = {k: v for k, v in os.environ.items() if k != "CLAIMTRAIL_TRACE_DIR"}
    env["CLAIMTRAIL_DATA_DIR"] = str(tmp_path / "data")
    # run from a copy of the package with nothing beside it, so ../shared/traces is absent too
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "audit", copy / "audit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "ingest", copy / "ingest", ignore=shutil.ignore_patterns("__pycache__"))
    env["PYTHONPATH"] = str(copy)
    out = subprocess.run([sys.executable, "-m", "audit.cli.main", "traces", "where"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    assert out.returncode == 1
    assert out.stderr == "claimtrail traces: no trace folder found; run `make traces` (or `claimtrail traces fetch`)\n"
    assert f"{tmp_path}/shared/traces  (beside the repository, absent)" in out.stdout
