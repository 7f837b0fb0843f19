"""Every command that talks to the audit API reads its URL one way and refuses one it cannot use
with one line naming where the URL came from, before it sends anything (``audit.cli.apiurl``)."""

from __future__ import annotations

import pytest

from audit.cli.main import main

EXPECTED = "expected an http(s):// URL of the audit API, e.g. http://127.0.0.1:8080"


@pytest.mark.parametrize(("argv", "env", "message"), [
    (["why", "--server", "not a url", "--model", "H100", "team-a/train-1"], None,
     f"claimtrail why: --server 'not a url': {EXPECTED}"),
    (["why", "--model", "H100", "team-a/train-1"], "127.0.0.1:8080",
     f"claimtrail why: CLAIMTRAIL_API '127.0.0.1:8080': {EXPECTED}"),
    (["migration", "report", "--server", "ftp://audit.example"], None,
     f"claimtrail migration: --server 'ftp://audit.example': {EXPECTED}"),
    (["replay", "--server", "http://"], None, f"claimtrail replay: --server 'http://': {EXPECTED}"),
    (["dashboard", "--api", "localhost:8080"], None, f"claimtrail dashboard: --api 'localhost:8080': {EXPECTED}"),
    (["dashboard"], "audit", f"claimtrail dashboard: CLAIMTRAIL_API 'audit': {EXPECTED}"),
], ids=["why-flag", "why-variable", "migration-scheme", "replay-no-host", "dashboard-no-scheme", "dashboard-variable"])
def test_an_api_url_no_request_could_use_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                                     argv: list[str], env: str | None, message: str) -> None:
    if env is None:
        monkeypatch.delenv("CLAIMTRAIL_API", raising=False)
    else:
        monkeypatch.setenv("CLAIMTRAIL_API", env)
    assert main(argv) == 2
    assert capsys.readouterr().err == message + "\n"
