"""A decision's input digest is the digest of its input document, whatever the claim-entry memo holds.

``new_record`` writes the input document by hand around each claim's entry, which it encodes once
per claim object. The digest must equal ``digest(input_document(...))`` for every attempt: on a
retry with the same objects, after the claim is replaced by an event, and when a memo holds an
entry under the claim's or its spec's ``id()`` for another object (ids of freed objects are reused).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from audit.canonical import canonical_json, digest
from audit.records import Outcome
from audit.scheduler.attempt import (
    _CLAIM_ENTRIES,
    _SPEC_BYTES,
    AttemptContext,
    forget_claim_entries,
    input_document,
    new_record,
)
from audit.scheduler.tiers import resolve_claims
from tests.scheduler.worlds import cluster, submit


def _claims(sim: Any, key: str) -> list[dict[str, Any]]:
    ns, name = key.split("/", 1)
    return resolve_claims(sim.world, sim.world.get("Pod", ns, name)).claims


def _digests(sim: Any, key: str, attempt: int) -> tuple[str, str]:
    """(the record's input digest, the generic digest of the same document)."""
    ctx = AttemptContext(sim.world, key, attempt, sim.now, sim.world.policy)
    claims = _claims(sim, key)
    return new_record(ctx, claims, [], Outcome.ALLOCATED).input_digest, digest(input_document(ctx, claims))


def _same_objects(sim: Any, key: str) -> None:
    """Nothing changes: the memo's entry is used as it is."""


def _claim_replaced(sim: Any, key: str) -> None:
    ns, name = key.split("/", 1)
    claim = copy.deepcopy(sim.world.get("ResourceClaim", ns, f"{name}-gpu"))
    claim["spec"]["devices"]["requests"][0]["firstAvailable"][0]["count"] = 2
    sim.emit("ResourceClaim", ns, f"{name}-gpu", claim)


def _id_reused_by_another_claim(sim: Any, key: str) -> None:
    """The memo holds, under the claim's id, the entry of a different object with another spec."""
    claim = _claims(sim, key)[0]
    other = copy.deepcopy(claim)
    other["spec"] = {"devices": {"requests": []}}
    sim.world.derived[_CLAIM_ENTRIES][id(claim)] = (other, canonical_json(
        {"name": other["metadata"]["name"], "uid": other["metadata"].get("uid", ""), "spec": other["spec"]}))


def _forgotten(sim: Any, key: str) -> None:
    forget_claim_entries(sim.world, _claims(sim, key))


def _spec_id_reused_by_another_spec(sim: Any, key: str) -> None:
    """The claim's entry is gone, and the spec memo holds, under its spec's id, the bytes of a
    different spec object."""
    claim = _claims(sim, key)[0]
    forget_claim_entries(sim.world, [claim])
    other = {"devices": {"requests": []}}
    sim.world.derived[_SPEC_BYTES][id(claim["spec"])] = (other, canonical_json(other))


def _claim_with_a_new_spec_object(sim: Any, key: str) -> None:
    """The claim is replaced by one with an equal spec in a new object, and that spec's id holds
    the memo entry of the old one (as when the old object was freed and its id handed on)."""
    ns, name = key.split("/", 1)
    old = sim.world.get("ResourceClaim", ns, f"{name}-gpu")
    claim = copy.deepcopy(old)
    claim["spec"]["devices"]["requests"][0]["firstAvailable"][0]["count"] = 3
    sim.world.derived[_SPEC_BYTES][id(claim["spec"])] = (old["spec"], canonical_json(old["spec"]))
    sim.emit("ResourceClaim", ns, f"{name}-gpu", claim)


@pytest.mark.parametrize("change", [_same_objects, _claim_replaced, _id_reused_by_another_claim, _forgotten,
                                    _spec_id_reused_by_another_spec, _claim_with_a_new_spec_object],
                         ids=["retry-same-objects", "claim-replaced", "id-reused-by-another-claim", "forgotten",
                              "spec-id-reused-by-another-spec", "claim-with-a-new-spec-object"])
def test_input_digest_equals_the_digest_of_the_input_document(change: Any) -> None:
    sim = cluster()
    key = submit(sim, "job-1", size=1)
    first, expected_first = _digests(sim, key, 1)
    assert first == expected_first
    change(sim, key)
    second, expected_second = _digests(sim, key, 2)
    assert second == expected_second


def test_the_claim_spec_is_part_of_the_input_digest() -> None:
    sim = cluster()
    key = submit(sim, "job-1", size=1)
    before, _ = _digests(sim, key, 1)
    _claim_replaced(sim, key)
    after, _ = _digests(sim, key, 1)
    assert before != after


def test_forgetting_a_claim_drops_its_entry_only() -> None:
    sim = cluster()
    kept, dropped = submit(sim, "job-1", size=1), submit(sim, "job-2", size=1)
    _digests(sim, kept, 1)
    _digests(sim, dropped, 1)
    memo = sim.world.derived[_CLAIM_ENTRIES]
    forget_claim_entries(sim.world, _claims(sim, dropped))
    assert [c["metadata"]["name"] for c, _ in memo.values()] == ["job-1-gpu"]
