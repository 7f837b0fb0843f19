"""JSONL and YAML import and export of decision records and world events.

Export writes one canonical JSON object per line (``.jsonl``) or a YAML list (``.yaml``/``.yml``).
Import reads either form — a YAML file may hold a list or several documents — and admits every
item as the API's ingest does (``audit.store.ingest.admit_record``: strictly valid, and fitting
the store's columns); an item that fails is reported with its location (``file:line`` or
``file#index``) and field path, and the valid items are returned alongside: nothing is dropped
silently, the caller decides whether to quarantine or stop.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from audit.dra.loader import yaml_problem
from audit.events import WorldEvent
from audit.records import DecisionRecord
from audit.store.ingest import AdmissionError, admit_event, admit_record
from audit.store.rows import event_json, record_json

Kind = Literal["records", "events"]


class FileFormatError(ValueError):
    """The file cannot be read as JSONL or YAML at all; the message names it."""


@dataclass(frozen=True)
class ItemError:
    location: str  # "file:line" for JSONL, "file#index" for YAML
    path: str  # field path inside the item ("" for the whole item)
    error: str
    raw: str


@dataclass
class ImportResult:
    records: list[DecisionRecord] = field(default_factory=list)
    events: list[WorldEvent] = field(default_factory=list)
    errors: list[ItemError] = field(default_factory=list)


def _is_yaml(path: Path) -> bool:
    return path.suffix.lower() in (".yaml", ".yml")


def _raw_items(path: Path) -> Iterable[tuple[str, Any, str]]:
    """(location, parsed item or an Exception, raw text) for each item in the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise FileFormatError(f"{path}: cannot read: {exc}") from None
    if _is_yaml(path):
        try:
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            raise FileFormatError(f"{path}: invalid YAML: {yaml_problem(exc)}") from None
        items = docs[0] if len(docs) == 1 and isinstance(docs[0], list) else docs
        for index, item in enumerate(items):
            yield f"{path}#{index}", item, json.dumps(item, default=str)[:65536]
        return
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            yield f"{path}:{number}", json.loads(line), line
        except ValueError as exc:
            yield f"{path}:{number}", exc, line


def import_file(path: str | os.PathLike[str], kind: Kind) -> ImportResult:
    """Read and validate every record or event in a JSONL or YAML file."""
    result = ImportResult()
    for location, item, raw in _raw_items(Path(path)):
        if isinstance(item, Exception):
            result.errors.append(ItemError(location, "", f"invalid JSON: {item}", raw))
            continue
        try:
            if kind == "records":
                result.records.append(admit_record(item))
            else:
                result.events.append(admit_event(item))
        except AdmissionError as exc:
            result.errors.append(ItemError(location, exc.path, str(exc), raw))
    return result


def _write_lines(path: Path, lines: Iterable[str]) -> int:
    count = 0
    with open(path, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line + "\n")
            count += 1
    return count


def export_records(records: Iterable[DecisionRecord], path: str | os.PathLike[str]) -> int:
    target = Path(path)
    if _is_yaml(target):
        return _write_yaml(target, (json.loads(record_json(r)) for r in records))
    return _write_lines(target, (record_json(r) for r in records))


def export_events(events: Iterable[WorldEvent], path: str | os.PathLike[str]) -> int:
    target = Path(path)
    if _is_yaml(target):
        return _write_yaml(target, (json.loads(event_json(e)) for e in events))
    return _write_lines(target, (event_json(e) for e in events))


def _write_yaml(path: Path, items: Iterable[dict[str, Any]]) -> int:
    data = list(items)
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(data, fh, sort_keys=True, allow_unicode=True)
    return len(data)


class JsonlAppender:
    """Appends canonical JSON lines to a file; ``flush`` makes them durable (fsync)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        # a directory that is not there is likelier a typo than a place to make
        if not self.path.parent.exists():
            raise FileFormatError(f"{self.path}: cannot open for writing: directory {self.path.parent} does not exist")
        try:
            self._fh = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise FileFormatError(f"{self.path}: cannot open for writing: {exc.strerror}") from None

    def write_lines(self, lines: Iterable[str]) -> int:
        count = 0
        for line in lines:
            self._fh.write(line + "\n")
            count += 1
        return count

    def flush(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if not self._fh.closed:
            self.flush()
            self._fh.close()
