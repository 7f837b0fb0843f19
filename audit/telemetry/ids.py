"""Trace and span ids derived from the decision id, so re-exporting a decision gives the same trace.

A decision id is already deterministic (cluster, claim uid, attempt); hashing it gives a 128-bit
trace id and 64-bit span ids per role (root, the tier at position i). Explorers then link the same decision
across re-sends, and tests can predict every id. Spans are built with these ids directly (see
``audit.telemetry.spans``), so no SDK id generator is involved.
"""

from __future__ import annotations

import hashlib


def _hash_int(*parts: str, bits: int, salt: str = "") -> int:
    # a salt (CLAIMTRAIL_OTEL_ID_SALT) gives the same decisions new ids, for backends that drop a
    # trace id they have seen; without one the ids are exactly the unsalted ones
    text = "\x00".join(parts) if not salt else "\x00".join((*parts, "salt", salt))
    h = hashlib.sha256(text.encode()).digest()
    value = int.from_bytes(h[: bits // 8], "big")
    # all-zero ids are invalid in OTLP; the chance is negligible but the rule is absolute
    return value or 1


def trace_id_for(decision_id: str, salt: str = "") -> int:
    return _hash_int("claimtrail-trace", decision_id, bits=128, salt=salt)


def root_span_id_for(decision_id: str, salt: str = "") -> int:
    return _hash_int("claimtrail-span", decision_id, "root", bits=64, salt=salt)


def tier_span_id_for(decision_id: str, position: int, salt: str = "") -> int:
    """Span id of the tier at ``position`` in ``record.tiers`` (tier indexes repeat across requests)."""
    return _hash_int("claimtrail-span", decision_id, f"tier/{position}", bits=64, salt=salt)


def wait_span_id_for(decision_id: str, salt: str = "") -> int:
    return _hash_int("claimtrail-span", decision_id, "wait", bits=64, salt=salt)


def decision_span_ids(decision_id: str, tiers: int, salt: str = "") -> tuple[int, int, list[int]]:
    """The trace id, the root span id and the ids of ``tiers`` tier spans (positions 0 onwards):
    the values of the functions above, with the id encoded once, since every exported decision
    needs them all."""
    trace, root, tier_ids = decision_id_bytes(decision_id, tiers, salt)
    return (int.from_bytes(trace, "big"), int.from_bytes(root, "big"),
            [int.from_bytes(tier, "big") for tier in tier_ids])


_ZERO8, _ONE8 = bytes(8), (1).to_bytes(8, "big")
# what follows a tier span's hash input after the decision id, by position, per salt
_TIER_ROLES: dict[bytes, list[bytes]] = {}
_ZERO16, _ONE16 = bytes(16), (1).to_bytes(16, "big")


def decision_id_bytes(decision_id: str, tiers: int, salt: str = "") -> tuple[bytes, bytes, list[bytes]]:
    """``decision_span_ids`` as the big-endian bytes OTLP carries (16 for the trace, 8 per span),
    the form the direct encoder writes without a round trip through ``int`` (a fresh hash of
    each input is cheaper than copying a shared hash state)."""
    suffix = ("\x00salt\x00" + salt).encode() if salt else b""
    did = decision_id.encode()
    sha256 = hashlib.sha256
    trace = sha256(b"claimtrail-trace\x00" + did + suffix).digest()[:16]
    span = b"claimtrail-span\x00" + did
    root = sha256(span + b"\x00root" + suffix).digest()[:8]
    roles = _TIER_ROLES.get(suffix)
    if roles is None or len(roles) < tiers:
        if len(_TIER_ROLES) >= 64:
            _TIER_ROLES.clear()
        roles = _TIER_ROLES[suffix] = [b"\x00tier/%d%b" % (position, suffix) for position in range(max(tiers, 8))]
    tier_ids = [sha256(span + roles[position]).digest()[:8] for position in range(tiers)]
    # all-zero ids are invalid in OTLP (see _hash_int)
    if trace == _ZERO16:
        trace = _ONE16
    if root == _ZERO8:
        root = _ONE8
    if _ZERO8 in tier_ids:
        tier_ids = [_ONE8 if tier == _ZERO8 else tier for tier in tier_ids]
    return trace, root, tier_ids
