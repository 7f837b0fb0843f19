"""One allocation attempt: its context, the decision it yields and the record skeleton.

``AttemptContext`` gathers what an attempt derives from its inputs (the pod, its tenant and wait
under the policy, the time). ``new_record`` fills every record field that is known before the
search (identity, tenant, preference, policy version and digest, the input digest over the world
chain digest, seq, pod, claim specs, policy, attempt and time). ``Decision`` carries the sealed
record and, when a node was found, the ``Proposal`` the bind step re-checks.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from audit.allocator.outcome import ClaimAllocation
from audit.canonical import canonical_json, digest, encode_string
from audit.events import WorldEvent
from audit.policy import Policy
from audit.records import DecisionRecord, Outcome, Track, decision_id
from audit.scheduler.tiers import RequestTiers, SignatureModelMatcher, template_version
from audit.timestamps import format_time_ms, parse_time_ms
from audit.world import World

# The version every record names, part of its output digest. Bump it whenever the engine decides
# any recorded situation differently, so that replay says a record was decided by another engine
# (``engine_changed``) instead of calling the difference nondeterminism. /2: the retry budget counts
# bind failures only (records say "bind failure k of N") and queueing is best-effort FIFO per
# tenant by default. /3: adaptive fallback also waits for the tenant's own releases to reopen a
# first choice its quota closes. /4: adaptive fallback holds while the first choice is expected
# within maxWait from now (the wait so far no longer shortens the hold), and the tenant's
# device-plugin pods pinned to the model ahead of the pod take its reopening quota first.
ENGINE_VERSION = "claimtrail-engine/4"


@dataclass
class Proposal:
    node: str
    claim_keys: list[str]
    allocations: list[ClaimAllocation]
    device_ids: list[str]
    generations: dict[str, tuple[str, int]]
    tier: int
    dp_gpus: int = 0


@dataclass
class Decision:
    pod_key: str
    attempt: int
    record: DecisionRecord
    proposal: Proposal | None = None
    events: list[WorldEvent] = field(default_factory=list)
    satisfiable: bool = True
    reservation: dict[str, Any] | None = None  # a Reservation object the decision made (to write)
    preempts: list[str] = field(default_factory=list)  # pods a ``preempted`` decision evicts (to evict)

    @property
    def retry_class(self) -> str:
        return self.record.retry_class


class AttemptContext:
    """Everything one attempt derives from its inputs (kept together so helpers stay small)."""

    def __init__(self, world: World, pod_key: str, attempt: int, time_ms: int, policy: Policy) -> None:
        self.world, self.pod_key, self.attempt, self.time_ms, self.policy = world, pod_key, attempt, time_ms, policy
        ns, _, name = pod_key.partition("/")
        pod = world.get("Pod", ns, name)
        if pod is None:
            raise KeyError(f"Pod {pod_key}: not in the world at seq {world.seq}")
        self.pod = pod
        self.namespace, self.name = ns, name
        self.uid = str(pod["metadata"].get("uid", ""))
        self.tenant = policy.tenant_for(ns)
        created = world.pending.get(pod_key)
        if created is None:
            created = parse_time_ms(pod["metadata"].get("creationTimestamp") or world.time or format_time_ms(time_ms))
        self.wait_ms = max(0, time_ms - created)
        self.time = format_time_ms(time_ms)


def model_matcher(world: World) -> SignatureModelMatcher:
    """The world's matcher, kept on the world so it is freed with it (a module-level cache kept
    dozens of replayed worlds alive and made full garbage collections slow)."""
    matcher: SignatureModelMatcher | None = world.derived.get("model_matcher")
    if matcher is None:
        matcher = world.derived["model_matcher"] = SignatureModelMatcher(world)
    return matcher


def new_record(ctx: AttemptContext, claims: list[dict[str, Any]], rts: list[RequestTiers], outcome: Outcome,
            track: Track = Track.DRA) -> DecisionRecord:
    claim_uids = [str(c["metadata"].get("uid", "")) for c in claims]
    primary = rts[0].tiers if rts else ()
    preference = [t.label for t in primary]
    input_digest = _input_digest(ctx, claims)
    return DecisionRecord(
        decision_id=decision_id(ctx.world.cluster, claim_uids[0] if claim_uids else ctx.uid, ctx.attempt),
        cluster=ctx.world.cluster, seq=ctx.world.seq, time=ctx.time, attempt=ctx.attempt, tenant=ctx.tenant,
        namespace=ctx.namespace, pod=ctx.name, pod_uid=ctx.uid, claims=[c["metadata"]["name"] for c in claims],
        claim_uids=claim_uids, preference=preference, policy_version=ctx.policy.version,
        policy_digest=ctx.policy.digest, outcome=outcome.value, preferred_model=preference[0] if preference else "",
        wait_ms=ctx.wait_ms, track=track.value, template_version=template_version(claims),
        engine_version=ENGINE_VERSION, input_digest=input_digest,
    )


# world.derived key: id(claim) -> (claim, the canonical bytes of its entry in an input digest)
_CLAIM_ENTRIES = "input_claim_entries"
_MAX_CLAIM_ENTRIES = 50_000


def input_document(ctx: AttemptContext, claims: list[dict[str, Any]]) -> dict[str, Any]:
    """What a decision's input digest is the digest of: the world it read (chain digest and seq),
    the pod, its claims with their specs, the policy, the attempt and the time."""
    return {
        "world": ctx.world.chain_digest, "seq": ctx.world.seq,
        "pod": {"key": ctx.pod_key, "uid": ctx.uid},
        "claims": [_claim_entry(c) for c in claims],
        "policy": ctx.policy.digest, "attempt": ctx.attempt, "time": ctx.time,
    }


def _claim_entry(c: dict[str, Any]) -> dict[str, Any]:
    return {"name": c["metadata"]["name"], "uid": c["metadata"].get("uid", ""), "spec": c.get("spec")}


def _input_digest(ctx: AttemptContext, claims: list[dict[str, Any]]) -> str:
    """``digest(input_document(ctx, claims))``, with each claim's entry encoded once per claim
    object rather than on every attempt: the spec is most of the document, and a pending pod's
    claim is the same object on every retry (objects are replaced, never changed, by events).

    The document's members are written in the canonical order (sorted keys: attempt, claims,
    pod, policy, seq, time, world) with the canonical separators; anything the hand-written part
    does not know to write as canonical JSON takes the generic path."""
    world = ctx.world
    attempt, seq = ctx.attempt, world.seq
    texts = (world.chain_digest, ctx.pod_key, ctx.uid, ctx.policy.digest, ctx.time)
    if type(attempt) is not int or type(seq) is not int or any(type(t) is not str for t in texts):
        return digest(input_document(ctx, claims))
    memo: dict[int, tuple[dict[str, Any], bytes]] | None = world.derived.get(_CLAIM_ENTRIES)
    if memo is None or len(memo) > _MAX_CLAIM_ENTRIES:
        memo = world.derived[_CLAIM_ENTRIES] = {}
    entries = []
    for c in claims:
        hit = memo.get(id(c))
        if hit is None or hit[0] is not c:
            # the claim object itself is kept and compared: an id() of a freed claim can be reused
            hit = memo[id(c)] = (c, _entry_bytes(world, c))
        entries.append(hit[1])
    head = f'{{"attempt":{attempt},"claims":['.encode()
    tail = (f'],"pod":{{"key":{encode_string(ctx.pod_key)},"uid":{encode_string(ctx.uid)}}},'
            f'"policy":{encode_string(ctx.policy.digest)},"seq":{seq},"time":{encode_string(ctx.time)},'
            f'"world":{encode_string(world.chain_digest)}}}').encode()
    return hashlib.sha256(head + b",".join(entries) + tail).hexdigest()


# world.derived key: id(claim spec) -> (spec, its canonical bytes). Claims made from one template
# for one size share their spec object (the simulator builds each once), so a new claim's entry
# costs its name and uid alone; past this many specs (claims read back from a log each have their
# own) the memo starts over.
_SPEC_BYTES = "input_spec_bytes"
_MAX_SPEC_BYTES = 1024


def _entry_bytes(world: World, c: dict[str, Any]) -> bytes:
    """``canonical_json(_claim_entry(c))``, its spec's bytes kept per spec object (the members in
    canonical order: name, spec, uid)."""
    meta = c["metadata"]
    name, uid, spec = meta["name"], meta.get("uid", ""), c.get("spec")
    if type(name) is not str or type(uid) is not str or type(spec) is not dict:
        return canonical_json(_claim_entry(c))
    memo: dict[int, tuple[dict[str, Any], bytes]] | None = world.derived.get(_SPEC_BYTES)
    if memo is None or len(memo) >= _MAX_SPEC_BYTES:
        memo = world.derived[_SPEC_BYTES] = {}
    hit = memo.get(id(spec))
    if hit is None or hit[0] is not spec:
        # the spec itself is kept and compared: an id() of a freed spec can be handed to another
        hit = memo[id(spec)] = (spec, canonical_json(spec))
    return f'{{"name":{encode_string(name)},"spec":'.encode() + hit[1] + f',"uid":{encode_string(uid)}}}'.encode()


def forget_claim_entries(world: World, claims: list[dict[str, Any]]) -> None:
    """Drop the input-digest entries kept for claim objects that left the world (never changes a
    digest: a dropped entry is encoded again if the object comes back)."""
    memo: dict[int, tuple[dict[str, Any], bytes]] | None = world.derived.get(_CLAIM_ENTRIES)
    if not memo:
        return
    for c in claims:
        hit = memo.get(id(c))
        if hit is not None and hit[0] is c:
            del memo[id(c)]


def still_satisfiable(world: World, rts: list[RequestTiers]) -> bool:
    """Could the claims be met on an empty cluster as it is now (devices exist on a live node)?"""
    for rt in rts:
        if not any(
            any(sum(world.node_model.get(n, {}).get(m, [0, 0])[0] for m in t.models) >= t.count for n in world.nodes)
            for t in rt.tiers
        ):
            return False
    return True
