"""A pod's preference structure: its claims, their requests and each request's tiers.

A tier is one ``firstAvailable`` subrequest (index = its position; 0 is the first choice) or the
whole request when it has no subrequests. Each tier knows its device count and which device
models it can possibly match. The model set is found by evaluating the tier's DeviceClass and
request CEL selectors on the world's device *signatures* (a device's attributes minus per-device
identity such as uuid/PCI address, plus capacity): a model is included if any signature of it
matches, or if a selector errors there, or if a selector names an identity attribute (then all
models are included). The set is therefore a superset of the models the allocator could pick —
the engine uses it only to skip nodes that cannot possibly satisfy a tier.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from audit.canonical import equality_key
from audit.frozen import fast_init
from audit.records import NO_MODEL
from audit.scheduler.claimspec import (
    cel_expressions,
    claim_key,
    claim_requests,
    device_count,
    pod_claim_names,
)
from audit.world import IDENTITY_ATTRIBUTES, World

TEMPLATE_VERSION_LABEL = "claimtrail.io/template-version"


@fast_init
@dataclass(frozen=True)
class Tier:
    claim: str  # "<ns>/<claim name>"
    request: str
    subrequest: str  # "" for a plain request
    index: int
    count: int
    all_devices: bool
    device_class: str
    selectors: tuple[str, ...]
    tolerates: bool  # has tolerations: health taints might be tolerated
    models: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return "|".join(self.models) if self.models else NO_MODEL

    @property
    def path(self) -> str:
        return f"{self.claim}/{self.request}" + (f"/{self.subrequest}" if self.subrequest else "")


@fast_init
@dataclass(frozen=True)
class RequestTiers:
    claim: str
    request: str
    first_available: bool
    tiers: tuple[Tier, ...]


@dataclass
class PodClaims:
    """The pod's claims resolved from the world, in ``spec.resourceClaims`` order."""

    claims: list[dict[str, Any]] = field(default_factory=list)  # unallocated claims to allocate
    allocated: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # pod claim names whose claim does not exist


def resolve_claims(world: World, pod: dict[str, Any]) -> PodClaims:
    ns = pod["metadata"].get("namespace", "")
    out = PodClaims()
    for entry, name in pod_claim_names(pod):
        claim = world.get("ResourceClaim", ns, name) if name else None
        if claim is None:
            out.missing.append(entry)
            continue
        if (claim.get("status") or {}).get("allocation"):
            out.allocated.append(claim)
        else:
            out.claims.append(claim)
    return out


def template_version(claims: list[dict[str, Any]]) -> str:
    for c in claims:
        v = (c.get("metadata", {}).get("labels") or {}).get(TEMPLATE_VERSION_LABEL)
        if v:
            return str(v)
    return ""


ModelMatcher = Callable[[str, tuple[str, ...]], tuple[str, ...]]


def request_tiers(claims: list[dict[str, Any]], match_models: ModelMatcher) -> list[RequestTiers]:
    out: list[RequestTiers] = []
    for claim in claims:
        if isinstance(match_models, SignatureModelMatcher):
            out.extend(match_models.cached_tiers(claim))
        else:
            out.extend(claim_tiers(claim, match_models))
    return out


def claim_tiers(claim: dict[str, Any], match_models: ModelMatcher) -> list[RequestTiers]:
    ckey = claim_key(claim)
    out: list[RequestTiers] = []
    for name, first_available, alternatives in claim_requests(claim):
        tiers = tuple(_tier(ckey, name, sub, i, spec, match_models) for i, (sub, spec) in enumerate(alternatives))
        out.append(RequestTiers(ckey, name, first_available, tiers))
    return out


def _tier(claim: str, request: str, sub: str, index: int, spec: Mapping[str, Any],
          match_models: ModelMatcher) -> Tier:
    selectors = cel_expressions(spec.get("selectors"))
    device_class = spec.get("deviceClassName", "")
    all_devices = spec.get("allocationMode") == "All"
    return Tier(claim=claim, request=request, subrequest=sub, index=index,
                count=device_count(spec), all_devices=all_devices,
                device_class=device_class, selectors=selectors, tolerates=bool(spec.get("tolerations")),
                models=match_models(device_class, selectors))


# A tier without its claim key: Tier's fields after ``claim``, in order.
_TierShape = tuple[str, str, int, int, bool, str, tuple[str, ...], bool, tuple[str, ...]]
_RequestShape = tuple[str, bool, tuple[_TierShape, ...]]


def _tier_shape(t: Tier) -> _TierShape:
    return (t.request, t.subrequest, t.index, t.count, t.all_devices, t.device_class, t.selectors, t.tolerates, t.models)


