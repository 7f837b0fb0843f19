"""The fixed piece of pure-Python work the ``cpu`` and ``parallel`` calibrations time.

It stands for what the core does — serialise decision records to canonical JSON and search
devices for a claim with alternatives and a matching constraint — without calling any of the
project's code: a workload that got faster with the code it calibrates would mark every figure
slower (the project's encoder and allocator have both become faster since the reference run).
This module is therefore frozen; changing anything in it changes the machine's measured speed,
and ``benchmarks/reference.json`` must then be measured again (``make bench
BENCH_ARGS=--set-reference`` on a quiet machine).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

MODELS = ("H100", "A100", "L40S")
NODES = 3
PER_NODE = 16


def records(count: int) -> list[dict[str, Any]]:
    """``count`` decision-like records of about 1.5 KB of JSON each, the same on every run."""
    out = []
    for i in range(count):
        node = f"node-{i % 7}"
        out.append({
            "decision_id": f"{i * 2654435761 % 2**32:08x}-b1e2-7478-7ab8-{i:012x}", "cluster": "c1", "seq": i,
            "time": f"2026-11-01T{i // 720 % 24:02d}:{i // 12 % 60:02d}:{i * 5 % 60:02d}.000Z", "attempt": i % 3,
            "tenant": ("acme", "globex", "initech", "umbrella")[i % 4], "namespace": "ml", "pod": f"train-{i}",
            "claims": ["gpu"], "preference": ["H100", "A100"], "policy_version": "v1", "policy_digest": "d" * 64,
            "outcome": "allocated", "node": node,
            "devices": [{"device": f"gpu.nvidia.com/{node}/gpu-{i % 8}", "node": node, "model": "A100",
                         "request": "gpu/a100"}],
            "tier_index": 1, "preferred_model": "H100", "allocated_model": "A100", "fallback": True,
            "tiers": [{"index": 0, "request": "gpu/h100", "model": "H100", "considered": 8,
                       "reasons": {"in_use": 6, "unhealthy": 2},
                       "exemplars": [{"device": f"gpu.nvidia.com/{node}/gpu-1", "node": node, "reason": "unhealthy",
                                      "detail": {"taint": "gpu/unhealthy"}}], "nodes_evaluated": 3},
                      {"index": 1, "request": "gpu/a100", "model": "A100", "considered": 4,
                       "reasons": {"selected": 1, "in_use": 3}, "exemplars": [], "nodes_evaluated": 2}],
            "blockers": [], "wait_ms": i * 37 % 100_000, "steps": 4, "duration_us": 101, "track": "dra",
            "share": i / 7, "input_digest": f"{i:064x}", "schema_version": 1,
        })
    return out


def _devices(node: int) -> list[dict[str, Any]]:
    """A node's devices: mixed models, half on each NUMA node, some taken, some older drivers."""
    return [{"name": f"gpu-{d}", "model": MODELS[(d // 3 + node) % 3], "memory_gib": (80, 80, 48)[(d // 3 + node) % 3],
             "numa": d % 2, "driver": f"{550 + (d * node) % 3}.{(d * 7) % 100}.{d}",
             "taken": (d * 3 + node) % 7 == 0} for d in range(PER_NODE)]


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _search(devices: list[dict[str, Any]], count: int, fits: Callable[[dict[str, Any]], bool]) -> list[str] | None:
    """Depth-first: ``count`` free devices that fit and share one NUMA node (a matchAttribute)."""
    pool = [d for d in devices if not d["taken"] and fits(d)]
    chosen: list[dict[str, Any]] = []

    def place(start: int) -> bool:
        if len(chosen) == count:
            return True
        for i in range(start, len(pool)):
            if chosen and pool[i]["numa"] != chosen[0]["numa"]:
                continue
            chosen.append(pool[i])
            if place(i + 1):
                return True
            chosen.pop()
        return False

    return [d["name"] for d in chosen] if place(0) else None


def make(record_count: int, searches: int) -> Callable[[], None]:
    """Build the fixed inputs once; return the function that does the timed work."""
    docs = records(record_count)
    nodes = [_devices(n) for n in range(NODES)]
    minimum = _version("550.40.0")
    tiers = [lambda d, m=m: d["model"] == m and d["memory_gib"] >= 48 and _version(d["driver"]) >= minimum
             for m in MODELS]
    encode = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode

    def work() -> None:
        for doc in docs:
            encode(doc).encode()
        for i in range(searches):
            devices = [dict(d) for d in nodes[i % NODES]]  # a fresh view each search, as a new cycle builds
            for fits in tiers:  # firstAvailable: the first alternative that can be met wins
                if _search(devices, 2 + i % 3, fits) is not None:
                    break

    return work
