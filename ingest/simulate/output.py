"""Where a simulation's records and events go: ``ingest.sinks`` when present, JSONL files otherwise.

``open_output(target)`` prefers the shared sink factory (``ingest.sinks.open_sink``: a ``.jsonl``
path, an ``http(s)://`` API server or a ``chdb://`` DSN). Until that module exists a ``.jsonl``
target is written here, one canonical JSON object per line, with the same three methods.
"""

from __future__ import annotations

from typing import Any, Protocol

from audit.canonical import json_lines
from audit.events import WorldEvent
from audit.records import DecisionRecord


class Output(Protocol):
    def write_events(self, events: list[WorldEvent]) -> None: ...
    def write_records(self, records: list[DecisionRecord]) -> None: ...
    def close(self) -> None: ...


class OutputError(ValueError):
    """The target cannot be opened; the message names it."""


class JsonlOutput:
    def __init__(self, path: str) -> None:
        try:
            self._fh = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed by close()
        except OSError as exc:
            raise OutputError(f"{path}: cannot open for writing: {exc.strerror}") from None

    def _write(self, items: list[dict[str, Any]]) -> None:
        self._fh.write(json_lines(items))

    def write_events(self, events: list[WorldEvent]) -> None:
        self._write([e.to_dict() for e in events])

    def write_records(self, records: list[DecisionRecord]) -> None:
        self._write([r.to_dict() for r in records])

    def close(self) -> None:
        self._fh.close()


def open_output(target: str, events_path: str | None = None) -> tuple[Output, bool]:
    """The output and whether it also stores the event log (a store, or a JSONL file sink)."""
    try:
        from ingest.sinks import open_sink  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        if target.endswith(".jsonl"):
            return JsonlOutput(target), False
        raise OutputError(f"{target}: only .jsonl targets are supported in this build") from None
    try:
        if target.endswith(".jsonl"):
            sink: Output = open_sink(target, events_path=events_path)
        else:
            sink = open_sink(target)
    except ValueError as exc:
        raise OutputError(str(exc)) from None
    return sink, True


def jsonl_output(path: str) -> Output:
    return JsonlOutput(path)
