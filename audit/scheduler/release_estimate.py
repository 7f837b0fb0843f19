"""Expected time until a tier's devices are free on one node, estimated from the world alone.

Adaptive fallback (``spec.fallback.mode: adaptive``) holds a pod out for its first choice only
while that choice is expected to fit soon enough. "Soon" is read from the world's own history
(``World.finished``: how long finished allocations of each device model held their devices) and
present (``World.alloc_start``: when each running allocation got its devices), nothing else:

* **Survival of a holding.** The Kaplan–Meier product-limit estimator (Kaplan and Meier,
  "Nonparametric Estimation from Incomplete Observations", JASA 53, 1958) over the holding times
  of the tier's models: each finished holding is an event at its length, each running allocation
  is censored at its age (it has held that long and is not done). Censoring the running ones
  keeps long jobs from being under-counted early in a history, when mostly short ones have
  finished. ``S(t)`` is the probability that a holding lasts beyond ``t``.
* **Remaining time of a running allocation** aged ``a``: it still holds its devices ``t`` later
  with probability ``S(a + t) / S(a)`` (the survival conditional on its age). Allocations are
  taken as independent of each other.
* **A node is ready** when its free healthy devices of the tier's models plus the healthy ones
  released since reach the tier's count; the first choice fits when some node is ready, so
  ``P(not yet at t) = Π over nodes P(node not ready at t)``, each node's factor from the
  distribution of devices it has released by then (a small convolution over its allocations).
* **Expected time** ``E[T] = ∫ P(not yet at t) dt``, summed on a fixed grid (``GRID``), each step
  counted at its start: ``P`` only falls, so the sum errs long, never short. The sum stops once
  it passes ``cap_ms`` (the answer is then "at least that long"), once ``P`` is negligible, or at
  the longest finished holding, beyond which no allocation is expected to end any more: if the
  first choice may still not fit there, it is not expected to fit at all (``never``).

Rules with no estimate to make: enough devices already free on one node -> ``free_now`` (0 ms);
no finished holding of the tier's models yet -> ``no_history`` (no basis to expect a release; the
engine then falls back at once rather than wait on a guess). Deterministic: the same world, time
and tier give the same answer (no clock, no randomness; sums run in a fixed order).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from audit.world import World

# Step boundaries (ms) of the integration grid: 5 s steps for the first 20 minutes (where a
# maxWait of minutes is decided), then steps growing by 10 % up to a week.
_FINE_STEP_MS, _FINE_UNTIL_MS, _GROWTH, _LAST_MS = 5_000, 1_200_000, 1.1, 7 * 24 * 3_600_000
# Below this, the first choice is as good as certain to fit: the rest of the integral is nil.
NEGLIGIBLE = 1e-9


def _grid() -> tuple[int, ...]:
    out = list(range(0, _FINE_UNTIL_MS + 1, _FINE_STEP_MS))
    t = float(_FINE_UNTIL_MS)
    while t < _LAST_MS:
        t *= _GROWTH
        out.append(int(t))
    return tuple(out)


GRID = _grid()


@dataclass(frozen=True)
class ReleaseEstimate:
    """``basis``: ``free_now`` | ``estimate`` (``expected_ms`` is E[T]) | ``at_least`` (E[T] is
    beyond ``expected_ms``, the cap) | ``never`` | ``no_history``; ``expected_ms`` is None for the
    last two. ``history`` finished holdings and ``running`` allocations of the models were read."""

    basis: str
    expected_ms: int | None
    history: int
    running: int


@dataclass(frozen=True)
class _Holding:
    node: str
    age_ms: int
    devices: int  # healthy devices of the tier's models it will give back


def survival(finished: list[int], ages: list[int]) -> tuple[list[int], list[float]]:
    """Kaplan–Meier: (event times ascending, S just after each). Censored ages tie after events."""
    events = sorted(finished)
    censored = sorted(ages)
    times: list[int] = []
    surv: list[float] = []
    s = 1.0
    n = len(events) + len(censored)
    i = j = 0
    while i < len(events):
        t = events[i]
        while j < len(censored) and censored[j] < t:
            j += 1
            n -= 1
        d = 0
        while i < len(events) and events[i] == t:
            d += 1
            i += 1
        s *= 1.0 - d / n
        n -= d
        times.append(t)
        surv.append(s)
    return times, surv


def _s(times: list[int], surv: list[float], t: int) -> float:
    k = bisect.bisect_right(times, t)
    return 1.0 if k == 0 else surv[k - 1]


def estimate(world: World, models: tuple[str, ...], count: int, now_ms: int, cap_ms: int) -> ReleaseEstimate:
    """When ``count`` devices of ``models`` are expected free on one node (see the module docstring)."""
    cache = world.derived.setdefault("release_estimate", {})
    fast = (world.seq, now_ms, models, count, cap_ms)
    hit = cache.get(fast)
    if hit is not None:
        return hit
    result = _estimate(world, models, count, now_ms, cap_ms)
    if len(cache) > 4096:
        cache.clear()
    cache[fast] = result
    return result


def _estimate(world: World, models: tuple[str, ...], count: int, now_ms: int, cap_ms: int) -> ReleaseEstimate:
    wanted = set(models)
    free: dict[str, int] = {}
    for node in sorted(world.nodes):
        per = world.node_model.get(node)
        if per and any(m in per for m in wanted):
            free[node] = sum(per[m][1] for m in sorted(wanted) if m in per)
    finished = [h for m in sorted(wanted) for h in world.finished.get(m, [])]
    holdings, ages = _holdings(world, wanted, now_ms)
    running = len(ages)
    if any(f >= count for f in free.values()):
        return ReleaseEstimate("free_now", 0, len(finished), running)
    if not finished:
        return ReleaseEstimate("no_history", None, 0, running)
    times, surv = survival(finished, ages)
    by_node: dict[str, list[_Holding]] = {}
    for h in holdings:
        if h.node in free:
            by_node.setdefault(h.node, []).append(h)
    # nodes that can be ready from releases alone, each with what it still needs
    nodes = [(node, count - free[node], by_node[node]) for node in sorted(by_node)
             if free[node] + sum(h.devices for h in by_node[node]) >= count]
    if not nodes:
        return ReleaseEstimate("never", None, len(finished), running)
    base = {id(h): _s(times, surv, h.age_ms) for _, _, hs in nodes for h in hs}
    last = times[-1]
    total = 0.0
    for k in range(len(GRID) - 1):
        t, step = GRID[k], GRID[k + 1] - GRID[k]
        p = 1.0
        for _, need, hs in nodes:
            p *= _not_ready(need, [(h.devices, _s(times, surv, h.age_ms + t) / base[id(h)]) for h in hs])
            if p < NEGLIGIBLE:
                break
        if p < NEGLIGIBLE:
            return ReleaseEstimate("estimate", round(total), len(finished), running)
        if all(h.age_ms + t >= last for _, _, hs in nodes for h in hs):
            return ReleaseEstimate("never", None, len(finished), running)
        total += p * step
        if total >= cap_ms:
            return ReleaseEstimate("at_least", round(total), len(finished), running)
    return ReleaseEstimate("never", None, len(finished), running)


def _not_ready(need: int, still: list[tuple[int, float]]) -> float:
    """P(fewer than ``need`` devices released), each holding (devices, P(still held)) independent."""
    dist = [1.0] + [0.0] * need  # dist[k]: P(k devices released so far), k == need meaning "enough"
    for devices, p_held in still:
        p_gone = 1.0 - p_held
        if p_gone <= 0.0:
            continue
        nxt = [0.0] * (need + 1)
        for k, pk in enumerate(dist):
            if pk == 0.0:
                continue
            nxt[k] += pk * p_held
            nxt[min(need, k + devices)] += pk * p_gone
        dist = nxt
    return sum(dist[:need])


def _holdings(world: World, wanted: set[str], now_ms: int) -> tuple[list[_Holding], list[int]]:
    """Running allocations holding devices of ``wanted`` models, per node in claim key order, and
    the age of each such claim (one censored observation each)."""
    out: list[_Holding] = []
    ages: list[int] = []
    devices = world.devices
    for key in sorted(world.claim_devices):
        per_node: dict[str, int] = {}
        touches = False
        for dev_id in world.claim_devices[key]:
            dev = devices.get(dev_id)
            if dev is None or dev.model not in wanted:
                continue
            touches = True
            if not dev.unhealthy:
                per_node[dev.node] = per_node.get(dev.node, 0) + 1
        if not touches:
            continue
        age = max(0, now_ms - world.alloc_start.get(key, now_ms))
        ages.append(age)
        for node, n in sorted(per_node.items()):
            out.append(_Holding(node, age, n))
    return out, ages
