"""Parsed API objects remembered by content, so an unchanged object is parsed once per process.

Every explanation parses the slices, classes, taint rules, nodes and allocated claims the
allocator reads, and a cluster's objects mostly stay the same from one decision to the next.
The key is the object's ``repr``: for the dicts, lists, strings, numbers, booleans, None and
timestamps of an API object it tells apart every two objects that differ (``1`` from ``"1"``,
``True`` from ``1``). An object holding something whose repr is its address is not remembered,
since an address can be reused. Parsed objects are frozen, so sharing them cannot leak one view
into another. Parse errors are not remembered: they are raised again, naming the object and
field, each time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from audit.dra.model import KubeObject, parse_object


class ParseMemo:
    """A map from an object's content to its parsed form, emptied whenever it is full."""

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._parsed: dict[str, KubeObject] = {}

    def parse(self, raw: Mapping[str, Any]) -> KubeObject:
        key = repr(raw)
        found = self._parsed.get(key)
        if found is not None:
            return found
        parsed = parse_object(raw)
        if " at 0x" not in key:
            if len(self._parsed) >= self._capacity:
                self._parsed.clear()  # simpler than recency order, and safe with concurrent readers
            self._parsed[key] = parsed
        return parsed


# Enough for the slices, nodes and allocated claims of a few thousand nodes.
PARSED = ParseMemo(capacity=20_000)
