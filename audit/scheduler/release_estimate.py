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
and tier give the same answer (no clock, no randomness; sums run in a fixed order). Questions
asked at one instant (the world's seq and the time) share what they read alike — the survival of
the models, the running allocations, and for one tenant's quota the holdings' rows and release
distributions, whatever gap each of its pods asks with — which changes no bit of any answer.
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
    free, finished, holdings, ages, inputs = _devices_seen(world, models, now_ms)
    if any(f >= count for f in free.values()):
        return ReleaseEstimate("free_now", 0, len(finished), len(ages))
    running = len(ages)
    if not finished:
        return ReleaseEstimate("no_history", None, 0, running)
    # Everything the answer is read from: many instants and attempts (every parked pod of one
    # shape, every event between them) see the same, and the integral is then not done again.
    return _remembered(world, "release_estimate_inputs", ("devices", count, cap_ms, inputs),
                       lambda: _by_nodes(count, cap_ms, free, finished, ages, holdings, running))


_Seen = tuple[dict[str, int], list[int], list[_Holding], list[int], tuple[object, ...]]


def _devices_seen(world: World, models: tuple[str, ...], now_ms: int) -> _Seen:
    """What ``estimate`` reads of ``models`` at one instant, whatever the count: the free healthy
    devices per node carrying them, the finished holdings, the running ones with their ages, and
    all of it as one key (read once per instant for every pod size)."""
    memo = world.derived_at(_INSTANT, (world.seq, now_ms))
    found: _Seen | None = memo.get(("devices", models))
    if found is None:
        wanted = set(models)
        free: dict[str, int] = {}
        for node in sorted(world.nodes):
            per = world.node_model.get(node)
            if per and any(m in per for m in wanted):
                free[node] = sum(per[m][1] for m in sorted(wanted) if m in per)
        finished = [h for m in sorted(wanted) for h in world.finished.get(m, [])]
        holdings, ages = _holdings(world, wanted, now_ms)
        inputs = (tuple(sorted(free.items())), tuple(finished), tuple(ages),
                  tuple((h.node, h.age_ms, h.devices) for h in holdings))
        found = memo[("devices", models)] = (free, finished, holdings, ages, inputs)
    return found


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
    return _expected(nodes, _Curve(times, surv), cap_ms, len(finished), running)


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
    running = sum(len(_quota_held(world, now_ms, tenant, gap, None)[0]) for gap in _one_per_model(gaps))
    basis = _basis(world, models, now_ms)
    if basis is None:
        return ReleaseEstimate("no_history", None, 0, running)
    curve, history = basis
    groups: list[_Group] = []
    for gap in gaps:
        own, lent, shared = _quota_held(world, now_ms, tenant, gap, (models, curve))
        group = _QuotaGroup(gap, own, lent, shared)
        if group.reachable():
            groups.append(group)
    return _expected(groups, curve, cap_ms, history, running)


def _one_per_model(gaps: Sequence[QuotaGap]) -> list[QuotaGap]:
    return list({g.model: g for g in gaps}.values())


# world.derived key: what is read from the world as it is at one time (its seq and the time):
# every parked pod's estimate on one wake reads the same holdings
_INSTANT = "release_estimate_instant"


def _basis(world: World, models: tuple[str, ...], now_ms: int) -> tuple[_Curve, int] | None:
    """The survival of holdings of ``models`` at one instant, with the number of finished holdings
    it was read from (None when there is none yet); read once per instant for every question."""
    memo = world.derived_at(_INSTANT, (world.seq, now_ms))
    key = ("basis", models)
    if key not in memo:
        wanted = set(models)
        finished = [h for m in sorted(wanted) for h in world.finished.get(m, [])]
        memo[key] = (_Curve(*_survival(finished, _holdings(world, wanted, now_ms)[1])), len(finished)) \
            if finished else None
    found: tuple[_Curve, int] | None = memo[key]
    return found


# What the quota questions about the same holdings at one instant share, per chunk of offsets (its
# first offset and width): the holdings' rows, their soonest change, and the release distributions
# worked out so far (by ask, see ``_QuotaGroup``).
_Shared = dict[tuple[int, int], tuple[npt.NDArray[np.float64], npt.NDArray[np.float64],
                                      dict[int, npt.NDArray[np.float64]]]]


def _quota_held(world: World, now_ms: int, tenant: str, gap: QuotaGap,
                seen: tuple[tuple[str, ...], _Curve] | None) -> tuple[list[_Holding], list[_Holding], _Shared]:
    """The tenant's own running holdings of the gap's model and those of the tenants that lend it
    (``gap.lenders``), in charge key order. With ``seen`` (the tier's models and their survival),
    only those the survival can see end (the tail convention, as in ``estimate``), and the tables
    every question about them at this instant shares (``_QuotaGroup``): the tenant's pods of
    several sizes, and those with pods ahead of them, ask with gaps of their own."""
    memo = world.derived_at(_INSTANT, (world.seq, now_ms))
    key = ("quota", tenant, gap.model, gap.lenders, seen[0] if seen else None)
    found: tuple[list[_Holding], list[_Holding], _Shared] | None = memo.get(key)
    if found is None:
        last = seen[1].last if seen else None
        lending = frozenset(gap.lenders)
        own: list[_Holding] = []
        lent: list[_Holding] = []
        for holder, h in _charged(world, now_ms, gap.model):
            if last is None or h.age_ms < last:
                if holder == tenant:
                    own.append(h)
                elif holder in lending:
                    lent.append(h)
        found = memo[key] = (own, lent, {})
    return found


def _charged(world: World, now_ms: int, model: str) -> list[tuple[str, _Holding]]:
    """Every running allocation's tenant and holding of ``model``, in charge key order; read once
    per instant for every tenant's question."""
    memo = world.derived_at(_INSTANT, (world.seq, now_ms))
    found: list[tuple[str, _Holding]] | None = memo.get(("charged", model))
    if found is None:
        started = world.alloc_start
        charged = sorted((key, charge.tenant, n, started[key]) for key, charge in world.charges.items()
                         if (n := charge.models.get(model)) is not None and key in started)
        found = memo[("charged", model)] = [(tenant, _Holding(model, max(0, now_ms - start), n))
                                             for _, tenant, n, start in charged]
    return found


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
    have given back what the ``QuotaGap`` asks.

    ``shared`` (from ``_within_curve``) keeps, per chunk of offsets, what every gap asked of the
    same holdings at one instant reads alike: their rows, the soonest change, and the release
    distributions to the largest count asked so far. Row ``k`` of a distribution reads only rows up
    to ``k`` (``_released``), so the first rows of one to a larger count are, bit for bit, the
    distribution to a smaller one."""

    def __init__(self, gap: QuotaGap, own: list[_Holding], lent: list[_Holding],
                 shared: _Shared | None = None) -> None:
        self.gap, self.own, self.lent, self.holdings = gap, own, lent, own + lent
        self.shared = shared

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

    def table(self, curve: _Curve, offsets: npt.NDArray[np.int64]) -> tuple[
            npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        if self.shared is None:
            return super().table(curve, offsets)
        width = len(offsets)
        chunk = (int(offsets[0]), width)
        kept = self.shared.get(chunk)
        if kept is None:
            p_held, change = curve.held_rows(self.holdings, offsets)
            kept = (p_held, _soonest(change, width), {})
            self.shared[chunk] = kept
        p_held, soonest, dists = kept
        released = []
        for which, (cap, lo, hi) in enumerate(self.asks()):
            dist = dists.get(which)
            if dist is None or len(dist) < cap:
                devices = [h.devices for h in self.holdings[lo:hi]]
                # room for the larger gaps the tenant's next pods tend to ask with, but none past
                # the count of every device given back: the rows after it are zero
                rows = max(cap, min(2 * cap, sum(devices) + 1))
                dist = dists[which] = _released(rows, devices, p_held[lo:hi])
            released.append(dist[:cap])
        return self.not_ready(released, width), soonest


def _tables(groups: Sequence[_Group], curve: _Curve, offsets: npt.NDArray[np.int64]) -> list[tuple[
        npt.NDArray[np.float64], npt.NDArray[np.float64]]]:
    """Each group's ``table``, the holdings of all of them read in one pass and their release
    distributions run side by side (``_released_many``): bit for bit what each group alone gives.
    Quota groups sharing their tables with other questions (``_QuotaGroup.shared``) read them there."""
    if any(isinstance(g, _QuotaGroup) and g.shared is not None for g in groups):
        return [g.table(curve, offsets) for g in groups]
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


def _chunk(groups: Sequence[_Group], curve: _Curve, offsets: npt.NDArray[np.int64]) -> tuple[list[float], list[float]]:
    """Per offset, P(no group ready yet) (the groups' factors multiplied in group order, as
    1.0 * f0 * f1 * ... would be) and the soonest offset where some group's factor changes."""
    nodes = [g for g in groups if type(g) is _NodeGroup]
    # (a node that needs nothing more is ready now: ``_estimate`` answers free_now before asking)
    if len(nodes) >= _SIDE_BY_SIDE and len(nodes) == len(groups) and min(g.need for g in nodes) > 0:
        return _node_chunk(nodes, curve, offsets)
    tables = _tables(groups, curve, offsets)
    return (np.multiply.reduce([f for f, _ in tables], axis=0).tolist(),
            np.minimum.reduce([u for _, u in tables], axis=0).tolist())


def _node_chunk(groups: Sequence[_NodeGroup], curve: _Curve, offsets: npt.NDArray[np.int64]) -> tuple[
        list[float], list[float]]:
    """``_chunk`` over nodes that each need one device or more, without a table per node: bit for
    bit what ``_tables`` gives. A node's P(not ready), fewer than ``need`` released, is its rows
    ``0 .. need - 1`` summed in ascending order (``_below``), which is the running sum of the rows
    at ``need - 1``, taken for every node at once from the distributions run side by side; the
    soonest change over the groups is the soonest over all their holdings (a minimum, in any
    grouping)."""
    width = len(offsets)
    holdings = [h for g in groups for h in g.holdings]
    p_all, change_all = curve.held_rows(holdings, offsets)
    caps = [g.need for g in groups]
    devices: list[list[int]] = []
    rows: list[npt.NDArray[np.float64]] = []
    start = 0
    for g in groups:
        end = start + len(g.holdings)
        devices.append([h.devices for h in g.holdings])
        rows.append(p_all[start:end])
        start = end
    below = np.cumsum(_released_stack(caps, devices, rows, width), axis=1)
    not_ready = below[np.arange(len(groups)), np.asarray(caps) - 1]
    return (np.multiply.reduce(not_ready, axis=0).tolist(),
            (change_all.min(axis=0) if len(change_all) else np.full(width, np.inf)).tolist())


# Grid points whose factors are computed together, a chunk more only when the integral goes on. A
# chunk costs per numpy call far more than per point: 96 points reach 83 minutes, past which few
# estimates go, where four in ten quota estimates of a contended day went past the first 48. Over
# many groups the first chunk is short: with hundreds of nodes each holding running allocations,
# P(no node ready) falls below the negligible within a grid step or two (every estimate of the
# first 20 minutes of a 1,000-node day ended by 30 s), and 96 points for each node would cost
# twenty times what the answer reads; over a few groups (a quota, a small cluster's nodes) the
# calls cost more than the points, and one chunk of 96 is cheaper. Every point's factors are
# computed element by element, so the chunks' widths change no bit of any answer.
_CHUNK = 96
_MANY_GROUPS, _FIRST_CHUNK = 32, 4


def _expected(groups: Sequence[_Group], curve: _Curve, cap_ms: int, history: int, running: int) -> ReleaseEstimate:
    """E[T] for T the first time some group is ready (groups independent; each holding's remaining
    time from the survival ``curve``, conditional on its age)."""
    if not groups:
        return ReleaseEstimate("never", None, history, running)
    horizon = curve.last - min(h.age_ms for g in groups for h in g.holdings)  # every holding ended by then
    # Each group's factor is constant until one of its holdings passes an event time; the tables
    # say where that next happens, and the sum jumps the grid over stretches where nothing changes.
    factors: list[float] = []  # per grid point of the chunk: P(no group ready yet)
    changes: list[float] = []  # and the soonest offset where some group's factor changes
    lo = hi = 0
    first = _FIRST_CHUNK if len(groups) >= _MANY_GROUPS else _CHUNK
    total = 0.0
    k = 0
    while k < len(GRID) - 1:
        t = GRID[k]
        if t >= horizon:
            return ReleaseEstimate("estimate", round(total), history, running)
        if k >= hi:
            lo, hi = k, min(len(GRID), k + (_CHUNK if hi else first))
            offsets = np.asarray(GRID[lo:hi], dtype=np.int64)
            factors, changes = _chunk(groups, curve, offsets)
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
    """``_released`` of each distribution, bit for bit, several run side by side
    (``_released_stack``)."""
    n = len(caps)
    if n < _SIDE_BY_SIDE or max(caps, default=0) == 0:
        return [_released(c, d, p) for c, d, p in zip(caps, devices, p_held, strict=True)]
    dist = _released_stack(caps, devices, p_held, width)
    return [dist[i, :c] for i, c in enumerate(caps)]


def _released_stack(caps: list[int], devices: list[list[int]], p_held: list[npt.NDArray[np.float64]],
                    width: int) -> npt.NDArray[np.float64]:
    """``_released`` of each distribution run side by side, as one array (distribution, k, offset)
    with rows up to the largest cap (and one more, of zeros): row ``k < caps[i]`` of
    distribution ``i`` is, bit for bit, row ``k`` of ``_released(caps[i], ...)``.

    Every element goes through the same operations in the same order as alone. A distribution
    with fewer holdings is padded with holdings certain to be still held (``x * 1.0`` and
    ``x + x' * 0.0`` leave a probability as it is); the rows past its own cap, which the common
    cap keeps, only ever feed rows above them and are cut off; and "k - d before it ended" reads a
    row of zeros where k < d, adding 0.0.
    """
    n = len(caps)
    top = max(caps, default=0)
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
    return dist


def _below(need: int, dist: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """P(fewer than ``need`` released), rows summed in ascending order."""
    out = np.zeros(dist.shape[1])
    for row in dist[:need]:
        out = out + row
    return out


def _holdings(world: World, wanted: set[str], now_ms: int) -> tuple[list[_Holding], list[int]]:
    """Running allocations holding devices of ``wanted`` models, per node in claim key order, and
    the age of each such claim (one censored observation each); read once per instant."""
    memo = world.derived_at(_INSTANT, (world.seq, now_ms))
    key = ("holdings", tuple(sorted(wanted)))
    found: tuple[list[_Holding], list[int]] | None = memo.get(key)
    if found is None:
        found = memo[key] = _read_holdings(world, wanted, now_ms)
    return found


# world.derived key: per allocated claim, its device list (by identity: an allocation sets a new
# one) with the models of its devices and its healthy devices per model and node, while the
# devices stay the same (``World.capacity_version``): every instant reads every running allocation,
# and between two instants few of them change.
_CLAIM_DEVICES = "release_estimate_claims"


def _read_holdings(world: World, wanted: set[str], now_ms: int) -> tuple[list[_Holding], list[int]]:
    facts: dict[str, tuple[list[str], frozenset[str], dict[str, dict[str, int]]]] = world.derived_at(
        _CLAIM_DEVICES, world.capacity_version)
    if len(facts) > 2 * len(world.claim_devices) + 1024:  # (claims released long ago)
        facts.clear()
    held: list[tuple[str, dict[str, dict[str, int]]]] = []  # claims holding a device of ``wanted``
    for key, ids in world.claim_devices.items():
        hit = facts.get(key)
        if hit is None or hit[0] is not ids:
            hit = facts[key] = (ids, *_devices_of(world, ids))
        if not hit[1].isdisjoint(wanted):
            held.append((key, hit[2]))
    out: list[_Holding] = []
    ages: list[int] = []
    for key, healthy in sorted(held, key=lambda kh: kh[0]):
        per_node: dict[str, int] = {}
        for m in wanted:
            for node, n in healthy.get(m, {}).items():
                per_node[node] = per_node.get(node, 0) + n
        age = max(0, now_ms - world.alloc_start.get(key, now_ms))
        ages.append(age)
        for node, n in sorted(per_node.items()):
            out.append(_Holding(node, age, n))
    return out, ages


def _devices_of(world: World, ids: list[str]) -> tuple[frozenset[str], dict[str, dict[str, int]]]:
    """The models of an allocation's devices, and its healthy devices per model and node."""
    models: set[str] = set()
    healthy: dict[str, dict[str, int]] = {}
    for dev_id in ids:
        dev = world.devices.get(dev_id)
        if dev is None:
            continue
        models.add(dev.model)
        if not dev.unhealthy:
            per_node = healthy.setdefault(dev.model, {})
            per_node[dev.node] = per_node.get(dev.node, 0) + 1
    return frozenset(models), healthy
