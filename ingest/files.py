"""JSONL and YAML import and export of decision records and world events.

Export writes one canonical JSON object per line (``.jsonl``) or a YAML list (``.yaml``/``.yml``).
Import reads either form, gzip-compressed or not — a YAML file may hold a list or several
documents — and admits every
item as the API's ingest does (``audit.store.ingest.admit_record``: strictly valid, and fitting
the store's columns); an item that fails is reported with its location (``file:line`` or
``file#index``) and field path, and the valid items are returned alongside: nothing is dropped
silently, the caller decides whether to quarantine or stop.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from audit.canonical import canonical_json
from audit.dra.loader import yaml_problem
from audit.errors import UserError
from audit.events import WorldEvent
from audit.records import DecisionRecord, record_bytes, record_text
from audit.store.ingest import GZIP_MAGIC, AdmissionError, admit_event, admit_record
from audit.store.rows import event_json

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
    locations: list[str] = field(default_factory=list)  # of each record or event taken, in order


def _is_yaml(path: Path) -> bool:
    return path.suffix.lower() in (".yaml", ".yml")


def _read(path: Path) -> bytes:
    """The file's bytes, decompressed when it is gzip (as the API reads a gzip body), once only."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise FileFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if data[:2] == GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError; EOFError: cut short
            raise FileFormatError(f"{path}: not valid gzip ({exc})") from None
        if data[:2] == GZIP_MAGIC:
            raise FileFormatError(f"{path}: gzip data inside gzip; compress the file once")
    return data


def _raw_items(path: Path) -> Iterable[tuple[str, Any, str, bytes | None]]:
    """(location, parsed item or an Exception, raw text, the line's bytes) for each item in the file."""
    data = _read(path)
    if _is_yaml(path.with_suffix("") if path.suffix.lower() == ".gz" else path):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            number = data.count(b"\n", 0, exc.start) + 1
            column = exc.start - data.rfind(b"\n", 0, exc.start)
            raise FileFormatError(f"{path}:{number}: not UTF-8 text (byte 0x{data[exc.start]:02x} in column {column}: "
                                  f"{exc.reason})") from None
        try:
            docs = [d for d in yaml.safe_load_all(text) if d is not None]
        except yaml.YAMLError as exc:
            raise FileFormatError(f"{path}: invalid YAML: {yaml_problem(exc)}") from None
        items = docs[0] if len(docs) == 1 and isinstance(docs[0], list) else docs
        for index, item in enumerate(items):
            yield f"{path}#{index}", item, json.dumps(item, default=str)[:65536], None
        return
    # line by line, as the API reads a body: a line that is not UTF-8 is named like any other
    # line that is not JSON, and the lines around it are still read
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if not raw.strip():
            continue
        location = f"{path}:{number}"
        try:
            # a byte order mark before a line (a file saved by some editors, or files joined) is
            # skipped, as the API's JSON parser skips it in a body
            line = raw.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            yield location, exc, raw.decode("utf-8", "replace"), raw
            continue
        try:
            item = json.loads(line)
        except ValueError as exc:
            item = exc
        except RecursionError:  # nested deeper than the parser follows: a bad line, as the API says
            item = ValueError("nested too deeply to parse")
        yield location, item, line, raw


def import_file(path: str | os.PathLike[str], kind: Kind) -> ImportResult:
    """Read and admit every record or event in a JSONL or YAML file (either may be gzip)."""
    result = ImportResult()
    for location, item, raw, text in _raw_items(Path(path)):
        if isinstance(item, Exception):
            result.errors.append(ItemError(location, "", f"invalid JSON: {item}", raw))
            continue
        try:
            if kind == "records":
                result.records.append(admit_record(item, text))
            else:
                result.events.append(admit_event(item))
            result.locations.append(location)
        except AdmissionError as exc:
            result.errors.append(ItemError(location, exc.path, str(exc), raw))
    return result


def admitted(path: str, kind: Kind, flag: str) -> ImportResult:
    """``import_file`` for a command line: a file that cannot be read, or the first item refused
    (with how many were), is a ``UserError`` naming ``flag`` (``--records``) and the item's line."""
    try:
        result = import_file(path, kind)
    except FileFormatError as exc:
        raise UserError(f"{flag} {exc}") from None
    if result.errors:
        first = result.errors[0]
        where = f" at {first.path}" if first.path else ""
        raise UserError(f"{flag} {first.location}{where}: {first.error} "
                        f"({len(result.errors)} invalid item(s); fix or remove them first)")
    return result


