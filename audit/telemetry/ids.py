"""Trace and span ids derived from the decision id, so re-exporting a decision gives the same trace.

A decision id is already deterministic (cluster, claim uid, attempt); one SHA-256 of it gives
everything a decision's trace needs: the 128-bit trace id (the digest's first 16 bytes) and a
64-bit base from which every span id follows by position, root 0, wait 1, the tier at position
i 2 + i: ``(base + position * STEP) mod 2**64``. STEP is odd, so distinct positions give
distinct span ids; a span id that comes out zero (invalid in OTLP) takes the value of position
2**63 instead, which no other span of the trace has and which cannot be zero too. One digest
instead of one per span: each call into the hash costs far more than the few bytes it hashes.
Explorers then link the same decision across re-sends, and tests can predict every id. Spans are
built with these ids directly (see ``audit.telemetry.spans``), so no SDK id generator is involved.
"""

from __future__ import annotations

import hashlib

ROOT, WAIT, FIRST_TIER = 0, 1, 2  # span positions
# odd, so position -> position * STEP is a bijection modulo 2**64 (2**64 / golden ratio: the
# positions' ids spread over the whole range)
STEP = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
_HIGH = 1 << 63  # (position 2**63) * STEP is 2**63 modulo 2**64, STEP being odd
_PREFIX = b"claimtrail-ids\x00"
_ZERO16, _ONE16, _ZERO8 = bytes(16), (1).to_bytes(16, "big"), bytes(8)
# position * STEP modulo 2**64 for the first tier positions, computed once
_OFFSETS = [(position * STEP) & _MASK for position in range(FIRST_TIER + 16)]


def _digest(decision_id: str, salt: str) -> bytes:
    # a salt (CLAIMTRAIL_OTEL_ID_SALT) gives the same decisions new ids, for backends that drop a
    # trace id they have seen; without one the ids are exactly the unsalted ones
    text = _PREFIX + decision_id.encode()
    return hashlib.sha256(text + b"\x00salt\x00" + salt.encode() if salt else text).digest()


def _span(base: int, position: int) -> int:
    offset = _OFFSETS[position] if position < len(_OFFSETS) else (position * STEP) & _MASK
    # base + j * STEP is zero for exactly one j; that span takes position 2**63's id instead
    return (base + offset) & _MASK or (base + _HIGH) & _MASK


def _trace(digest: bytes) -> bytes:
    trace = digest[:16]
    return _ONE16 if trace == _ZERO16 else trace  # all-zero ids are invalid in OTLP


def trace_id_for(decision_id: str, salt: str = "") -> int:
    return int.from_bytes(_trace(_digest(decision_id, salt)), "big")


def root_span_id_for(decision_id: str, salt: str = "") -> int:
    return _span(int.from_bytes(_digest(decision_id, salt)[16:24], "big"), ROOT)


def tier_span_id_for(decision_id: str, position: int, salt: str = "") -> int:
    """Span id of the tier at ``position`` in ``record.tiers`` (tier indexes repeat across requests)."""
    return _span(int.from_bytes(_digest(decision_id, salt)[16:24], "big"), FIRST_TIER + position)


def wait_span_id_for(decision_id: str, salt: str = "") -> int:
    return _span(int.from_bytes(_digest(decision_id, salt)[16:24], "big"), WAIT)


def decision_span_ids(decision_id: str, tiers: int, salt: str = "") -> tuple[int, int, int, list[int]]:
    """The trace id, the root and wait span ids and the ids of ``tiers`` tier spans (positions 0
    onwards): the values of the functions above, from one digest."""
    digest = _digest(decision_id, salt)
    base = int.from_bytes(digest[16:24], "big")
    return (int.from_bytes(_trace(digest), "big"), _span(base, ROOT), _span(base, WAIT),
            [_span(base, FIRST_TIER + position) for position in range(tiers)])


def decision_id_bytes(decision_id: str, tiers: int, salt: str = "") -> tuple[bytes, bytes, bytes, list[bytes]]:
    """``decision_span_ids`` as the big-endian bytes OTLP carries (16 for the trace, 8 per span),
    the form the direct encoder writes (every exported decision goes through here, so the spans'
    usual case is written out rather than called per span)."""
    digest = _digest(decision_id, salt)
    base = int.from_bytes(digest[16:24], "big")
    end = FIRST_TIER + tiers
    offsets = _OFFSETS[:end] if end <= len(_OFFSETS) else [(position * STEP) & _MASK for position in range(end)]
    spans = [((base + offset) & _MASK).to_bytes(8, "big") for offset in offsets]
    if _ZERO8 in spans:  # the one position whose id would be zero, if it is among these
        spans = [_span(base, position).to_bytes(8, "big") for position in range(end)]
    return _trace(digest), spans[ROOT], spans[WAIT], spans[FIRST_TIER:]
