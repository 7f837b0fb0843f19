"""All of a decision's ids at once are the ids each role's own function derives."""

from __future__ import annotations

import hashlib

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.telemetry.ids import decision_span_ids, root_span_id_for, tier_span_id_for, trace_id_for


@settings(max_examples=200, deadline=None)
@given(decision_id=st.text(max_size=40), tiers=st.integers(0, 12), salt=st.text(max_size=8))
def test_decision_span_ids_equal_the_ids_of_each_role(decision_id: str, tiers: int, salt: str) -> None:
    trace, root, tier_ids = decision_span_ids(decision_id, tiers, salt)
    assert trace == trace_id_for(decision_id, salt)
    assert root == root_span_id_for(decision_id, salt)
    assert tier_ids == [tier_span_id_for(decision_id, position, salt) for position in range(tiers)]


def test_decision_span_ids_follow_the_documented_derivation() -> None:
    # docs/otlp.md: the first bytes of sha256 over the role's prefix and the decision id
    def first(text: bytes, size: int) -> int:
        return int.from_bytes(hashlib.sha256(text).digest()[:size], "big")

    trace, root, tier_ids = decision_span_ids("bench/claim-1/1", 2, "run-2")
    assert trace == first(b"claimtrail-trace\x00bench/claim-1/1\x00salt\x00run-2", 16)
    assert root == first(b"claimtrail-span\x00bench/claim-1/1\x00root\x00salt\x00run-2", 8)
    assert tier_ids == [first(b"claimtrail-span\x00bench/claim-1/1\x00tier/%d\x00salt\x00run-2" % i, 8) for i in (0, 1)]
