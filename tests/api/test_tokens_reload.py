"""The tokens file is reloaded by a running server: on SIGHUP, and when the file changes; a file
that does not parse leaves the tokens in force and says so in the log."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import yaml

from audit.api.auth import hash_token
from tests.api.conftest import TOKENS, Server, start_server, stop

NEW_TOKEN = "team-c-secret"


def status(server: Server, token: str) -> int:
    return httpx.get(server.base + "/v1/decisions", headers={"Authorization": f"Bearer {token}"},
                     timeout=30).status_code


def tokens_with(root: Path, *extra: dict[str, object]) -> None:
    entries = [{"token_sha256": hash_token(TOKENS["admin"]), "admin": True},
               {"token_sha256": hash_token(TOKENS["team-a"]), "tenant": "team-a"}, *extra]
    (root / "tokens.yaml").write_text(yaml.safe_dump({"tokens": entries}))


def eventually(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


def test_a_changed_tokens_file_takes_effect_without_a_restart(tmp_path: Path) -> None:
    server, proc = start_server(tmp_path, "--tokens-poll-seconds", "0.5")
    try:
        assert status(server, NEW_TOKEN) == 401
        tokens_with(tmp_path, {"token": NEW_TOKEN, "tenant": "team-c"})
        assert eventually(lambda: status(server, NEW_TOKEN) == 200, 15)
        assert status(server, TOKENS["team-b"]) == 401  # dropped from the file: revoked
    finally:
        stop(proc)


def test_sighup_reloads_at_once_and_a_broken_file_keeps_the_tokens_in_force(tmp_path: Path) -> None:
    server, proc = start_server(tmp_path, "--tokens-poll-seconds", "3600")  # only the signal reloads here
    try:
        tokens_with(tmp_path, {"token": NEW_TOKEN, "tenant": "team-c"})
        time.sleep(0.5)
        assert status(server, NEW_TOKEN) == 401  # the file changed, nobody said so yet
        proc.send_signal(signal.SIGHUP)
        assert eventually(lambda: status(server, NEW_TOKEN) == 200, 10)
        (tmp_path / "tokens.yaml").write_text("tokens: [")
        proc.send_signal(signal.SIGHUP)
        assert eventually(lambda: "tokens file not reloaded" in server.log.read_text(), 10)
        assert status(server, NEW_TOKEN) == 200 and proc.poll() is None
        assert "invalid YAML: " in server.log.read_text() and "(line 1, column " in server.log.read_text()
    finally:
        stop(proc)
    assert proc.returncode in (0, -signal.SIGTERM)


