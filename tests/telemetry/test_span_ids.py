"""A decision's ids: one digest of the decision id gives the trace id and every span id, the same
each time, distinct within the trace and never zero."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.telemetry.ids import (
    FIRST_TIER,
    STEP,
    WAIT,
    _span,
    decision_id_bytes,
    decision_span_ids,
    root_span_id_for,
    span_id_bytes,
    tier_span_id_for,
    trace_id_for,
    wait_span_id_for,
)

MASK = (1 << 64) - 1


@settings(max_examples=200, deadline=None)
@given(decision_id=st.text(max_size=40), tiers=st.integers(0, 40), salt=st.text(max_size=8))
def test_all_ids_at_once_equal_each_roles_own_and_are_distinct_and_non_zero(decision_id: str, tiers: int,
                                                                             salt: str) -> None:
    trace, root, wait, tier_ids = decision_span_ids(decision_id, tiers, salt)
    assert trace == trace_id_for(decision_id, salt) != 0
    assert root == root_span_id_for(decision_id, salt)
    assert wait == wait_span_id_for(decision_id, salt)
    assert tier_ids == [tier_span_id_for(decision_id, position, salt) for position in range(tiers)]
    spans = [root, wait, *tier_ids]
    assert 0 not in spans and len(set(spans)) == len(spans)
    assert decision_id_bytes(decision_id, tiers, salt) == (
        trace.to_bytes(16, "big"), tuple(span.to_bytes(8, "big") for span in spans))
    assert decision_span_ids(decision_id, tiers, salt) == (trace, root, wait, tier_ids)  # deterministic


@settings(max_examples=100, deadline=None)
@given(decision_id=st.text(max_size=40), salt=st.text(min_size=1, max_size=8))
def test_a_salt_gives_the_decision_other_ids(decision_id: str, salt: str) -> None:
    plain, salted = decision_span_ids(decision_id, 3), decision_span_ids(decision_id, 3, salt)
    assert plain[0] != salted[0] and set([plain[1], plain[2], *plain[3]]).isdisjoint([salted[1], salted[2], *salted[3]])


def test_ids_follow_the_documented_derivation() -> None:
    # docs/otlp.md: one sha256 over "claimtrail-ids\0", the decision id and the salt; the trace id
    # is its first 16 bytes, span position j (root 0, wait 1, tier i at 2 + i) base ^ (j * STEP)
    digest = hashlib.sha256(b"claimtrail-ids\x00bench/claim-1/1\x00salt\x00run-2").digest()
    base = int.from_bytes(digest[16:24], "big")
    trace, root, wait, tier_ids = decision_span_ids("bench/claim-1/1", 2, "run-2")
    assert trace == int.from_bytes(digest[:16], "big")
    assert (root, wait, tier_ids) == (base, base ^ STEP, [base ^ (2 * STEP) & MASK, base ^ (3 * STEP) & MASK])
    assert STEP % 2 == 1


@pytest.mark.parametrize("zero_at", [0, WAIT, FIRST_TIER, FIRST_TIER + 5, FIRST_TIER + 40])
def test_the_position_whose_id_would_be_zero_takes_an_id_no_other_span_has(zero_at: int) -> None:
    base = (zero_at * STEP) & MASK  # the base for which position zero_at comes out zero
    ids = [_span(base, position) for position in range(FIRST_TIER + 50)]
    assert ids[zero_at] == base ^ (1 << 63)
    assert 0 not in ids and len(set(ids)) == len(ids)
    # the form the encoder takes gives the same ids for such a base
    assert span_id_bytes(base, FIRST_TIER + 50) == tuple(i.to_bytes(8, "big") for i in ids)

