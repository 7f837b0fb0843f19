"""Local commands (`allocate`, `why --dump`, `schema`) load only what they need.

Start-up time is mostly imports, so instead of timing (which belongs to the benchmarks) these
tests run the command in a fresh interpreter and list the modules it loaded: none of the
store, API, telemetry, Kubernetes-client, dashboard or data-frame libraries, nor the
interactive shell the ``cel`` package ships, may be among them. A control run that imports one
of them first shows the check sees what a command loads.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"

# Top-level packages a local, offline command has no use for.
HEAVY = frozenset({
    "chdb", "clickhouse_connect",  # the store
    "fastapi", "starlette", "uvicorn", "httpx",  # the API and its client
    "opentelemetry", "google",  # telemetry and protobuf
    "kubernetes",  # the cluster watcher
    "streamlit", "pandas", "numpy", "pyarrow", "altair",  # dashboards
    "typer", "rich", "prompt_toolkit", "pygments",  # cel's interactive shell
})

# Runs the command in-process, then writes the names of the loaded modules to argv[1].
HARNESS = """
import json, sys
for name in sys.argv[2].split(",") if sys.argv[2] else []:
    __import__(name)
from audit.cli.main import main
code = main(sys.argv[3:])
with open(sys.argv[1], "w") as f:
    json.dump(sorted(sys.modules), f)
raise SystemExit(code)
"""

ALLOCATE = ["allocate", "-f", str(FIXTURES / "allocator" / "cluster.yaml"), "-f", str(FIXTURES / "allocator" / "claims.yaml"),
            "--node", "node-a"]
WHY_DUMP = ["why", "--dump", str(FIXTURES / "explain" / "cluster-pending.yaml"), "team-a/train-1", "--model", "H100", "--devices"]


def loaded_modules(tmp_path: Path, argv: list[str], preimport: str = "") -> set[str]:
    out = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-c", HARNESS, str(out), preimport, *argv], capture_output=True, text=True,
                          cwd=REPO, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(json.loads(out.read_text()))


def packages(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


@pytest.mark.parametrize("argv", [pytest.param(ALLOCATE, id="allocate"), pytest.param(WHY_DUMP, id="why-dump"),
                                  pytest.param(["schema"], id="schema-prints-ddl-without-a-store-client")])
def test_local_command_loads_no_heavy_package(tmp_path: Path, argv: list[str]) -> None:
    loaded = packages(loaded_modules(tmp_path, argv))
    assert "audit" in loaded  # the command really ran in the harness
    assert loaded & HEAVY == set()


def test_heavy_package_loaded_first_is_seen(tmp_path: Path) -> None:
    assert "httpx" in packages(loaded_modules(tmp_path, ALLOCATE, preimport="httpx")) & HEAVY


def test_allocate_loads_cel_without_its_interactive_shell(tmp_path: Path) -> None:
    modules = loaded_modules(tmp_path, ALLOCATE)
    assert {"cel", "cel.cel", "cel.stdlib"} <= modules
    assert "cel.cli" not in modules


def test_allocate_imports_only_its_own_command_module(tmp_path: Path) -> None:
    modules = loaded_modules(tmp_path, ALLOCATE)
    assert {m for m in modules if m.startswith("audit.cli.cmd_")} == {"audit.cli.cmd_allocate"}


@pytest.mark.parametrize(("argv", "chosen"), [
    pytest.param(["allocate", "-f", "x.yaml"], "allocate", id="command-first"),
    pytest.param(["--log-level", "DEBUG", "why", "a/b"], "why", id="after-log-level-value"),
    pytest.param(["--log-level=DEBUG", "why"], "why", id="after-log-level-equals"),
    pytest.param(["allocate", "--help"], "allocate", id="help-of-one-command"),
    pytest.param(["-h", "allocate"], None, id="help-first-lists-every-command"),
    pytest.param(["alocate"], None, id="unknown-command-gets-every-command-for-the-error"),
    pytest.param([], None, id="no-command"),
])
def test_chosen_command(argv: list[str], chosen: str | None) -> None:
    from audit.cli.main import chosen_command, command_names

    assert chosen_command(argv, command_names()) == chosen


def test_every_command_module_is_found_without_importing_it() -> None:
    from audit.cli.main import command_names

    assert {"allocate", "why", "serve", "schema", "validate", "replay", "simulate"} <= set(command_names())


@pytest.mark.parametrize("argv", [
    pytest.param(["allocate", "-f", "a.yaml", "-f", "b.yaml", "--node", "n", "--claim", "ns/c", "-o", "yaml"], id="allocate"),
    pytest.param(["--log-level", "INFO", "why", "team-a/p", "--model", "H100", "--dump", "d.yaml"], id="why-after-log-level"),
    pytest.param(["validate", "-f", "x.yaml"], id="validate"),
    pytest.param(["schema", "--cluster", "c1"], id="schema"),
])
def test_parser_of_one_command_parses_as_the_full_parser(argv: list[str]) -> None:
    from audit.cli.main import build_parser

    assert build_parser(argv).parse_args(argv) == build_parser().parse_args(argv)
