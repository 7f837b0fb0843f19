"""The fixed piece of memory-heavy pure-Python work the ``memory`` calibration times.

The engine, replay and the simulated days keep hundreds of megabytes of small Python objects
alive (worlds, claims, decision records) and spend their time following pointers between them:
a dict lookup, then the record it yields, then the node that record names, scattered across a
heap far larger than any cache. How fast that runs depends on the memory system (cache misses,
bandwidth shared with whatever else the host runs) much more than the cache-resident ``cpu``
workload does, so a host that slows memory slows those figures while the ``cpu`` calibration
barely moves. This workload builds such a heap — ``RECORDS`` small dict records holding strings,
tuples and lists, indexed by string keys — and each round looks records up in a scattered
(but fixed) order, updates them in place, replaces some of their fields with new objects (the
allocation churn of the engine's sealed records) and finally walks every record once.

Only the standard library is used, so the workload does not speed up with the code it
calibrates. It is frozen: changing anything here changes the measured speed, and the
``memory_seconds`` of ``benchmarks/reference.json`` must then be measured again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

RECORDS = 300_000
NODES = 1_000
MODELS = ("H100", "A100", "L40S")
STEP = 2_654_435_761  # a prime: ``j * STEP % n`` visits every index once, scattered, for n < STEP


def key(i: int) -> str:
    return f"{i * STEP % 2**32:08x}-{i:07d}"


def build(count: int) -> tuple[list[str], dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The keys in creation order, the records by key, and the nodes they point at."""
    nodes = [{"name": f"node-{n}", "load": 0} for n in range(NODES)]
    keys = [key(i) for i in range(count)]
    index = {k: {"id": k, "node": i % NODES, "size": 1 + i % 8, "model": MODELS[i % 3],
                 "tags": (i, f"t{i % 97}"), "state": [i % 5, 0]} for i, k in enumerate(keys)}
    return keys, index, nodes


def make(count: int = RECORDS) -> Callable[[], int]:
    """Build the heap once; return the function that does one round of the timed work and
    returns a checksum of what it read (the same for the same round on every machine)."""
    keys, index, nodes = build(count)

    def work() -> int:
        total = 0
        n = len(keys)
        for j in range(n):  # every record once, in an order unrelated to where it lies in memory
            k = keys[j * STEP % n]
            record = index[k]
            nodes[record["node"]]["load"] += record["size"]
            state = record["state"]
            state[1] += 1
            if j & 3 == 0:  # churn: a new tuple and string replace the old ones, which are freed
                record["tags"] = (j, k[:4] + str(j % 13))
            total += state[0]
        for record in index.values():  # a full traversal, as a fold over the whole world does
            total += record["size"] + record["tags"][0] % 7 + record["state"][1]
        return total + sum(node["load"] for node in nodes) % 1_000_003

    return work
