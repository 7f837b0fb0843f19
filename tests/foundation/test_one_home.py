"""Times, canonical JSON and a record as a plain dict have one home each; no module takes them
from anywhere else.

A name imported from a module that no longer defines it fails only when the importing function
runs (imports inside functions are common here, to keep the command line's start-up fast), so
this test reads every module's source, function bodies included.
"""

from __future__ import annotations

import ast
from pathlib import Path

import audit.canonical
import audit.records
import audit.timestamps

REPO = Path(__file__).resolve().parents[2]
HOMES = {name: "audit.timestamps" for name in ("parse_time_ms", "format_time_ms", "parse_rfc3339", "format_utc",
                                                "is_rfc3339")}
HOMES |= {name: "audit.canonical" for name in ("canonical_json", "canonical_text", "canonical_digest", "digest",
                                                 "json_lines")}
HOMES["record_dict"] = "audit.records"
SOURCES = sorted(p for top in ("audit", "ingest", "dashboards", "benchmarks", "tests") for p in (REPO / top).rglob("*.py"))


def test_the_homes_define_what_they_are_the_home_of() -> None:
    for name, home in HOMES.items():
        assert hasattr({"audit.timestamps": audit.timestamps, "audit.canonical": audit.canonical,
                        "audit.records": audit.records}[home], name)


def test_every_import_of_a_shared_job_comes_from_its_home() -> None:
    wrong = []
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("audit"):
                for alias in node.names:
                    home = HOMES.get(alias.name)
                    if home and node.module != home:
                        wrong.append(f"{path.relative_to(REPO)}:{node.lineno}: {alias.name} from {node.module} "
                                     f"(its home is {home})")
    assert not wrong, wrong
