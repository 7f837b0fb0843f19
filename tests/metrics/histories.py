"""Random small cluster histories for property tests, as consistent event logs.

A history is a few pods over two hours on two H100 nodes, one A100 node and one device-plugin L4
node: DRA pods with one request (H100 first, then A100) or two, device-plugin pods, pods retried
many times (unrelated events between their creation and bind), pods that fail, pods still pending
at the end, and a policy change at the first hour (weights and the starvation timeout). Devices
are handed out as a cluster would: a pod binds only where its devices are free, else it stays
pending.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import strategies as st

from tests.metrics.eventlog import Log, policy_doc

NODES = {"h100-0": ("H100", 4), "h100-1": ("H100", 4), "a100-0": ("A100", 4)}
TENANTS = ("a", "b", "c")


@dataclass(frozen=True)
class PodPlan:
    tenant: str
    kind: str  # "one", "two" (two requests) or "dp"
    size: int
    created: int  # minute
    wait: int  # minutes until it tries to bind
    run: int  # minutes it runs once bound
    outcome: str  # "bind", "fail" or "pend"
    retries: int  # unrelated events between creation and bind


plans = st.lists(st.builds(
    PodPlan, st.sampled_from(TENANTS), st.sampled_from(("one", "one", "two", "dp")), st.integers(1, 4),
    st.integers(0, 110), st.integers(0, 40), st.integers(1, 90), st.sampled_from(("bind", "bind", "bind", "fail", "pend")),
    st.integers(0, 3)), min_size=1, max_size=12)


@dataclass(frozen=True)
class TaintPlan:
    node: str
    device: int
    start: int  # minute
    end: int | None  # minute it is lifted; None: still unhealthy at the end


taint_plans = st.lists(st.builds(
    TaintPlan, st.sampled_from(sorted(NODES)), st.integers(0, 3), st.integers(0, 120),
    st.one_of(st.none(), st.integers(1, 60))).map(
        lambda t: TaintPlan(t.node, t.device, t.start, None if t.end is None else t.start + t.end)), max_size=4)


def history(pods: list[PodPlan], taints: Sequence[TaintPlan] = ()) -> Log:
    """The log of ``pods``, with health taints on devices as ``taints`` say."""
    log = Log(policy_doc("1", {"a": 1, "b": 1, "c": 2}))
    log.nodes("H100", 2, 4).nodes("A100", 1, 4).dp_nodes("L4", 1, 4)
    # (minute, phase, pod, action): at one minute, policy first, then creations, releases, binds
    queue: list[tuple[float, int, int, str]] = [(60, 0, -1, "policy"), (130, 9, -1, "end")]
    for i, p in enumerate(pods):
        queue.append((p.created, 1, i, "create"))
        for r in range(p.retries):
            queue.append((p.created + (r + 1) * max(1, p.wait) / (p.retries + 1), 2, i, "tick"))
        if p.outcome != "pend":
            queue.append((p.created + p.wait, 4, i, p.outcome))
    for k, t in enumerate(taints):
        queue.append((t.start, 0, k, "taint"))
        if t.end is not None:
            queue.append((t.end, 0, k, "untaint"))
    heapq.heapify(queue)
    free = {n: set(range(g)) for n, (_, g) in NODES.items()}
    dp_free = [4]
    held: dict[int, tuple[str, list[int]]] = {}
    while queue:
        at, _, i, what = heapq.heappop(queue)
        if at > 130:
            break
        log.at(at)
        if what == "policy":
            log.emit("Policy", "", "p", policy_doc("2", {"a": 1, "b": 3, "c": 1}, timeouts={"starvation": "20m"}))
        elif what == "taint":
            log.taint(f"t{i}", taints[i].node, f"gpu-{taints[i].device}")
        elif what == "untaint":
            log.untaint(f"t{i}")
        elif what in ("end", "tick"):
            log.tick(at)
        elif what == "create":
            p, ref = pods[i], f"{pods[i].tenant}/p{i}"
            if p.kind == "dp":
                log.dp_pod(ref, p.size)
            elif p.kind == "one":
                log.pod(ref, ("gpu", ["H100", "A100"], p.size))
            else:
                log.pod(ref, ("big", ["H100", "A100"], 1), ("small", ["H100", "A100"], 1))
        elif what == "fail":
            log.fail(f"{pods[i].tenant}/p{i}")
        elif what == "finish":
            log.finish(f"{pods[i].tenant}/p{i}")
            if i in held:
                node, devs = held.pop(i)
                free[node] |= set(devs)
            else:
                dp_free[0] += pods[i].size
        elif what == "bind" and _bind(log, pods[i], i, free, dp_free, held):
            heapq.heappush(queue, (at + pods[i].run, 3, i, "finish"))
    return log


def _bind(log: Log, p: PodPlan, i: int, free: dict[str, set[int]], dp_free: list[int],
          held: dict[int, tuple[str, list[int]]]) -> bool:
    ref = f"{p.tenant}/p{i}"
    if p.kind == "dp":
        if dp_free[0] < p.size:
            return False
        dp_free[0] -= p.size
        log.bind(ref, "l4-dp-0")
        return True
    need = [("gpu", p.size)] if p.kind == "one" else [("big", 1), ("small", 1)]
    total = sum(n for _, n in need)
    for node, (model, _) in NODES.items():  # H100 nodes first: a pod lands on A100 only when they are full
        if len(free[node]) >= total:
            devs = sorted(free[node])[:total]
            free[node] -= set(devs)
            held[i] = (node, devs)
            picks: dict[str, tuple[str, list[int]]] = {}
            k = 0
            for req, n in need:
                picks[req] = (model.lower(), devs[k:k + n])
                k += n
            log.bind(ref, node, picks)
            return True
    return False
