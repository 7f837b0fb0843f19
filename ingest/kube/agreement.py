"""Policy correctness on a live cluster: re-run each observed DRA allocation through our allocator.

The scheduler chose the node (an input, taken from the binding); on that node, with the world as
the watcher holds it when the decision completes (slices, classes and taint rules as last seen;
every other claim allocated there counts as in use), our allocator must pick the same devices for
the same requests. A slice that changed between the scheduler's cycle and our observation can
show up as a difference; the diff names the devices so such cases are easy to tell apart. A difference is counted in the
``claimtrail.kube.allocation_mismatches`` counter (alert on its rate) and logged with the diff.
A re-run that spends its step budget (``RERUN_MAX_STEPS``) gives up unchecked instead of holding
the watcher up: the search is exponential in the worst case, and the scheduler stopped its own at
its filter timeout.
"""

from __future__ import annotations

import copy
import logging
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from opentelemetry import metrics

log = logging.getLogger(__name__)



class AgreementMetrics:
    """The counters, from the global meter provider unless one is given (tests read their own)."""

    def __init__(self, provider: metrics.MeterProvider | None = None) -> None:
        meter = (provider or metrics.get_meter_provider()).get_meter("claimtrail.kube")
        self.mismatches = meter.create_counter(
            "claimtrail.kube.allocation_mismatches",
            unit="{allocation}",
            description="Observed DRA allocations whose devices differ from what the allocator chooses on the same node",
        )
        self.checks = meter.create_counter(
            "claimtrail.kube.allocation_checks",
            unit="{allocation}",
            description="Observed DRA allocations re-run through the allocator, by result",
        )


Result = tuple[str, str, str, str]  # (request, driver, pool, device)
# allocateOne steps a re-run may take (``Allocator.allocate``'s ``max_steps``): about 2.5 s of one
# core here, where allocations seen in practice take tens; a re-run past it is counted with result
# ``gave_up``, neither agreement nor mismatch
RERUN_MAX_STEPS = 1_000_000
T = TypeVar("T")


@dataclass
class Agreement:
    checked: bool
    agrees: bool = False
    observed: dict[str, list[Result]] = field(default_factory=dict)
    expected: dict[str, list[Result]] = field(default_factory=dict)
    diff: list[str] = field(default_factory=list)
    error: str = ""
    evidence: list[Any] = field(default_factory=list)  # the re-run's TierEvidence, in search order

    def summary(self) -> str:
        if not self.checked:
            return f"allocator not run: {self.error}"
        if self.agrees:
            return "allocator agrees"
        return "allocator disagrees: " + "; ".join(self.diff)


def results_of(raw_results: Iterable[Mapping[str, Any]]) -> list[Result]:
    return [
        (str(r.get("request", "")), str(r.get("driver", "")), str(r.get("pool", "")), str(r.get("device", "")))
        for r in raw_results
    ]


def diff_results(observed: Mapping[str, list[Result]], expected: Mapping[str, list[Result]]) -> list[str]:
    out: list[str] = []
    for claim in sorted(set(observed) | set(expected)):
        got, want = observed.get(claim, []), expected.get(claim, [])
        if got == want:
            continue
        out.append(
            f"claim {claim}: scheduler chose "
            + (", ".join(f"{r[0]}={r[1]}/{r[2]}/{r[3]}" for r in got) or "nothing")
            + "; allocator chooses "
            + (", ".join(f"{r[0]}={r[1]}/{r[2]}/{r[3]}" for r in want) or "nothing")
        )
    return out


def _unallocated(raw: Mapping[str, Any]) -> dict[str, Any]:
    claim = copy.deepcopy(dict(raw))
    claim.pop("status", None)
    return claim


def model_claim(raw: Mapping[str, Any]) -> Any:
    from audit.dra import model

    obj = model.parse_object(raw)
    if not isinstance(obj, model.ResourceClaim):
        raise model.ModelError(f"{model.object_label(raw)}: expected a ResourceClaim")
    return obj


