"""``claimtrail why --server``: the same answer as the API, errors as one line."""

from __future__ import annotations

import json

import pytest

from audit.cli.main import main
from tests.api.conftest import TOKENS, Server


def test_why_against_the_server_prints_the_api_answer(server: Server, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["why", "team-a/train-1", "--model", "H100", "--server", server.base, "--token", TOKENS["team-a"]]
    assert main([*argv, "-o", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == server.get("/v1/pods/team-a/train-1/why", "team-a", model="H100").json()
    assert main(argv) == 0
    assert capsys.readouterr().out.startswith("H100 skipped: of 64 H100")


def test_token_comes_from_the_environment(server: Server, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAIMTRAIL_TOKEN", TOKENS["admin"])
    monkeypatch.setenv("CLAIMTRAIL_API", server.base)
    assert main(["why", "team-b/infer-9", "--model", "H100", "--devices", "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["reasons"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--token", "wrong"], "HTTP 401: a valid bearer token is required"),
    (["--token", TOKENS["team-b"]], "HTTP 404: no decision for pod team-a/train-1"),
], ids=["bad-token", "other-tenant"])
def test_server_errors_are_one_line(server: Server, capsys: pytest.CaptureFixture[str], argv: list[str],
                                    message: str) -> None:
    assert main(["why", "team-a/train-1", "--model", "H100", "--server", server.base, *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_unreachable_server_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    from tests.api.conftest import free_port

    assert main(["why", "a/b", "--model", "H100", "--server", f"http://127.0.0.1:{free_port()}"]) == 2
    assert "cannot reach the audit API" in capsys.readouterr().err
