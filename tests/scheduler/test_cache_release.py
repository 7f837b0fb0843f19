"""The engine's per-object caches let go of claims and pods that left the world.

Binding replaces a pending claim object by its allocated one, and a finished pod's claims are
deleted; the memos keyed by object (parsed claims, claims with tiers applied, tiers per claim, a
pending pod's first choice) must not keep the old objects alive for the rest of a simulated day.
Each run below places thousands of pods and finishes about a thousand, so a cache that kept what
left the world would hold a thousand objects or more the world no longer has.
"""

from __future__ import annotations

import pytest

from audit.scheduler import nodealloc
from ingest.simulate.loop import SimulationResult
from tests.scheduler.busysmall import busy_small


def _run(variant: str) -> SimulationResult:
    if variant == "adaptive fallback":
        return busy_small((("reserveAfter", "2m"),), (("mode", "adaptive"), ("maxWait", "10m")))
    return busy_small()


@pytest.mark.parametrize(("variant", "finished"), [("default policy", 1161), ("adaptive fallback", 1004)])
def test_caches_hold_only_claims_and_pods_still_in_the_world(variant: str, finished: int) -> None:
    res = _run(variant)
    world = res.world
    live_claims = {id(c) for c in world.objects.get("ResourceClaim", {}).values()}
    live_pods = set(world.objects.get("Pod", {}))
    assert res.finished == finished  # about a thousand pods were bound and left: the caches had something to drop
    cache = world.derived[nodealloc.CACHE_KEY]
    assert cache.augmented, "the run augmented claims that are still pending"
    assert all(id(claim) in live_claims for claim, _ in cache.augmented.values())
    parsed_claims = [p for p, _ in cache.parsed.values() if p.get("kind") == "ResourceClaim"]
    augmented = {id(a) for _, per in cache.augmented.values() for a in per.values()}
    assert all(id(p) in live_claims or id(p) in augmented for p in parsed_claims)
    tiers = world.derived["model_matcher"]._tiers
    assert tiers and all(id(claim) in live_claims for claim, _, _ in tiers.values())
    first_choice = world.derived.get("first_choice", {})
    assert all(key in live_pods for key in first_choice)
    if variant == "adaptive fallback":
        assert first_choice
