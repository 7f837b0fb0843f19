"""Reading Kubernetes objects from files: YAML (single or multi-document), JSON and ``kind: List``.

Every object comes back with a source label (``cluster.yaml#3`` = the third document of the
file, ``cluster.yaml#2.items[4]`` for an item of a List) so that later error messages can point
at it. Objects are returned in file order and never merged, even when two share a name;
``repeated`` names those, and the caller decides what they mean.
"""

from __future__ import annotations

import json
import os
from typing import Any

import yaml

from audit.dra.model import object_label


class LoadError(ValueError):
    """Input that cannot be read as Kubernetes objects; the message names file and document."""


# libyaml's parser builds the same documents as PyYAML's pure-Python one (same constructor and
# resolver) several times faster, which is most of a small command's run time. Input it refuses
# is read again by the pure-Python parser, whose messages are the ones users see either way.
_FAST_LOADER = getattr(yaml, "CSafeLoader", None)


def _yaml_documents(text: str) -> list[Any]:
    if _FAST_LOADER is not None:
        try:
            return list(yaml.load_all(text, Loader=_FAST_LOADER))
        except yaml.YAMLError:
            pass  # raised again below, with the pure-Python parser's message
    return list(yaml.safe_load_all(text))


def _flatten(raw: Any, label: str) -> list[tuple[str, dict[str, Any]]]:
    if raw is None:
        return []
    if not isinstance(raw, dict):
        raise LoadError(f"{label}: expected a Kubernetes object (a mapping), got {type(raw).__name__}")
    kind = raw.get("kind")
    if kind is not None and not isinstance(kind, str):  # no kind is a text of another type
        raise LoadError(f"{label}: kind: expected a string, got {type(kind).__name__}")
    if isinstance(kind, str) and kind.endswith("List") and "items" in raw:
        items = raw.get("items")
        if items is None:
            return []
        if not isinstance(items, list):
            raise LoadError(f"{label}: items: expected a list, got {type(items).__name__}")
        out: list[tuple[str, dict[str, Any]]] = []
        for i, item in enumerate(items):
            out.extend(_flatten(item, f"{label}.items[{i}]"))
        return out
    return [(label, raw)]


def load_text(text: str, source: str) -> list[tuple[str, dict[str, Any]]]:
    """Parse ``text`` (JSON or YAML, possibly several documents) into labelled raw objects."""
    stripped = text.lstrip()
    if stripped.startswith("{") or stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            # JSON is also YAML; only fall through when YAML can read what JSON could not.
            try:
                docs = _yaml_documents(text)
            except yaml.YAMLError:
                raise LoadError(f"{source}: invalid JSON: {exc}") from None
        else:
            docs = data if isinstance(data, list) else [data]
            if isinstance(data, list):
                out: list[tuple[str, dict[str, Any]]] = []
                for i, doc in enumerate(data):
                    out.extend(_flatten(doc, f"{source}[{i}]"))
                return out
    else:
        try:
            docs = _yaml_documents(text)
        except yaml.YAMLError as exc:
            raise LoadError(f"{source}: invalid YAML: {yaml_problem(exc)}") from None
    result: list[tuple[str, dict[str, Any]]] = []
    for index, doc in enumerate(docs, start=1):
        result.extend(_flatten(doc, f"{source}#{index}"))
    return result


def yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's error as one line, with the line and column a user can jump to (its marks are 0-based)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is not None:
        return f"{problem} (line {mark.line + 1}, column {mark.column + 1})"
    return str(problem)


def load_documents(path: str) -> list[tuple[str, dict[str, Any]]]:
    """Read one file; raises LoadError when it is missing, unreadable or not Kubernetes objects."""
    return load_text(read_text(path), os.path.basename(path) or path)


def read_text(path: str) -> str:
    """A file's text, for every command reading YAML or JSON a user names; LoadError names the file."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except OSError as exc:
        raise LoadError(f"{path}: cannot read file: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise LoadError(f"{path}: not UTF-8 text") from None


def repeated(objects: list[tuple[str, dict[str, Any]]]) -> list[tuple[int, int, str]]:
    """Objects that an earlier one of ``objects`` (source label, raw object) already defines — the
    same kind, namespace and name: (index of the later one, index of the one it follows, its label
    as ``Kind ns/name``). The commands that read a cluster take the later definition, as
    ``kubectl apply`` of the files in turn would leave it, and say so."""
    last: dict[tuple[str, str, str], int] = {}
    out: list[tuple[int, int, str]] = []
    for i, (_source, obj) in enumerate(objects):
        meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            continue
        key = (str(obj.get("kind")), str(meta.get("namespace") or ""), name)
        if key in last:
            out.append((i, last[key], object_label(obj)))
        last[key] = i
    return out
