"""Every command of the README's command line section runs as written against a running demo.

The README lists the commands in a table and then, in the ``sh`` block right after it, one
runnable line per command for a reader with ``make demo`` running. This test checks that the
table has a row for every command the CLI's parser registers (each action of a command that has
actions, such as ``migration report``), that the block covers every command of the table, and
runs each line: ``claimtrail`` is this checkout's
command line (``python -m audit.cli.main``), and the demo's fixed loopback ports (API 8080,
second server 8081, dashboard 8502) become free ports, since test machines are shared. Servers
(``serve``, ``dashboard``) must come up and answer; everything else must exit 0. A line marked
"needs a Kubernetes cluster" or "needs the internet" is only parsed. Lines run in the README's
order, as a reader runs them (the offline replay reads the files the simulate line writes).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from audit.cli.main import build_parser
from tests.dashboards.conftest import free_port
from tests.demo.conftest import REPO, Demo

pytestmark = pytest.mark.slow
README = (REPO / "README.md").read_text()
ONLY_PARSED = ("needs a Kubernetes cluster", "needs the internet")


def _section() -> str:
    start = README.index("## The command line")
    return README[start:README.index("\n## ", start + 1)]


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The subparsers ``parser`` registers, by name (none for a command without actions)."""
    return next((dict(a.choices) for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


COMMANDS = _actions(build_parser())
GROUPS = {name for name, parser in COMMANDS.items() if _actions(parser)}  # whose second word names an action


def parser_commands() -> set[str]:
    """``<name> [<action>]`` for every command the CLI registers."""
    return {f"{name} {action}" if name in GROUPS else name
            for name, parser in COMMANDS.items() for action in (_actions(parser) or [""])}


def table_commands() -> set[str]:
    """``<name> [<subname>]`` for each row of the table (``report|plan`` alternatives expanded)."""
    names = set()
    for row in re.findall(r"^\| `claimtrail ([^`]+)` \|", _section(), re.M):
        words = row.replace("\\|", "|").split()
        if words[0] in GROUPS:
            names |= {f"{words[0]} {sub}" for sub in words[1].split("|")}
        else:
            names.add(words[0])
    return names


def example_lines() -> list[str]:
    (block,) = re.findall(r"```sh\n(.*?)```", _section(), re.S)
    return [line.strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]


def _name(line: str) -> str:
    words = shlex.split(line.split("  #")[0])
    return words[1] + (f" {words[2]}" if words[1] in GROUPS else "")


def test_the_table_has_a_row_for_every_command_the_cli_registers() -> None:
    assert table_commands() == parser_commands()


def test_every_table_command_has_a_runnable_line() -> None:
    assert table_commands() == {_name(line) for line in example_lines()}


def _argv(line: str, demo: Demo, ports: dict[str, str]) -> list[str]:
    text = line.split("  #")[0].replace("http://127.0.0.1:8080", demo.api)
    for fixed, free in ports.items():
        text = re.sub(rf"--port {fixed}\b", f"--port {free}", text)
    words = shlex.split(os.path.expanduser(text))
    assert words[0] == "claimtrail"
    return [sys.executable, "-m", "audit.cli.main", *words[1:]]


def _serve_until_it_answers(argv: list[str], url: str, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()[-2000:]
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError(f"{argv}: nothing answered at {url}:\n{log.read_text()[-2000:]}")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("line", example_lines(), ids=lambda line: _name(line))
def test_the_readme_line_runs_as_written(line: str, demo: Demo, tmp_path: Path) -> None:
    ports = {"8081": str(free_port()), "8502": str(free_port())}
    argv = _argv(line, demo, ports)
    if any(reason in line for reason in ONLY_PARSED):
        args = build_parser().parse_args(argv[3:])
        assert callable(args.func)
        return
    name = _name(line)
    if name == "serve":
        try:
            _serve_until_it_answers(argv, f"http://127.0.0.1:{ports['8081']}/readyz", tmp_path)
        finally:
            shutil.rmtree("/tmp/claimtrail-second", ignore_errors=True)  # the store the line creates
        return
    if name == "dashboard":
        _serve_until_it_answers(argv, f"http://127.0.0.1:{ports['8502']}/_stcore/health", tmp_path)
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    env.pop("CLAIMTRAIL_API", None)
    try:
        done = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    finally:
        if name == "demo":
            shutil.rmtree("/tmp/claimtrail-demo", ignore_errors=True)  # the data directory the line makes
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr
