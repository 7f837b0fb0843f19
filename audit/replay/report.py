"""Summaries of a replay run: how many decisions were verified, matched, and why others did not.

Observed decisions (from a real cluster) are counted apart: for them a match means our allocator
picks the devices the scheduler picked on the same node, and ``agreement_rate`` is the share that
agree — the policy-correctness metric.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from audit.replay.verify import ReplayResult


@dataclass
class Summary:
    verified: int = 0
    matched: int = 0
    mismatched: dict[str, int] = field(default_factory=dict)  # cause -> count
    observed: int = 0
    observed_agree: int = 0

    @property
    def mismatches(self) -> int:
        return sum(self.mismatched.values())

    @property
    def agreement_rate(self) -> float | None:
        return self.observed_agree / self.observed if self.observed else None

    def add(self, r: ReplayResult) -> None:
        self.verified += 1
        if r.observed:
            self.observed += 1
            self.observed_agree += int(r.match)
        if r.match:
            self.matched += 1
        else:
            self.mismatched[r.cause] = self.mismatched.get(r.cause, 0) + 1

    def to_dict(self) -> dict[str, Any]:
        return {"verified": self.verified, "matched": self.matched, "mismatched": self.mismatches,
                "mismatched_by_cause": dict(sorted(self.mismatched.items())), "observed": self.observed,
                "observed_agreement_rate": self.agreement_rate}

    def lines(self) -> list[str]:
        noun = "decision" if self.verified == 1 else "decisions"
        out = [f"verified {self.verified:,} {noun}: {self.matched:,} matched, {self.mismatches:,} mismatched"]
        for cause, n in sorted(self.mismatched.items()):
            out.append(f"  {cause}: {n:,}")
        if self.observed:
            out.append(f"observed decisions: {self.observed:,}, allocator agreement {self.agreement_rate:.2%}")
        return out


def summarize(results: Iterable[ReplayResult]) -> Summary:
    s = Summary()
    for r in results:
        s.add(r)
    return s
