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
    needs them all (a fresh hash of each input is cheaper than copying a shared hash state)."""
    suffix = ("\x00salt\x00" + salt).encode() if salt else b""
    did = decision_id.encode()
    sha256 = hashlib.sha256
    trace = int.from_bytes(sha256(b"claimtrail-trace\x00" + did + suffix).digest()[:16], "big") or 1
    span = b"claimtrail-span\x00" + did
    root = int.from_bytes(sha256(span + b"\x00root" + suffix).digest()[:8], "big") or 1
    tier_ids = [int.from_bytes(sha256(b"%b\x00tier/%d%b" % (span, position, suffix)).digest()[:8], "big") or 1
                for position in range(tiers)]
    return trace, root, tier_ids
