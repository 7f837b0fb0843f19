"""The time window a metric is computed over: [since, until) in milliseconds since the epoch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Window:
    since_ms: int
    until_ms: int

    def __post_init__(self) -> None:
        if self.until_ms < self.since_ms:
            raise ValueError(f"window: until ({self.until_ms}) is before since ({self.since_ms})")

    @property
    def hours(self) -> float:
        return (self.until_ms - self.since_ms) / 3_600_000

    def overlap_ms(self, start_ms: int, end_ms: int | None) -> int:
        """Milliseconds of [start, end) inside the window (``end`` None: still open)."""
        end = self.until_ms if end_ms is None else min(end_ms, self.until_ms)
        return max(0, end - max(start_ms, self.since_ms))

    def holds(self, ms: int | None) -> bool:
        return ms is not None and self.since_ms <= ms < self.until_ms
