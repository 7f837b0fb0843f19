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
* **The tail.** Past the longest finished holding the history says nothing: a running allocation
  younger than it is taken to end by then at the latest (Efron's convention for the product-limit
  estimator's tail), one already older is not expected to end. If no node can be ready even when
  every younger allocation has ended, the first choice is not expected to fit (``never``).
* **Expected time** ``E[T] = ∫ P(not yet at t) dt``, summed on a fixed grid (``GRID``), each step
  counted at its start: ``P`` only falls, so the sum errs long. The sum stops once it reaches
  ``cap_ms`` (the answer is then "at least that long"), once what is left of it is surely under
  a second (``NEGLIGIBLE_MS``), or when every allocation counted has ended.

* **The tenant's quota** (``quota_estimate``). A first choice the tenant's own quota closes
  reopens when the tenant's running allocations of the model have given back what the quota
  lacks: the same survival and integral, with the tenant's holdings of each model as one group
  (quota is counted cluster-wide) in place of a node's.

Rules with no estimate to make: enough devices already free on one node -> ``free_now`` (0 ms);
no finished holding of the tier's models yet -> ``no_history`` (no basis to expect a release; the
engine then falls back at once rather than wait on a guess). Deterministic: the same world, time
and tier give the same answer (no clock, no randomness; sums run in a fixed order).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass

from audit.world import World

# Step boundaries (ms) of the integration grid: 15 s steps for the first 20 minutes (where a
# maxWait of minutes is decided), then steps growing by 10 % up to a week.
_FINE_STEP_MS, _FINE_UNTIL_MS, _GROWTH, _LAST_MS = 15_000, 1_200_000, 1.1, 7 * 24 * 3_600_000
# The integral stops once what is left of it is surely below this (P(not yet) times the time
# until every holding counted has ended): the estimate is short by less than a second.
NEGLIGIBLE_MS = 1_000.0


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
    """``basis``: ``free_now`` | ``estimate`` (``expected_ms`` is E[T]) | ``at_least`` (E[T] is at
    least ``expected_ms``, the cap) | ``never`` | ``no_history``; ``expected_ms`` is None for the
    last two. ``history`` finished holdings and ``running`` allocations of the models were read."""

    basis: str
    expected_ms: int | None
    history: int
    running: int


@dataclass(frozen=True)
class _Holding:
    node: str  # (the model, in a quota group)
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
    if any(f >= count for f in free.values()):
        return ReleaseEstimate("free_now", 0, len(finished), sum(1 for _ in _claims_of(world, wanted)))
    holdings, ages = _holdings(world, wanted, now_ms)
    running = len(ages)
    if not finished:
        return ReleaseEstimate("no_history", None, 0, running)
    # Everything the answer is read from: many instants and attempts (every parked pod of one
    # shape, every event between them) see the same, and the integral is then not done again.
    inputs = ("devices", count, cap_ms, tuple(sorted(free.items())), tuple(finished), tuple(ages),
              tuple((h.node, h.age_ms, h.devices) for h in holdings))
    known = _answers(world)
    hit = known.get(inputs)
    if hit is not None:
        return hit
    times, surv = survival(finished, ages)
    last = times[-1]
    # Past the longest finished holding there is no data: a holding younger than it is taken to
    # end by then (Efron's convention for the estimator's tail), an older one not to end at all.
    by_node: dict[str, list[_Holding]] = {}
    for h in holdings:
        if h.node in free and h.age_ms < last:
            by_node.setdefault(h.node, []).append(h)
    nodes = [(count - free[node], by_node[node]) for node in sorted(by_node)
             if free[node] + sum(h.devices for h in by_node[node]) >= count]
    known[inputs] = result = _expected(nodes, times, surv, cap_ms, len(finished), running)
    return result


def _answers(world: World) -> dict[tuple[object, ...], ReleaseEstimate]:
    """Estimates by everything they were read from (so a hit is the same answer by construction)."""
    known: dict[tuple[object, ...], ReleaseEstimate] = world.derived.setdefault("release_estimate_inputs", {})
    if len(known) > 4096:
        known.clear()
    return known


def quota_estimate(world: World, tenant: str, short: Mapping[str, int], models: tuple[str, ...], now_ms: int,
                   cap_ms: int) -> ReleaseEstimate:
    """When the tenant's own running allocations are expected to have given back ``short[m]``
    devices of some model ``m`` of ``models`` (what its quota lacks for the tier, per model:
    ``audit.scheduler.quota.quota_shortfall``), from the same survival of the models' holdings as
    ``estimate``. Quota is counted cluster-wide, so the tenant's holdings of a model form one group
    whatever their nodes (the group is ready once they have released ``short[m]``), and the tier
    reopens when some model's group is ready. Device-plugin pods have no allocation time and are
    not expected to release; ``running`` counts the tenant's holdings of the models."""
    cache = world.derived.setdefault("release_estimate", {})
    fast = ("quota", world.seq, now_ms, tenant, models, tuple(sorted(short.items())), cap_ms)
    hit = cache.get(fast)
    if hit is not None:
        return hit
    result = _quota_estimate(world, tenant, short, models, now_ms, cap_ms)
    if len(cache) > 4096:
        cache.clear()
    cache[fast] = result
    return result


