"""Trace and span ids derived from the decision id, so re-exporting a decision gives the same trace.

A decision id is already deterministic (cluster, claim uid, attempt); hashing it gives a 128-bit
trace id and 64-bit span ids per role (root, the tier at position i). Explorers then link the same decision
across re-sends, and tests can predict every id. The SDK asks an ``IdGenerator`` for ids, so a
generator that hands out ids queued by the exporter makes SDK-built spans carry ours.
"""

from __future__ import annotations

import hashlib
import threading

from opentelemetry.sdk.trace.id_generator import IdGenerator, RandomIdGenerator


def _hash_int(*parts: str, bits: int) -> int:
    h = hashlib.sha256("\x00".join(parts).encode()).digest()
    value = int.from_bytes(h[: bits // 8], "big")
    # all-zero ids are invalid in OTLP; the chance is negligible but the rule is absolute
    return value or 1


def trace_id_for(decision_id: str) -> int:
    return _hash_int("claimtrail-trace", decision_id, bits=128)


def root_span_id_for(decision_id: str) -> int:
    return _hash_int("claimtrail-span", decision_id, "root", bits=64)


def tier_span_id_for(decision_id: str, position: int) -> int:
    """Span id of the tier at ``position`` in ``record.tiers`` (tier indexes repeat across requests)."""
    return _hash_int("claimtrail-span", decision_id, f"tier/{position}", bits=64)


class QueuedIdGenerator(IdGenerator):
    """Hands out ids queued for the current thread; anything unqueued gets a random id.

    The fallback keeps spans that other code creates on the same provider valid (the SDK would
    otherwise fail), while decisions always carry their derived ids.
    """

    def __init__(self) -> None:
        self._local = threading.local()
        self._random = RandomIdGenerator()

    def queue(self, trace_id: int | None, span_id: int) -> None:
        self._local.trace_id = trace_id
        self._local.span_id = span_id

    def generate_trace_id(self) -> int:
        value = getattr(self._local, "trace_id", None)
        self._local.trace_id = None
        return value if value is not None else self._random.generate_trace_id()

    def generate_span_id(self) -> int:
        value = getattr(self._local, "span_id", None)
        self._local.span_id = None
        return value if value is not None else self._random.generate_span_id()
