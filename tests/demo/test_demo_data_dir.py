"""``claimtrail demo`` recreates its data directory: only an earlier demo's, never anything else.

The refusals run the real command (they end before any server starts); the directories it may
empty are checked on the step itself, since a whole demo day is the other tests' job.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from audit.cli.cmd_demo import _recreate
from audit.cli.main import main


def _earlier_demo(d: Path) -> None:
    (d / "db").mkdir(parents=True)
    (d / "db" / "status").write_text("")
    (d / "records.jsonl").write_text("{}\n")
    (d / "events.jsonl").write_text("{}\n")
    (d / "ids.sqlite").write_bytes(b"")
    (d / "spool" / "writer").mkdir(parents=True)


def _new(d: Path) -> None:
    pass


def _empty(d: Path) -> None:
    d.mkdir()


@pytest.mark.parametrize("prepare", [_new, _empty, _earlier_demo], ids=["new", "empty", "earlier demo"])
def test_a_new_an_empty_or_an_earlier_demos_directory_is_left_empty(tmp_path: Path,
                                                                      prepare: Callable[[Path], None]) -> None:
    data = tmp_path / "data"
    prepare(data)
    _recreate(data)
    assert data.is_dir() and list(data.iterdir()) == []


def _demo(capsys: pytest.CaptureFixture[str], data: Path) -> tuple[int, str]:
    code = main(["demo", "--check", "--data-dir", str(data), "--api-port", "0", "--dashboard-port", "0"])
    return code, capsys.readouterr().err


def test_a_directory_holding_other_files_is_refused_and_kept(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "home"
    _earlier_demo(data)
    (data / "thesis.tex").write_text("years of work")
    (data / ".ssh").mkdir()
    code, err = _demo(capsys, data)
    assert (code, err) == (2, f"claimtrail demo: --data-dir {data}: holds .ssh, thesis.tex, which a demo does not "
                              "write; the demo deletes its data directory's contents, so name a new or empty "
                              "directory\n")
    assert sorted(p.name for p in data.iterdir()) == [
        ".ssh", "db", "events.jsonl", "ids.sqlite", "records.jsonl", "spool", "thesis.tex"]


def test_a_file_is_refused_as_not_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "notes.txt"
    data.write_text("kept")
    assert _demo(capsys, data) == (2, f"claimtrail demo: --data-dir {data}: is not a directory\n")
    assert data.read_text() == "kept"


def test_the_store_of_a_running_demo_is_refused_and_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    hold = ("import clickhouse_connect, sys; c = clickhouse_connect.get_client(dsn=sys.argv[1]); "
            "print('held', flush=True); sys.stdin.read()")
    holder = subprocess.Popen([sys.executable, "-c", hold, f"chdb://{data}/db"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        code, err = _demo(capsys, data)
        assert (code, err) == (2, f"claimtrail demo: --data-dir {data}: its store is in use by another process "
                                  "(a demo or claimtrail serve running on it); stop that first or name another "
                                  "directory\n")
        assert (data / "db" / "status").exists()
    finally:
        holder.communicate("")
