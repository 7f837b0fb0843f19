"""``claimtrail replay --dsn`` reads a store; a DSN naming no store is an error, never a new empty one."""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.cli.main import main


@pytest.mark.parametrize("extra", [
    pytest.param([], id="verify"),
    pytest.param(["--write-checkpoints", "100"], id="write-checkpoints"),
])
def test_replay_of_a_mistyped_store_is_refused_and_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   extra: list[str]) -> None:
    dsn = f"chdb://{tmp_path}/typo"
    assert main(["replay", "--dsn", dsn, *extra]) == 2
    assert capsys.readouterr().err == (
        f"claimtrail replay: no store at {tmp_path}/typo ({dsn}): check the DSN "
        "(claimtrail serve --create starts an empty one)\n")
    assert not (tmp_path / "typo").exists()
