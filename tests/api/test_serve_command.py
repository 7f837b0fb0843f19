"""``claimtrail serve`` refuses unsafe or broken setups with one line, before opening anything."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from audit.api.auth import hash_token
from audit.cli.main import main
from tests.api.conftest import REPO, Server, free_port


@pytest.mark.parametrize(("argv", "message"), [
    (["--insecure-local", "--host", "0.0.0.0"], "--insecure-local is only allowed on a loopback address"),
    (["--insecure-local", "--host", "10.1.2.3"], "--insecure-local is only allowed on a loopback address"),
    ([], "no authentication configured"),
    (["--tokens", "/nonexistent/tokens.yaml"], "tokens file /nonexistent/tokens.yaml: cannot read"),
    (["--insecure-local", "--port", "70000"], "--port 70000: expected 1..65535"),
    (["--insecure-local", "--checkpoint-every", "-1"],
     "--checkpoint-every -1: expected a number of events, or 0 for no checkpoints"),
], ids=["any-address", "lan-address", "no-auth", "missing-tokens", "bad-port", "negative-checkpoint-interval"])
def test_refused_setups(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_bad_tokens_file_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tokens:\n- {token_sha256: nothex, tenant: a}\n")
    assert main(["serve", "--tokens", str(tokens)]) == 2
    assert "tokens[0].token_sha256: expected 64 hex characters" in capsys.readouterr().err


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read"),
    ("baseline: [", "invalid YAML: expected the node content, but found '<stream end>' (line 1, column 12)"),
    ("baseline: {track: device-plugin}\ncandidate: {track: dra}\nmetrics: {}\n", "thresholds.metrics: declare at least one metric"),
    ("baseline: {track: dra}\ncandidate: {track: dra}\nmetrics: {speed: {max_regression: 1}}\n",
     "thresholds.metrics.speed: unknown metric"),
], ids=["missing", "not-yaml", "no-metrics", "unknown-metric"])
def test_bad_migration_thresholds_are_named(tmp_path: Path, content: str | None, message: str,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "thresholds.yaml"
    if content is not None:
        path.write_text(content)
    assert main(["serve", "--insecure-local", "--migration-thresholds", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"--migration-thresholds {path}: {message}" in err and len(err.strip().splitlines()) == 1


def test_hash_token_prints_the_digest(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--hash-token", "s3cret"]) == 0
    assert capsys.readouterr().out.strip() == hash_token("s3cret")


def test_second_server_on_the_same_embedded_store_explains_ownership(server: Server) -> None:
    root = server.log.parent
    proc = subprocess.run([sys.executable, "-m", "audit.cli.main", "serve", "--dsn", f"chdb://{root}/db",
                           "--insecure-local", "--port", str(free_port())], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    # one line of ours, and none of the engine's own "Code: 76. DB::Exception" output
    assert proc.stderr == (f"claimtrail serve: the embedded store at {root}/db is owned by another process (a "
                           "running claimtrail serve or demo); use that server's API URL (such as "
                           "http://127.0.0.1:8080) instead of the store's directory, or stop it first\n")


@pytest.mark.parametrize(("argv", "env", "refused"), [
    pytest.param(["--dsn", "chdb://ROOT/typo"], {}, True, id="explicit-dsn-missing"),
    pytest.param([], {"CLAIMTRAIL_DSN": "chdb://ROOT/typo"}, True, id="env-dsn-missing"),
    pytest.param(["--create", "--dsn", "chdb://ROOT/typo"], {}, False, id="create-asked"),
    pytest.param([], {"CLAIMTRAIL_DATA_DIR": "ROOT/fresh"}, False, id="default-location-is-created"),
])
def test_a_store_that_does_not_exist_is_refused_unless_created(tmp_path: Path, argv: list[str], env: dict[str, str],
                                                               refused: bool) -> None:
    import os

    argv = [a.replace("ROOT", str(tmp_path)) for a in argv]
    env = {k: v.replace("ROOT", str(tmp_path)) for k, v in env.items()}
    full = {**{k: v for k, v in os.environ.items() if k not in ("CLAIMTRAIL_DSN", "CLAIMTRAIL_DATA_DIR")}, **env}
    proc = subprocess.Popen([sys.executable, "-m", "audit.cli.main", "serve", "--insecure-local",
                             "--port", str(free_port()), *argv], cwd=REPO, env=full,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if refused:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 2
            assert err == (f"claimtrail serve: no store at {tmp_path}/typo (chdb://{tmp_path}/typo): check the DSN "
                           "(claimtrail serve --create starts an empty one)\n")
            assert not (tmp_path / "typo").exists()
        else:
            assert proc.stderr is not None
            assert proc.stderr.readline().startswith("claimtrail serve: listening on")
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=60)  # a server that ignores SIGTERM fails the test ...
        except subprocess.TimeoutExpired:
            proc.kill()  # ... and is not left running after it
            proc.communicate()
            raise


def test_a_port_already_taken_is_told_in_one_line_and_never_said_to_be_listened_on(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "audit.cli.main", "serve", "--insecure-local", "--port", str(port),
                               "--dsn", f"chdb://{tmp_path}/db", "--create"], cwd=REPO, capture_output=True, text=True,
                              timeout=120)
    assert (done.returncode, done.stderr) == (
        2, f"claimtrail serve: --host 127.0.0.1 --port {port}: cannot listen there: Address already in use\n")
    assert not (tmp_path / "db").exists()  # refused before the store was opened