class SignatureModelMatcher:
    """Models a (class, selectors) pair can match, by CEL on device signatures; cached per world state."""

    def __init__(self, world: World) -> None:
        # the world keeps its matcher (``World.derived``); a weak reference back keeps the pair out
        # of a reference cycle, so a dropped world is freed at once instead of by a full collection
        self.world = cast(World, weakref.proxy(world))
        self._cache: dict[tuple[Any, ...], tuple[str, ...]] = {}
        # id(claim) -> (claim, (signature version, inventory version), its tiers)
        self._tiers: dict[int, tuple[dict[str, Any], tuple[int, int], list[RequestTiers]]] = {}
        # the tiers of each distinct claim spec under one pair of versions, without the claim key
        self._by_spec: tuple[tuple[int, int], dict[bytes, list[_RequestShape]]] = ((-1, -1), {})
        # id(spec) -> (spec, its equality key): claims of one template and size share their spec
        # object (payloads are never changed once in an event), so most claims need no encoding
        self._spec_keys: dict[int, tuple[Any, bytes]] = {}
        self._env: Any = None

    def cached_tiers(self, claim: dict[str, Any]) -> list[RequestTiers]:
        """``claim_tiers`` memoised per claim object while classes and device signatures stay the same."""
        versions = (self.world.signature_version, self.world.inventory_version)
        hit = self._tiers.get(id(claim))
        if hit is None or hit[0] is not claim or hit[1] != versions:
            if len(self._tiers) > 50_000:
                self._tiers.clear()
            hit = self._tiers[id(claim)] = (claim, versions, self._spec_tiers(claim, versions))
        return hit[2]

    def spec_tiers(self, claim: dict[str, Any]) -> list[RequestTiers]:
        """``claim_tiers`` memoised per distinct claim spec while classes and device signatures
        stay the same, keeping nothing of the claim itself: for readers that see each claim once
        (the lifecycle fold)."""
        return self._spec_tiers(claim, (self.world.signature_version, self.world.inventory_version))

    def _spec_tiers(self, claim: dict[str, Any], versions: tuple[int, int]) -> list[RequestTiers]:
        """``claim_tiers`` once per distinct claim spec: claims made from one template and size
        differ only in their names, and a claim's tiers read nothing else of it but its key.
        Keyed by the spec's ``equality_key`` (equal keys are equal JSON values); a spec that is
        not plain JSON is read every time."""
        spec = claim.get("spec")
        known = self._spec_keys.get(id(spec))
        if known is not None and known[0] is spec:
            key = known[1]
        else:
            try:
                key = equality_key(spec)
            except (TypeError, ValueError):
                return claim_tiers(claim, self)
            if len(self._spec_keys) >= 1024:
                self._spec_keys.clear()
            # the spec itself is kept and compared: an id() of a freed spec can be handed to another
            self._spec_keys[id(spec)] = (spec, key)
        if self._by_spec[0] != versions:
            self._by_spec = (versions, {})
        shapes = self._by_spec[1]
        found = shapes.get(key)
        if found is None:
            tiers = claim_tiers(claim, self)
            if len(shapes) >= 4096:
                shapes.clear()
            shapes[key] = [(rt.request, rt.first_available, tuple(_tier_shape(t) for t in rt.tiers)) for rt in tiers]
            return tiers
        ckey = claim_key(claim)
        return [RequestTiers(ckey, request, first_available, tuple(Tier(ckey, *shape) for shape in tiers))
                for request, first_available, tiers in found]

    def forget(self, claims: list[dict[str, Any]]) -> None:
        """Drop the tiers of claim objects that left the world (``nodealloc.forget_claims``)."""
        for claim in claims:
            hit = self._tiers.get(id(claim))
            if hit is not None and hit[0] is claim:
                del self._tiers[id(claim)]

    def __call__(self, device_class: str, selectors: tuple[str, ...]) -> tuple[str, ...]:
        cls = self.world.get("DeviceClass", "", device_class)
        class_selectors = cel_expressions(((cls or {}).get("spec") or {}).get("selectors"))
        key = (self.world.signature_version, self.world.inventory_version if cls is None else 0,
               device_class, class_selectors, selectors)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._compute(cls is not None, class_selectors + selectors)
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    def _compute(self, class_exists: bool, expressions: tuple[str, ...]) -> tuple[str, ...]:
        every = tuple(sorted({e[1] for e in self.world.signatures.values()}))
        if not class_exists:
            return ()
        if any(ident in expr for expr in expressions for ident in IDENTITY_ATTRIBUTES):
            return every
        try:
            from audit.dra.cel import CelEnvironment, device_context
        except ImportError:
            return every  # without a CEL evaluator every model stays a candidate (sound, slower)
        if self._env is None:
            self._env = CelEnvironment()
        models: set[str] = set()
        compiled = []
        for expr in expressions:
            try:
                compiled.append(self._env.compile(expr))
            except Exception:
                return every  # the allocator reports the compile error on the node it visits
        for _, (_, model, driver, attrs, capacity) in sorted(self.world.signatures.items()):
            if model in models:
                continue
            try:
                ctx = device_context(driver, attrs, capacity, False)
                if all(c.evaluate(ctx) for c in compiled):
                    models.add(model)
            except Exception:
                models.add(model)  # a runtime error there aborts that node in the allocator: keep it visible
        return tuple(sorted(models))