def _one_per_key(items: list[Any], locations: list[str], key: Callable[[Any], Hashable],
                 text: Callable[[Any], bytes], clash: Callable[[Any, str, str], str]) -> list[Any]:
    """The items with one given twice taken once, as the store absorbs an identical re-send (logs
    concatenated where they overlap); ValueError (``clash``: the item and both locations) for two
    different items under one key, since a history holds one of each. ``text``: an item's
    canonical JSON."""
    seen: dict[Hashable, tuple[Any, str]] = {}
    for item, where in zip(items, locations, strict=True):
        first, first_where = seen.setdefault(key(item), (item, where))
        # by canonical text, as the store tells a re-send from a conflict, not == (which takes 1
        # and true in a payload for the same value)
        if first is not item and text(first) != text(item):
            raise ValueError(clash(item, first_where, where))
    return [item for item, _ in seen.values()]


def one_event_per_seq(imported: ImportResult) -> list[WorldEvent]:
    """The imported events, one per cluster and seq (``_one_per_key``)."""
    return _one_per_key(imported.events, imported.locations, lambda e: (e.cluster, e.seq),
                        lambda e: canonical_json(e.to_dict()), lambda e, a, b: (
        f"{a} and {b}: event seq {e.seq} of cluster {e.cluster} appears twice with different contents; a "
        "history holds one event per cluster and seq"))


def one_record_per_decision(imported: ImportResult) -> list[DecisionRecord]:
    """The imported records, one per decision (``_one_per_key``)."""
    return _one_per_key(imported.records, imported.locations, lambda r: r.decision_id, record_bytes, lambda r, a, b: (
        f"{a} and {b}: decision {r.decision_id} appears twice with different contents; a history holds one "
        "record per decision"))


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
        return _write_yaml(target, (json.loads(record_text(r)) for r in records))
    return _write_lines(target, (record_text(r) for r in records))


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


TORN_SUFFIX = ".torn"


def _end_last_line(path: Path) -> str:
    """Make ``path`` end with a newline before lines are appended to it, and say what was done.

    A producer killed while writing a line leaves it without its newline; the next line appended
    would run on from it and both would be lost. A last line that is a whole JSON object (a file
    written by hand without a final newline) only gets its newline. Anything else is a torn write:
    it is moved, as it was, to ``<path>.torn`` (appended to, never overwritten) and cut from the
    file, so that what the file holds reads back whole. "" when the file needed nothing."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return ""
    if size == 0:
        return ""
    with open(path, "rb+") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return ""
        start = size
        while start > 0:  # back to the last newline, a block at a time
            step = min(65536, start)
            fh.seek(start - step)
            block = fh.read(step)
            cut = block.rfind(b"\n")
            if cut >= 0:
                start = start - step + cut + 1
                break
            start -= step
        fh.seek(start)
        tail = fh.read()
        try:
            whole = isinstance(json.loads(tail), dict)
        except ValueError:
            whole = False
        if whole:
            fh.write(b"\n")
            fh.flush()
            os.fsync(fh.fileno())
            return ""
        torn = path.with_name(path.name + TORN_SUFFIX)
        with open(torn, "ab") as out:
            out.write(tail + b"\n")
            out.flush()
            os.fsync(out.fileno())
        fh.truncate(start)
        fh.flush()
        os.fsync(fh.fileno())
    return (f"{path}: its last line ({len(tail)} bytes from byte {start}) was cut short by a write that did not "
            f"finish; moved to {torn}")


class JsonlAppender:
    """Appends canonical JSON lines to a file; ``flush`` makes them durable (fsync). A last line
    an earlier writer left unfinished is moved aside first (``_end_last_line``; ``repaired`` says
    so)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        # a directory that is not there is likelier a typo than a place to make
        if not self.path.parent.exists():
            raise FileFormatError(f"{self.path}: cannot open for writing: directory {self.path.parent} does not exist")
        try:
            self.repaired = _end_last_line(self.path)
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