def _quota_estimate(world: World, tenant: str, short: Mapping[str, int], models: tuple[str, ...], now_ms: int,
                    cap_ms: int) -> ReleaseEstimate:
    wanted = set(models)
    finished = [h for m in sorted(wanted) for h in world.finished.get(m, [])]
    _, ages = _holdings(world, wanted, now_ms)
    own: dict[str, list[_Holding]] = {}
    for key in sorted(world.charges):
        charge = world.charges[key]
        start = world.alloc_start.get(key)
        if charge.tenant != tenant or start is None:
            continue
        for m in sorted(wanted & charge.models.keys()):
            if short.get(m, 0) > 0:
                own.setdefault(m, []).append(_Holding(m, max(0, now_ms - start), charge.models[m]))
    running = sum(len(hs) for hs in own.values())
    if not finished:
        return ReleaseEstimate("no_history", None, 0, running)
    inputs = ("quota", cap_ms, tuple(sorted(short.items())), tuple(finished), tuple(ages),
              tuple((m, h.age_ms, h.devices) for m in sorted(own) for h in own[m]))
    known = _answers(world)
    hit = known.get(inputs)
    if hit is not None:
        return hit
    times, surv = survival(finished, ages)
    last = times[-1]
    groups = []
    for m in sorted(own):
        younger = [h for h in own[m] if h.age_ms < last]  # the tail convention, as in ``estimate``
        if sum(h.devices for h in younger) >= short[m]:
            groups.append((short[m], younger))
    known[inputs] = result = _expected(groups, times, surv, cap_ms, len(finished), running)
    return result


def _expected(groups: list[tuple[int, list[_Holding]]], times: list[int], surv: list[float], cap_ms: int,
              history: int, running: int) -> ReleaseEstimate:
    """E[T] for T the first time some group has released its ``need`` devices (groups independent;
    each holding's remaining time from the survival ``times``/``surv``, conditional on its age)."""
    if not groups:
        return ReleaseEstimate("never", None, history, running)
    last = times[-1]
    flat = [h for _, hs in groups for h in hs]
    base = {id(h): _s(times, surv, h.age_ms) for h in flat}
    horizon = last - min(h.age_ms for h in flat)  # by then every holding counted has ended
    inf = float("inf")
    # Each group's factor is constant until one of its holdings passes an event time: keep it with
    # the offset where it next changes, and jump the grid over stretches where nothing changes.
    factor = [1.0] * len(groups)
    until = [0.0] * len(groups)
    total = 0.0
    k = 0
    while k < len(GRID) - 1:
        t = GRID[k]
        if t >= horizon:
            return ReleaseEstimate("estimate", round(total), history, running)
        p = 1.0
        for i, (need, hs) in enumerate(groups):
            if until[i] <= t:
                factor[i], until[i] = _node_factor(need, hs, t, times, surv, base, last, inf)
            p *= factor[i]
        if p * (horizon - t) < NEGLIGIBLE_MS:  # all that is left of the integral, at most
            return ReleaseEstimate("estimate", round(total), history, running)
        # the next grid point at or after the first change (or the horizon)
        change = min(min(until), horizon)
        j = max(k + 1, bisect.bisect_left(GRID, change))
        if j >= len(GRID):
            break
        span = min(GRID[j], horizon) - t
        if total + p * span >= cap_ms:
            return ReleaseEstimate("at_least", cap_ms, history, running)
        total += p * span
        k = j
    return ReleaseEstimate("never", None, history, running)


def _node_factor(need: int, hs: list[_Holding], t: int, times: list[int], surv: list[float],
                 base: dict[int, float], last: int, inf: float) -> tuple[float, float]:
    """(P(the node is not ready at offset ``t``), the offset where that next changes)."""
    nxt = inf
    still: list[tuple[int, float]] = []
    for h in hs:
        a = h.age_ms + t
        if a >= last:
            p_held = 0.0
        else:
            idx = bisect.bisect_right(times, a)
            p_held = (1.0 if idx == 0 else surv[idx - 1]) / base[id(h)]
            change = times[idx] - h.age_ms
            if change < nxt:
                nxt = change
        still.append((h.devices, p_held))
    if need == 1:  # not ready while every holding on it still holds
        p = 1.0
        for _, p_held in still:
            p *= p_held
        return p, nxt
    return _not_ready(need, still), nxt


def _not_ready(need: int, still: list[tuple[int, float]]) -> float:
    """P(fewer than ``need`` devices released), each holding (devices, P(still held)) independent."""
    dist = [1.0] + [0.0] * need  # dist[k]: P(k devices released so far), k == need meaning "enough"
    for devices, p_held in still:
        if p_held >= 1.0:
            continue
        p_gone = 1.0 - p_held
        nxt = [0.0] * (need + 1)
        for k, pk in enumerate(dist):
            if pk == 0.0:
                continue
            nxt[k] += pk * p_held
            nxt[min(need, k + devices)] += pk * p_gone
        dist = nxt
    return sum(dist[:need])


def _claims_of(world: World, wanted: set[str]) -> list[str]:
    """Allocated claims holding a device of ``wanted`` models, in key order."""
    devices = world.devices
    out = []
    for key, ids in world.claim_devices.items():
        for dev_id in ids:
            dev = devices.get(dev_id)
            if dev is not None and dev.model in wanted:
                out.append(key)
                break
    return sorted(out)


def _holdings(world: World, wanted: set[str], now_ms: int) -> tuple[list[_Holding], list[int]]:
    """Running allocations holding devices of ``wanted`` models, per node in claim key order, and
    the age of each such claim (one censored observation each)."""
    out: list[_Holding] = []
    ages: list[int] = []
    devices = world.devices
    for key in _claims_of(world, wanted):
        per_node: dict[str, int] = {}
        for dev_id in world.claim_devices[key]:
            dev = devices.get(dev_id)
            if dev is not None and dev.model in wanted and not dev.unhealthy:
                per_node[dev.node] = per_node.get(dev.node, 0) + 1
        age = max(0, now_ms - world.alloc_start.get(key, now_ms))
        ages.append(age)
        for node, n in sorted(per_node.items()):
            out.append(_Holding(node, age, n))
    return out, ages
