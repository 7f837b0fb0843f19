"""Shared counters of partitionable devices (upstream ``allocator_incubating.go``: ``checkAvailableCounters``
and the pool-level counter bookkeeping).

Per pool, what is available is the pool's shared counters minus what every already allocated
device of the pool consumes (devices of other nodes' slices included); it may be negative. One
allocation call then adds the consumption of each device it tries and rejects the device when
any counter of the pool is exceeded — so an over-consumed set blocks every consumer of the pool.
In 1.36 both books are keyed by pool name only (``Quirks.counters_by_pool_name``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from audit.allocator.inventory import DeviceEntry, Pool
from audit.allocator.state import AllocatedState
from audit.dra.quantity import Quantity

CounterKey = tuple[str, str]  # (counter set, counter)


def pool_key(pool: Pool, by_pool_name: bool) -> Any:
    return pool.name if by_pool_name else (pool.driver, pool.name)


def available_counters(pool: Pool, state: AllocatedState) -> dict[CounterKey, Quantity]:
    available = {(s, c): q for s, counters in pool.counter_sets.items() for c, q in counters.items()}
    for entry in pool.all_entries:
        if entry.id in state.allocated_devices or state.is_shared_in_use(entry.id):
            for set_name, counter, amount in entry.counters:
                key = (set_name, counter)
                if key in available:
                    available[key] = available[key].sub(amount)
    return available


class CounterBook:
    """Counter consumption of one allocation call, checked against what each pool has left."""

    def __init__(self, available: Callable[[Pool], dict[CounterKey, Quantity]], by_pool_name: bool) -> None:
        self._available = available
        self._by_pool_name = by_pool_name
        self._consumed: dict[Any, dict[CounterKey, Quantity]] = {}

    def reserve(self, entry: DeviceEntry, pool: Pool) -> tuple[Callable[[], None] | None, CounterKey | None]:
        """Add the device's consumption: (undo, None) when it fits, else (None, the exceeded counter)."""
        available = self._available(pool)
        consumed = self._consumed.setdefault(pool_key(pool, self._by_pool_name), {})
        for set_name, counter, amount in entry.counters:
            key = (set_name, counter)
            current = consumed.get(key)
            consumed[key] = amount if current is None else current.add(amount)

        def undo() -> None:
            for set_name, counter, amount in entry.counters:
                key = (set_name, counter)
                consumed[key] = consumed[key].sub(amount)

        for key, left in available.items():
            used = consumed.get(key)
            if (used is not None and left.cmp(used) < 0) or (used is None and left.sign() < 0):
                undo()
                return None, key
        return undo, None
