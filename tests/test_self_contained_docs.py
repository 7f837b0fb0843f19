"""The repository explains itself: no comment or document sends the reader to notes it lacks.

Design and research notes used while building ClaimTrail are not part of the repository, so a
reference to them (a notes file name, a "research" section number) is a dead end for a reader;
upstream files, specifications and papers are cited by name instead.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("audit", "ingest", "dashboards", "tests", "benchmarks", "deploy", "docs")
NOTES = re.compile(r"DESIGN\.md|research/[a-z-]+\.md|research §|research notes|stack-notes|fairness\.md|dra-allocator\.md|"
                   r"audit-observability\.md|design notes?\b")
THIS = Path(__file__).resolve()


def _files() -> list[Path]:
    found = [REPO / "README.md", REPO / "Makefile", REPO / "Dockerfile"]
    for folder in FOLDERS:
        found += [p for p in (REPO / folder).rglob("*") if p.suffix in (".py", ".md", ".yaml", ".toml", ".sql")]
    return sorted(p for p in found if p.exists() and p.resolve() != THIS and "__pycache__" not in p.parts)


@pytest.mark.parametrize("path", _files(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_reference_to_notes_outside_the_repository(path: Path) -> None:
    hits = [f"{i}: {line.strip()}" for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
            if NOTES.search(line)]
    assert hits == []
