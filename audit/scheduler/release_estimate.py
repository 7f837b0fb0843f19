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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from audit.scheduler.quota import QuotaGap
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


class _Holding(NamedTuple):
    """One running allocation as an estimate reads it. A tuple, not a frozen dataclass: every
    instant builds one per running allocation, and a frozen dataclass's ``__init__`` costs
    several times a tuple's."""

    node: str  # (the model, in a quota group)
    age_ms: int
    devices: int  # healthy devices of the tier's models it will give back


def survival(finished: list[int], ages: list[int]) -> tuple[list[int], list[float]]:
    """Kaplan–Meier: (event times ascending, S just after each). Censored ages tie after events."""
    times, surv = _survival(finished, ages)
    return times.tolist(), surv.tolist()


def _survival(finished: list[int], ages: list[int]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """``survival`` as arrays. At each event time ``t`` the risk set is every holding less those
    that ended before ``t`` and those censored before it (a censored age equal to ``t`` is still
    at risk); S is the running product of ``1 - ended / at risk`` in time order, factor by factor
    as a loop over the times would multiply them."""
    times, ended = np.unique(np.asarray(finished, dtype=np.int64), return_counts=True)
    censored = np.sort(np.asarray(ages, dtype=np.int64))
    at_risk = (len(finished) + len(censored) - (np.cumsum(ended) - ended)
               - np.searchsorted(censored, times, side="left"))
    return times, np.cumprod(1.0 - ended / at_risk, dtype=np.float64)


def estimate(world: World, models: tuple[str, ...], count: int, now_ms: int, cap_ms: int) -> ReleaseEstimate:
    """When ``count`` devices of ``models`` are expected free on one node (see the module docstring)."""
    return _remembered(world, "release_estimate", (world.seq, now_ms, models, count, cap_ms),
                       lambda: _estimate(world, models, count, now_ms, cap_ms))


def _estimate(world: World, models: tuple[str, ...], count: int, now_ms: int, cap_ms: int) -> ReleaseEstimate:
    wanted = set(models)
    free: dict[str, int] = {}
    for node in sorted(world.nodes):
        per = world.node_model.get(node)
        if per and any(m in per for m in wanted):
            free[node] = sum(per[m][1] for m in sorted(wanted) if m in per)
    finished = [h for m in sorted(wanted) for h in world.finished.get(m, [])]
    holdings, ages = _holdings(world, wanted, now_ms)
    if any(f >= count for f in free.values()):
        return ReleaseEstimate("free_now", 0, len(finished), len(ages))
    running = len(ages)
    if not finished:
        return ReleaseEstimate("no_history", None, 0, running)
    # Everything the answer is read from: many instants and attempts (every parked pod of one
    # shape, every event between them) see the same, and the integral is then not done again.
    inputs = ("devices", count, cap_ms, tuple(sorted(free.items())), tuple(finished), tuple(ages),
              tuple((h.node, h.age_ms, h.devices) for h in holdings))
    return _remembered(world, "release_estimate_inputs", inputs,
                       lambda: _by_nodes(count, cap_ms, free, finished, ages, holdings, running))


def _by_nodes(count: int, cap_ms: int, free: dict[str, int], finished: list[int], ages: list[int],
              holdings: list[_Holding], running: int) -> ReleaseEstimate:
    times, surv = _survival(finished, ages)
    last = int(times[-1])
    # Past the longest finished holding there is no data: a holding younger than it is taken to
    # end by then (Efron's convention for the estimator's tail), an older one not to end at all.
    by_node: dict[str, list[_Holding]] = {}
    for h in holdings:
        if h.node in free and h.age_ms < last:
            by_node.setdefault(h.node, []).append(h)
    nodes = [_NodeGroup(count - free[node], by_node[node]) for node in sorted(by_node)
             if free[node] + sum(h.devices for h in by_node[node]) >= count]
    return _expected(nodes, times, surv, cap_ms, len(finished), running)


def _remembered(world: World, name: str, key: tuple[object, ...],
                compute: Callable[[], ReleaseEstimate]) -> ReleaseEstimate:
    """``compute()``'s answer, kept in ``world.derived[name]`` under ``key`` (a bounded memo). Keys
    are either the world's seq with the question, or everything the answer is read from, so a hit
    is the same answer by construction."""
    known: dict[tuple[object, ...], ReleaseEstimate] = world.derived.setdefault(name, {})
    hit = known.get(key)
    if hit is None:
        hit = compute()
        if len(known) > 4096:
            known.clear()
        known[key] = hit
    return hit


def quota_estimate(world: World, tenant: str, gaps: Sequence[QuotaGap], models: tuple[str, ...], now_ms: int,
                   cap_ms: int) -> ReleaseEstimate:
    """When a tier the tenant's quota closes is expected to reopen: for some model, the tenant's own
    running allocations and those of the other tenants holding a quota of it have given back what
    its ``QuotaGap`` asks (``audit.scheduler.quota``), read from the same survival of the models'
    holdings as ``estimate``. Quota is counted cluster-wide, so each model's holdings form one
    group whatever their nodes; the tier reopens when some model's group is ready. Device-plugin
    pods have no allocation time and are not expected to release; ``running`` counts the tenant's
    own holdings of the models."""
    return _remembered(world, "release_estimate", ("quota", world.seq, now_ms, tenant, models, tuple(gaps), cap_ms),
                       lambda: _quota_estimate(world, tenant, gaps, models, now_ms, cap_ms))


def _quota_estimate(world: World, tenant: str, gaps: Sequence[QuotaGap], models: tuple[str, ...], now_ms: int,
                    cap_ms: int) -> ReleaseEstimate:
    wanted = set(models)
    finished = [h for m in sorted(wanted) for h in world.finished.get(m, [])]
    _, ages = _holdings(world, wanted, now_ms)
    held = _quota_holdings(world, tenant, gaps, now_ms)
    running = sum(len(own) for own, _ in held.values())
    if not finished:
        return ReleaseEstimate("no_history", None, 0, running)
    inputs = ("quota", cap_ms, tuple(gaps), tuple(finished), tuple(ages),
              tuple((m, i, h.age_ms, h.devices) for m in sorted(held) for i in (0, 1) for h in held[m][i]))
    return _remembered(world, "release_estimate_inputs", inputs,
                       lambda: _by_quota_groups(gaps, cap_ms, finished, ages, held, running))


# world.derived key: what is read from the world as it is at one time (its seq and the time):
# every parked pod's estimate on one wake reads the same holdings
_INSTANT = "release_estimate_instant"


def _quota_holdings(world: World, tenant: str, gaps: Sequence[QuotaGap],
                    now_ms: int) -> dict[str, tuple[list[_Holding], list[_Holding]]]:
    """Per model of ``gaps``: (the tenant's own running holdings, the lenders'), each in charge key
    order; read once per instant for every question about the same tenant and lenders."""
    lenders = {g.model: frozenset(g.lenders) for g in gaps}
    asked = ("quota", tenant, tuple(sorted(lenders.items())))
    memo = world.derived_at(_INSTANT, (world.seq, now_ms))
    found: dict[str, tuple[list[_Holding], list[_Holding]]] | None = memo.get(asked)
    if found is not None:
        return found
    by_model = _charged(world, now_ms)
    held: dict[str, tuple[list[_Holding], list[_Holding]]] = {}
    for m, lending in lenders.items():
        own: list[_Holding] = []
        lent: list[_Holding] = []
        for holder, h in by_model.get(m, ()):
            if holder == tenant:
                own.append(h)
            elif holder in lending:
                lent.append(h)
        held[m] = (own, lent)
    memo[asked] = held
    return held


def _charged(world: World, now_ms: int) -> dict[str, list[tuple[str, _Holding]]]:
    """Per model, every running allocation's tenant and holding of it, in charge key order; read
    once per instant for every tenant's question."""
    memo = world.derived_at(_INSTANT, (world.seq, now_ms))
    found: dict[str, list[tuple[str, _Holding]]] | None = memo.get("charged")
    if found is None:
        found = memo["charged"] = {}
        for key in sorted(world.charges):
            start = world.alloc_start.get(key)
            if start is None:
                continue
            charge = world.charges[key]
            for m, n in charge.models.items():
                found.setdefault(m, []).append((charge.tenant, _Holding(m, max(0, now_ms - start), n)))
    return found


def _by_quota_groups(gaps: Sequence[QuotaGap], cap_ms: int, finished: list[int], ages: list[int],
                     held: dict[str, tuple[list[_Holding], list[_Holding]]], running: int) -> ReleaseEstimate:
    times, surv = _survival(finished, ages)
    last = int(times[-1])
    groups: list[_Group] = []
    for gap in gaps:
        # the tail convention, as in ``estimate``
        own, lent = ([h for h in hs if h.age_ms < last] for hs in held[gap.model])
        group = _QuotaGroup(gap, own, lent)
        if group.reachable():
            groups.append(group)
    return _expected(groups, times, surv, cap_ms, len(finished), running)


class _Curve:
    """The survival ``times``/``surv`` as arrays, read for many holdings at many offsets at once."""

    def __init__(self, times: npt.ArrayLike, surv: npt.ArrayLike) -> None:
        self.times = np.asarray(times, dtype=np.int64)
        # ``at[k]``: S just after ``times[k - 1]`` (``at[0] == 1``), so ``at[bisect_right(times, a)]`` is S(a)
        self.at = np.concatenate((np.ones(1), np.asarray(surv, dtype=np.float64)))
        self.last = int(self.times[-1])

    def held_rows(self, hs: Sequence[_Holding], offsets: npt.NDArray[np.int64]) -> tuple[
            npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """P(still held at each offset, conditional on its age) and the offset where that next
        changes (inf: never), per holding (rows) and offset: element by element, so one call for
        the holdings of many groups gives each group's rows."""
        if not hs:
            return np.ones((0, len(offsets))), np.full((0, len(offsets)), np.inf)
        ages = np.fromiter((h.age_ms for h in hs), dtype=np.int64, count=len(hs))
        base = self.at[np.searchsorted(self.times, ages, side="right")]
        a = ages[:, None] + offsets[None, :]
        idx = np.searchsorted(self.times, a, side="right")
        alive = a < self.last  # past the longest finished holding, held no more (the tail convention)
        p_held = np.where(alive, self.at[idx] / base[:, None], 0.0)
        change = np.where(alive, self.times[np.minimum(idx, len(self.times) - 1)] - ages[:, None], np.inf)
        return p_held, change


def _soonest(change: npt.NDArray[np.float64], width: int) -> npt.NDArray[np.float64]:
    """Per offset, the soonest change among the rows (inf with no rows)."""
    return change.min(axis=0) if len(change) else np.full(width, np.inf)


# What a group asks of the release distributions: (cap, first row, end row) among its holdings.
_Ask = tuple[int, int, int]


class _Group:
    """Holdings that make something ready once enough of them have ended (see ``table``)."""

    holdings: list[_Holding]

    def asks(self) -> list[_Ask]:
        """The release distributions ``not_ready`` reads, over which of the group's holdings."""
        raise NotImplementedError

    def not_ready(self, released: list[npt.NDArray[np.float64]], width: int) -> npt.NDArray[np.float64]:
        """Per offset, P(not ready), from the distributions ``asks`` named (in that order)."""
        raise NotImplementedError

    def table(self, curve: _Curve, offsets: npt.NDArray[np.int64]) -> tuple[
            npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Per offset: P(not ready), and the offset where that next changes."""
        return _tables([self], curve, offsets)[0]


class _NodeGroup(_Group):
    """A node: ready once ``need`` more devices of the tier are free on it."""

    def __init__(self, need: int, holdings: list[_Holding]) -> None:
        self.need, self.holdings = need, holdings

    def asks(self) -> list[_Ask]:
        return [(self.need, 0, len(self.holdings))]

    def not_ready(self, released: list[npt.NDArray[np.float64]], width: int) -> npt.NDArray[np.float64]:
        # with need 1 this is the product of P(still held) over the holdings, each giving back at
        # least one device: row 0 of the recurrence multiplies them in turn from 1.0
        return _below(self.need, released[0])


class _QuotaGroup(_Group):
    """A model's quota: ready once the tenant's own (``own``) and the lenders' (``lent``) holdings
    have given back what the ``QuotaGap`` asks."""

    def __init__(self, gap: QuotaGap, own: list[_Holding], lent: list[_Holding]) -> None:
        self.gap, self.own, self.lent, self.holdings = gap, own, lent, own + lent

    def _ready(self, i: int, j: int) -> bool:
        g = self.gap
        return i >= g.to_nominal or ((g.to_limit is None or i >= g.to_limit) and i + j >= g.together)

    def reachable(self) -> bool:
        return self._ready(sum(h.devices for h in self.own), sum(h.devices for h in self.lent))

    def _counted(self) -> int:
        """The counts ``i`` of the tenant's own devices given back whose terms can be non-zero:
        the gap can stay open with ``i`` only while ``i`` is below ``to_nominal`` and below
        ``to_limit`` or ``together``; past both the lenders need give back nothing, and each such
        term adds P(i) times 0.0."""
        g = self.gap
        return max(0, min(g.to_nominal, max(g.together, g.to_limit or 0)))

    def asks(self) -> list[_Ask]:
        if self.gap.to_nominal <= 0:
            return []
        mine = len(self.own)
        return [(self._counted(), 0, mine), (max(0, self.gap.together), mine, len(self.holdings))]

    def not_ready(self, released: list[npt.NDArray[np.float64]], width: int) -> npt.NDArray[np.float64]:
        g = self.gap
        p = np.zeros(width)
        if g.to_nominal <= 0:
            return p
        mine, theirs = released
        below = [p]  # below[n]: P(fewer than n given back by the lenders), n up to together
        for row in theirs:
            below.append(below[-1] + row)
        for i in range(self._counted()):
            if g.to_limit is not None and i < g.to_limit:
                p = p + mine[i]  # over its borrowing limit whatever others lend
                continue
            short = g.together - i  # what the lenders must give back with i of the tenant's own
            p = p + mine[i] * below[min(max(0, short), len(theirs))]
        return p


def _tables(groups: Sequence[_Group], curve: _Curve, offsets: npt.NDArray[np.int64]) -> list[tuple[
        npt.NDArray[np.float64], npt.NDArray[np.float64]]]:
    """Each group's ``table``, the holdings of all of them read in one pass and their release
    distributions run side by side (``_released_many``): bit for bit what each group alone gives."""
    width = len(offsets)
    p_all, change_all = curve.held_rows([h for g in groups for h in g.holdings], offsets)
    caps: list[int] = []
    devices: list[list[int]] = []
    rows: list[npt.NDArray[np.float64]] = []
    spans: list[tuple[int, int]] = []
    start = 0
    for g in groups:
        asks = g.asks()
        spans.append((start, len(asks)))
        for cap, lo, hi in asks:
            caps.append(cap)
            devices.append([h.devices for h in g.holdings[lo:hi]])
            rows.append(p_all[start + lo:start + hi])
        start += len(g.holdings)
    dists = _released_many(caps, devices, rows, width)
    out = []
    first_ask = 0
    for g, (first_row, n_asks) in zip(groups, spans, strict=True):
        released = dists[first_ask:first_ask + n_asks]
        first_ask += n_asks
        p = g.not_ready(released, width)
        out.append((p, _soonest(change_all[first_row:first_row + len(g.holdings)], width)))
    return out


# Grid points whose factors are computed together, a chunk more only when the integral goes on. A
# chunk costs per numpy call far more than per point: 96 points reach 83 minutes, past which few
# estimates go, where four in ten quota estimates of a contended day went past the first 48.
_CHUNK = 96


def _expected(groups: Sequence[_Group], times: npt.NDArray[np.int64], surv: npt.NDArray[np.float64], cap_ms: int,
              history: int, running: int) -> ReleaseEstimate:
    """E[T] for T the first time some group is ready (groups independent; each holding's remaining
    time from the survival ``times``/``surv``, conditional on its age)."""
    if not groups:
        return ReleaseEstimate("never", None, history, running)
    curve = _Curve(times, surv)
    horizon = curve.last - min(h.age_ms for g in groups for h in g.holdings)  # every holding ended by then
    # Each group's factor is constant until one of its holdings passes an event time; the tables
    # say where that next happens, and the sum jumps the grid over stretches where nothing changes.
    factors: list[float] = []  # per grid point of the chunk: P(no group ready yet)
    changes: list[float] = []  # and the soonest offset where some group's factor changes
    lo = hi = 0
    total = 0.0
    k = 0
    while k < len(GRID) - 1:
        t = GRID[k]
        if t >= horizon:
            return ReleaseEstimate("estimate", round(total), history, running)
        if k >= hi:
            lo, hi = k, min(len(GRID), k + _CHUNK)
            offsets = np.asarray(GRID[lo:hi], dtype=np.int64)
            tables = _tables(groups, curve, offsets)
            # the groups' factors multiplied in group order, as 1.0 * f0 * f1 * ... would be
            factors = np.multiply.reduce([f for f, _ in tables], axis=0).tolist()
            changes = np.minimum.reduce([u for _, u in tables], axis=0).tolist()
        p = factors[k - lo]
        change = min(float(horizon), changes[k - lo])
        if p * (horizon - t) < NEGLIGIBLE_MS:  # all that is left of the integral, at most
            return ReleaseEstimate("estimate", round(total), history, running)
        # the next grid point at or after the first change (or the horizon)
        j = max(k + 1, bisect.bisect_left(GRID, change))
        if j >= len(GRID):
            break
        span = min(GRID[j], horizon) - t
        if total + p * span >= cap_ms:
            return ReleaseEstimate("at_least", cap_ms, history, running)
        total += p * span
        k = j
    return ReleaseEstimate("never", None, history, running)


def _released(cap: int, devices: list[int], p_held: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Row ``k`` (``k < cap``): P(exactly k devices released so far) per offset; each holding
    (devices, its row of P(still held)) independent. Every question asks whether fewer than
    ``cap`` were released, so counts of ``cap`` or more are never told apart (nor kept). The sums
    run in one fixed order (holdings in turn), the same at every offset."""
    dist = np.zeros((cap, p_held.shape[1]))
    if not cap:
        return dist
    # up to the first holding that gives back fewer than cap, nothing reaches a count below cap:
    # row 0 is 1.0 times each P(still held) in turn, which one sequential product gives
    first = next((i for i, d in enumerate(devices) if d < cap), len(devices))
    dist[0] = np.multiply.reduce(p_held[:first], axis=0) if first else 1.0
    for d, held, gone in zip(devices[first:], p_held[first:], 1.0 - p_held[first:], strict=True):
        # k released after this holding: k with it still held, or k - d before it ended
        nxt = dist * held
        if d < cap:
            nxt[d:] += dist[:cap - d] * gone
        dist = nxt
    return dist


# From this many distributions on, running them side by side costs less than one after another.
_SIDE_BY_SIDE = 3


def _released_many(caps: list[int], devices: list[list[int]], p_held: list[npt.NDArray[np.float64]],
                   width: int) -> list[npt.NDArray[np.float64]]:
    """``_released`` of each distribution, bit for bit, several run side by side.

    Every element goes through the same operations in the same order as alone. A distribution
    with fewer holdings is padded with holdings certain to be still held (``x * 1.0`` and
    ``x + x' * 0.0`` leave a probability as it is); the rows past its own cap, which the common
    cap keeps, only ever feed rows above them and are cut off; and "k - d before it ended" reads a
    row of zeros where k < d, adding 0.0.
    """
    n = len(caps)
    top = max(caps, default=0)
    if n < _SIDE_BY_SIDE or top == 0:
        return [_released(c, d, p) for c, d, p in zip(caps, devices, p_held, strict=True)]
    steps = max(len(d) for d in devices)
    held = np.ones((n, steps, width))
    # a padding holding adds "k - d before it ended" times 0.0 whatever its d: it takes the d of
    # the longest distribution's holding there, so that more steps shift every row alike
    longest = max(devices, key=len)
    gives = np.array([d + longest[len(d):] for d in devices], dtype=np.int64).reshape(n, steps)
    for i, rows in enumerate(p_held):
        held[i, :len(rows)] = rows
    gone = 1.0 - held
    # the source row of "k - d" per distribution, step and k; row ``top`` stays zero throughout
    source = np.arange(top)[None, None, :] - gives[:, :, None]
    source[source < 0] = top
    which = np.arange(n)[:, None]
    uniform = (gives == gives[:1]).all(axis=0).tolist()  # steps where every distribution's d is the same
    dist = np.zeros((n, top + 1, width))
    dist[:, 0] = 1.0
    for s in range(steps):
        nxt = dist * held[:, s, None, :]
        if not uniform[s]:
            nxt[:, :top] += dist[which, source[:, s]] * gone[:, s, None, :]
        elif (d := int(gives[0, s])) < top:
            nxt[:, d:top] += dist[:, :top - d] * gone[:, s, None, :]
        dist = nxt
    return [dist[i, :c] for i, c in enumerate(caps)]


def _below(need: int, dist: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """P(fewer than ``need`` released), rows summed in ascending order."""
    out = np.zeros(dist.shape[1])
    for row in dist[:need]:
        out = out + row
    return out


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
    the age of each such claim (one censored observation each); read once per instant."""
    memo = world.derived_at(_INSTANT, (world.seq, now_ms))
    key = ("holdings", tuple(sorted(wanted)))
    found: tuple[list[_Holding], list[int]] | None = memo.get(key)
    if found is None:
        found = memo[key] = _read_holdings(world, wanted, now_ms)
    return found


def _read_holdings(world: World, wanted: set[str], now_ms: int) -> tuple[list[_Holding], list[int]]:
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
