"""Folding an event extends the chain digest by its event digest, or by the digest a caller gives."""

from __future__ import annotations

import pytest

from audit.events import WorldEvent
from audit.world import GENESIS, World, chain, event_digest

NODE = WorldEvent("c", 0, "2026-11-01T00:00:00Z", "upsert", "Node", "", "n1", {"metadata": {"name": "n1"}})
GIVEN = "ab" * 32


@pytest.mark.parametrize("digest, expected", [
    (None, chain(GENESIS, event_digest(NODE))),
    (GIVEN, chain(GENESIS, GIVEN)),
], ids=["content-digested", "digest-given"])
def test_a_folded_event_extends_the_chain_by_its_digest(digest, expected):
    world = World("c")
    world.apply(NODE, digest)
    assert world.chain_digest == expected
    assert (world.seq, world.objects["Node"]["n1"]) == (0, NODE.payload)


def test_the_content_digest_is_the_digest_of_the_events_canonical_form():
    assert event_digest(NODE) == NODE.digest()