class Rerunner:
    """Re-runs observed allocations, reusing work between decisions: parsed objects are cached
    by (kind, namespace, name, resourceVersion) — an object version never changes — and the
    allocator's Inventory is rebuilt only when the set of slices, classes or taint rules did."""

    def __init__(self, counters: AgreementMetrics, cache_size: int = 200_000,
                 max_steps: int | None = RERUN_MAX_STEPS) -> None:
        self.counters = counters
        self.cache_size = cache_size
        self.max_steps = max_steps
        self._parsed: OrderedDict[tuple[str, str, str, str], Any] = OrderedDict()
        self._inventory_key: Any = None
        self._inventory: Any = None

    def parsed(self, raw: Mapping[str, Any], kind: type[T]) -> T:
        from audit.dra import model

        meta = raw.get("metadata") or {}
        key = (str(raw.get("kind", "")), str(meta.get("namespace", "")), str(meta.get("name", "")),
               str(meta.get("resourceVersion", "")))
        obj = self._parsed.get(key) if key[3] else None
        if obj is None:
            obj = model.parse_object(raw)
            if key[3]:
                self._parsed[key] = obj
                while len(self._parsed) > self.cache_size:
                    self._parsed.popitem(last=False)
        else:
            self._parsed.move_to_end(key)
        if not isinstance(obj, kind):
            raise model.ModelError(f"{model.object_label(raw)}: expected a {kind.__name__}")
        return obj

    def inventory(
        self,
        slices: Sequence[Mapping[str, Any]],
        classes: Sequence[Mapping[str, Any]],
        taint_rules: Sequence[Mapping[str, Any]],
        generation: Any = None,
    ) -> Any:
        """The Inventory for these objects; ``generation`` (when the caller tracks changes) names
        their state cheaply, otherwise it is taken from every object's resourceVersion."""
        from audit.allocator import Inventory
        from audit.dra import model

        if generation is not None:
            key: Any = ("generation", generation)
        else:
            key = tuple(_version_key(o) for group in (slices, classes, taint_rules) for o in group)
            if any(not k[3] for k in key):
                key = None  # objects without versions: never reuse
        if key is None or key != self._inventory_key:
            self._inventory = Inventory(
                slices=[self.parsed(s, model.ResourceSlice) for s in slices],
                classes=[self.parsed(c, model.DeviceClass) for c in classes],
                taint_rules=[self.parsed(t, model.DeviceTaintRule) for t in taint_rules],
            )
            self._inventory_key = key
        return self._inventory

    def check(
        self,
        *,
        node: Mapping[str, Any],
        claims: Sequence[Mapping[str, Any]],
        slices: Sequence[Mapping[str, Any]],
        classes: Sequence[Mapping[str, Any]],
        taint_rules: Sequence[Mapping[str, Any]],
        other_claims: Iterable[Mapping[str, Any]],
        generation: Any = None,
    ) -> Agreement:
        """Allocate ``claims`` (raw, as observed with their allocation) on ``node`` and compare."""
        return _check(self, node, claims, slices, classes, taint_rules, other_claims, generation)


def _version_key(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (str(obj.get("kind", "")), str(meta.get("namespace", "")), str(meta.get("name", "")),
            str(meta.get("resourceVersion", "")))


def _check(
    rerun: Rerunner,
    node: Mapping[str, Any],
    claims: Sequence[Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
    classes: Sequence[Mapping[str, Any]],
    taint_rules: Sequence[Mapping[str, Any]],
    other_claims: Iterable[Mapping[str, Any]],
    generation: Any,
) -> Agreement:
    counters = rerun.counters
    observed = {
        str(c["metadata"]["name"]): results_of(((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or [])
        for c in claims
    }
    from audit.allocator import AllocatedState, Allocator
    from audit.allocator.outcome import Status
    from audit.dra import model

    try:
        inventory = rerun.inventory(slices, classes, taint_rules, generation)
        state = AllocatedState.from_claims([rerun.parsed(c, model.ResourceClaim) for c in other_claims])
        outcome = Allocator(inventory, state).allocate(
            rerun.parsed(node, model.Node),
            # the claims as they were before allocation: parsed fresh (no version of them looks like this)
            [model_claim(_unallocated(c)) for c in claims],
            explain=True,
            max_steps=rerun.max_steps,
        )
    except Exception as exc:  # noqa: BLE001 - a malformed observed object must not stop the watcher
        counters.checks.add(1, {"result": "error"})
        log.warning("allocator re-run failed", extra={"error": str(exc)})
        return Agreement(checked=False, observed=observed, error=str(exc))
    if outcome.error_code == "step_budget":
        counters.checks.add(1, {"result": "gave_up"})
        log.warning("allocator re-run gave up", extra={"max_steps": rerun.max_steps})
        return Agreement(checked=False, observed=observed, error=outcome.message)
    expected: dict[str, list[Result]] = {name: [] for name in observed}
    if outcome.status == Status.SUCCESS:
        for alloc in outcome.allocations:
            expected[alloc.claim.rsplit("/", 1)[-1]] = results_of(alloc.results)
    diff = diff_results(observed, expected)
    if outcome.status != Status.SUCCESS:
        diff.insert(0, f"allocator outcome {outcome.status.value}: {outcome.message or outcome.error_code}")
    agrees = not diff
    counters.checks.add(1, {"result": "agree" if agrees else "mismatch"})
    if not agrees:
        node_name = str((node.get("metadata") or {}).get("name", ""))
        counters.mismatches.add(1, {"node": node_name})
        # claim names are tenant data: the diff itself is logged at DEBUG only (audit/logs.py)
        log.warning(
            "observed allocation differs from the allocator",
            extra={"node": node_name, "differences": len(diff), "tenant_data": {"diff": diff}},
        )
    return Agreement(
        checked=True, agrees=agrees, observed=observed, expected=expected, diff=diff, evidence=list(outcome.evidence)
    )
