"""Per-device evidence of one allocation: the last verdict the search reached per (tier, device).

Tiers are a claim's requests, or each firstAvailable subrequest of a request. Every device of
the node's candidate list appears once per tier: with the verdict the search recorded for it,
``selected`` for the devices in the final result, ``pool_incomplete``/``pool_invalid`` for
devices of unusable pools, and ``not_reached`` otherwise. A device that was tentatively taken and
then given back while backtracking is ``not_reached`` with detail ``backtracked=true``.
Recording never feeds back into the search.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from audit.allocator.inventory import NodeView
from audit.allocator.outcome import DeviceVerdict, TierEvidence
from audit.records import Reason

Detail = tuple[tuple[str, str], ...]
# reason codes as plain strings (an enum member's ``.value`` is a property call)
_SELECTED = Reason.SELECTED.value
_NOT_REACHED = Reason.NOT_REACHED.value


class EvidenceLog:
    def __init__(self, view: NodeView) -> None:
        self.view = view
        self.verdicts: dict[tuple[int, int, int], dict[int, tuple[str, Detail]]] = {}

    def record(self, key: tuple[int, int, int], position: int, reason: str, detail: Detail) -> None:
        tier = self.verdicts.get(key)
        if tier is None:
            tier = self.verdicts[key] = {}
        tier[position] = (str(reason), detail)

    def _verdict(self, position: int, reason: str, detail: Detail) -> DeviceVerdict:
        # Verdicts are immutable, so equal ones are shared across tiers and calls on this node.
        cache = self.view.verdict_cache
        key = (position, reason, detail)
        found = cache.get(key)
        if found is None:
            found = cache[key] = DeviceVerdict(device=self.view.candidates[position][0].id, reason=reason, detail=detail)
        return found

    def _baseline(self) -> list[DeviceVerdict]:
        base = self.view.baseline_verdicts
        if base is None:
            base = []
            for position, (_entry, pool) in enumerate(self.view.candidates):
                if pool.incomplete:
                    base.append(self._verdict(position, Reason.POOL_INCOMPLETE.value, (("pool", pool.pool_id),)))
                else:
                    base.append(self._verdict(position, _NOT_REACHED, ()))
            self.view.baseline_verdicts = base
        return base

    def tiers(self, claims: Sequence[Any], requests: Mapping[tuple[int, int, int], Any],
              sub_counts: Mapping[tuple[int, int], int],
              final: Iterable[tuple[tuple[int, int, int], int]]) -> list[TierEvidence]:
        chosen: dict[tuple[int, int, int], set[int]] = {}
        for key, position in final:
            chosen.setdefault(key, set()).add(position)
        baseline = self._baseline()
        selected = _SELECTED
        out: list[TierEvidence] = []
        for ci, claim in enumerate(claims):
            for ri, request in enumerate(claim.spec.requests):
                count = sub_counts.get((ci, ri), 0)
                for si in range(max(count, 1)):
                    key = (ci, ri, si)
                    data = requests.get(key)
                    name = data.name if data is not None else (
                        f"{request.name}/{request.first_available[si].name}" if count else request.name)
                    verdicts = list(baseline)
                    picked = chosen.get(key, ())
                    for position, (reason, detail) in self.verdicts.get(key, {}).items():
                        if position in picked:
                            continue
                        if reason == selected:
                            # Taken in a branch that did not become the answer.
                            reason, detail = _NOT_REACHED, (("backtracked", "true"),)
                        verdicts[position] = self._verdict(position, reason, detail)
                    for position in picked:
                        verdicts[position] = self._verdict(position, selected, ())
                    out.append(TierEvidence(claim=claim.key, request=name, subrequest_index=si, verdicts=verdicts))
        return out
