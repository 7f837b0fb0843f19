"""Trace and span ids derived from the decision id, so re-exporting a decision gives the same trace.

A decision id is already deterministic (cluster, claim uid, attempt); one SHA-256 of it gives
everything a decision's trace needs: the 128-bit trace id (the digest's first 16 bytes) and a
64-bit base from which every span id follows by its position, root 0, wait 1, the tier at
position i 2 + i: ``base XOR (position * STEP mod 2**64)``. STEP is odd, so distinct positions
give distinct masks and therefore distinct span ids; the one position whose id would be zero
(invalid in OTLP) takes the id of position 2**63 instead, ``base XOR 2**63``, which no other span
of the trace has and which is not zero. One digest instead of one per span: each call into the
hash costs far more than the few bytes it hashes, and XOR, unlike addition, carries nothing from
one id into the next, so all of a decision's span ids come out of one multiplication and one
``to_bytes``. Explorers then link the same decision across re-sends, and tests can predict every
id. Spans are built with these ids directly (see ``audit.telemetry.spans``), so no SDK id
generator is involved.
"""

from __future__ import annotations

import hashlib
import struct

ROOT, WAIT, FIRST_TIER = 0, 1, 2  # span positions
# odd, so position -> position * STEP is a bijection modulo 2**64 (2**64 / golden ratio: the
# masks spread over the whole range)
STEP = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
_HIGH = 1 << 63  # the mask of position 2**63: 2**63 * STEP is 2**63 modulo 2**64, STEP being odd
_PREFIX = b"claimtrail-ids\x00"
_ZERO16, _ONE16 = bytes(16), (1).to_bytes(16, "big")


def _mask(position: int) -> int:
    return (position * STEP) & _MASK


class _Spans:
    """For ``count`` span positions: the masks, the two big integers that lay the ids of all of
    them side by side (8 bytes each, position 0 first) from a base in two operations (``base *
    repeat`` is the base in every 8-byte place, ``^ masks`` applies each place's mask), and the
    unpacking that cuts them into one bytes object per position in one call."""

    __slots__ = ("masks", "repeat", "side_by_side", "split")

    def __init__(self, count: int) -> None:
        self.masks = frozenset(_mask(position) for position in range(count))
        self.repeat = sum(1 << (64 * place) for place in range(count))
        self.side_by_side = sum(_mask(position) << (64 * (count - 1 - position)) for position in range(count))
        self.split = struct.Struct("8s" * count).unpack


_BY_COUNT: dict[int, _Spans] = {}


def _spans(count: int) -> _Spans:
    spans = _BY_COUNT.get(count)
    if spans is None:
        if len(_BY_COUNT) >= 256:
            _BY_COUNT.clear()
        spans = _BY_COUNT[count] = _Spans(count)
    return spans


def _trace_and_base(decision_id: str, salt: str) -> tuple[bytes, int]:
    """The trace id (the digest's first 16 bytes) and the base of the span ids (the next 8)."""
    # a salt (CLAIMTRAIL_OTEL_ID_SALT) gives the same decisions new ids, for backends that drop a
    # trace id they have seen; without one the ids are exactly the unsalted ones
    text = _PREFIX + decision_id.encode()
    digest = hashlib.sha256(text + b"\x00salt\x00" + salt.encode() if salt else text).digest()
    trace = digest[:16]
    return _ONE16 if trace == _ZERO16 else trace, int.from_bytes(digest[16:24], "big")  # all-zero ids are invalid


def _span(base: int, position: int) -> int:
    # base ^ mask is zero for the one position whose mask equals the base
    return base ^ _mask(position) or base ^ _HIGH


def trace_id_for(decision_id: str, salt: str = "") -> int:
    return int.from_bytes(_trace_and_base(decision_id, salt)[0], "big")


def root_span_id_for(decision_id: str, salt: str = "") -> int:
    return _span(_trace_and_base(decision_id, salt)[1], ROOT)


def tier_span_id_for(decision_id: str, position: int, salt: str = "") -> int:
    """Span id of the tier at ``position`` in ``record.tiers`` (tier indexes repeat across requests)."""
    return _span(_trace_and_base(decision_id, salt)[1], FIRST_TIER + position)


def wait_span_id_for(decision_id: str, salt: str = "") -> int:
    return _span(_trace_and_base(decision_id, salt)[1], WAIT)


def decision_span_ids(decision_id: str, tiers: int, salt: str = "") -> tuple[int, int, int, list[int]]:
    """The trace id, the root and wait span ids and the ids of ``tiers`` tier spans (positions 0
    onwards): the values of the functions above, from one digest."""
    trace, base = _trace_and_base(decision_id, salt)
    return (int.from_bytes(trace, "big"), _span(base, ROOT), _span(base, WAIT),
            [_span(base, FIRST_TIER + position) for position in range(tiers)])


def decision_id_bytes(decision_id: str, tiers: int, salt: str = "") -> tuple[bytes, tuple[bytes, ...]]:
    """The trace id (16 bytes) and the span ids of the root, the wait and ``tiers`` tier spans,
    8 big-endian bytes each, by position (``ROOT``, ``WAIT``, ``FIRST_TIER`` + i): the form the
    direct encoder writes."""
    trace, base = _trace_and_base(decision_id, salt)
    return trace, span_id_bytes(base, FIRST_TIER + tiers)


def span_id_bytes(base: int, count: int) -> tuple[bytes, ...]:
    """The span ids of positions 0 to ``count`` - 1 from ``base``, 8 big-endian bytes each."""
    spans = _BY_COUNT.get(count)
    if spans is None:
        spans = _spans(count)
    if base in spans.masks:  # one position's id would be zero
        return tuple(_span(base, position).to_bytes(8, "big") for position in range(count))
    return spans.split((base * spans.repeat ^ spans.side_by_side).to_bytes(8 * count, "big"))
