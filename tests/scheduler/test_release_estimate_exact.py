"""The estimate's arithmetic is the product-limit and release recurrences taken one factor at a time.

A held pod's record carries its estimate, so the record's digest depends on every bit of it: the
vectorised survival and release distributions must give, bit for bit, what the plain loops over
event times and holdings give (written out here independently, in the order the module's
docstrings state).
"""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from audit.scheduler import release_estimate
from audit.scheduler.quota import QuotaGap
from audit.scheduler.release_estimate import (
    _chunk,
    _Curve,
    _expected,
    _Holding,
    _NodeGroup,
    _QuotaGroup,
    _released,
    _released_many,
    _Shared,
    _tables,
    survival,
)


def product_limit(finished: list[int], ages: list[int]) -> tuple[list[int], list[float]]:
    """Kaplan–Meier by hand: at each event time, in ascending order, S *= 1 - ended / at risk."""
    times = sorted(set(finished))
    s, out = 1.0, []
    for t in times:
        at_risk = sum(1 for f in finished if f >= t) + sum(1 for a in ages if a >= t)
        ended = finished.count(t)
        s *= 1.0 - ended / at_risk
        out.append(s)
    return times, out


def released_by_hand(cap: int, width: int, devices: list[int], p_held: list[list[float]]) -> list[list[float]]:
    """P(exactly k released), k < cap, per offset, holding after holding: k with the holding still
    held, plus k - d before it if it ended."""
    dist = [[1.0 if k == 0 else 0.0 for _ in range(width)] for k in range(cap)]
    for d, held in zip(devices, p_held, strict=True):
        nxt = [[0.0] * width for _ in range(cap)]
        for w in range(width):
            h, g = held[w], 1.0 - held[w]
            for k in range(cap):
                nxt[k][w] = dist[k][w] * h + (dist[k - d][w] * g if d <= k else 0.0)
        dist = nxt
    return dist


def released_by_enumeration(cap: int, width: int, devices: list[int], p_held: list[list[float]]) -> list[list[float]]:
    """The same from its meaning: over every way the holdings can have ended, its probability
    where exactly k devices were given back."""
    out = [[0.0] * width for _ in range(cap)]
    for ended in itertools.product((False, True), repeat=len(devices)):
        k = sum(d for d, gone in zip(devices, ended, strict=True) if gone)
        if k >= cap:
            continue
        for w in range(width):
            p = 1.0
            for gone, held in zip(ended, p_held, strict=True):
                p *= (1.0 - held[w]) if gone else held[w]
            out[k][w] += p
    return out


@given(finished=st.lists(st.integers(1, 500), min_size=1, max_size=60),
       ages=st.lists(st.integers(0, 600), max_size=60))
def test_the_survival_is_the_product_limit_bit_for_bit(finished: list[int], ages: list[int]) -> None:
    assert survival(finished, ages) == product_limit(finished, ages)


probability = st.one_of(st.just(0.0), st.just(1.0), st.floats(0.0, 1.0))


@given(cap=st.integers(0, 6), width=st.integers(1, 4),
       holdings=st.lists(st.tuples(st.integers(0, 8), st.lists(probability, min_size=4, max_size=4)), max_size=8))
def test_the_release_distribution_is_the_recurrence_bit_for_bit(cap: int, width: int,
                                                                  holdings: list[tuple[int, list[float]]]) -> None:
    devices = [d for d, _ in holdings]
    p_held = [row[:width] for _, row in holdings]
    got = _released(cap, devices, np.array(p_held, dtype=np.float64).reshape(len(holdings), width))
    assert got.shape == (cap, width)
    assert got.tolist() == released_by_hand(cap, width, devices, p_held)
    assert np.allclose(got, np.array(released_by_enumeration(cap, width, devices, p_held)).reshape(cap, width),
                       atol=1e-12)


distribution = st.tuples(st.integers(0, 6),
                         st.lists(st.tuples(st.integers(0, 8), st.lists(probability, min_size=4, max_size=4)),
                                  max_size=8))


@given(width=st.integers(1, 4), distributions=st.lists(distribution, max_size=6))
def test_distributions_run_side_by_side_are_each_the_recurrence_bit_for_bit(
        width: int, distributions: list[tuple[int, list[tuple[int, list[float]]]]]) -> None:
    caps = [cap for cap, _ in distributions]
    devices = [[d for d, _ in holdings] for _, holdings in distributions]
    p_held = [[row[:width] for _, row in holdings] for _, holdings in distributions]
    got = _released_many(caps, devices, [np.array(p, dtype=np.float64).reshape(len(p), width) for p in p_held], width)
    assert [g.tolist() for g in got] == [released_by_hand(cap, width, d, p)
                                         for cap, d, p in zip(caps, devices, p_held, strict=True)]


def _holdings(own: list[tuple[int, int]], lent: list[tuple[int, int]], finished: list[int]
              ) -> tuple[list[_Holding], list[_Holding], _Curve, np.ndarray]:
    """The tenant's own and lent H100 holdings (age, devices) still on the survival curve of
    ``finished``, that curve, and the offsets the tables are read at."""
    mine = [_Holding("H100", a, d) for a, d in own]
    theirs = [_Holding("H100", a, d) for a, d in lent]
    times, surv = survival(finished, [h.age_ms for h in mine + theirs])
    mine = [h for h in mine if h.age_ms < times[-1]]
    theirs = [h for h in theirs if h.age_ms < times[-1]]
    return mine, theirs, _Curve(times, surv), np.array([0, 5, 17, 40], dtype=np.int64)


@given(own=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 3)), max_size=6),
       lent=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 3)), max_size=6),
       finished=st.lists(st.integers(1, 60), min_size=1, max_size=12),
       to_nominal=st.integers(1, 8), to_limit=st.one_of(st.none(), st.integers(-3, 8)),
       together=st.integers(-2, 8))
def test_the_quota_groups_chance_of_not_yet_sums_every_count_of_its_own_bit_for_bit(
        own: list[tuple[int, int]], lent: list[tuple[int, int]], finished: list[int], to_nominal: int,
        to_limit: int | None, together: int) -> None:
    """Over i = 0 .. to_nominal - 1 of the tenant's own given back, P(i) times P(the lenders give
    back too little), as the rule reads, in that order: the terms the group leaves out add 0.0."""
    mine, theirs, curve, offsets = _holdings(own, lent, finished)
    held = curve.held_rows(mine + theirs, offsets)[0].tolist()
    width = len(offsets)
    p_mine = released_by_hand(to_nominal, width, [h.devices for h in mine], held[:len(mine)])
    p_theirs = released_by_hand(max(0, together), width, [h.devices for h in theirs], held[len(mine):])
    want = [0.0] * width
    for w in range(width):
        below = [0.0]
        for row in p_theirs:
            below.append(below[-1] + row[w])
        for i in range(to_nominal):
            if to_limit is not None and i < to_limit:
                want[w] = want[w] + p_mine[i][w]
            else:
                want[w] = want[w] + p_mine[i][w] * below[min(max(0, together - i), len(p_theirs))]
    group = _QuotaGroup(QuotaGap("H100", to_nominal, to_limit, together, ("beta",)), mine, theirs)
    assert group.table(curve, offsets)[0].tolist() == want


gap = st.tuples(st.integers(1, 8), st.one_of(st.none(), st.integers(-3, 8)), st.integers(-2, 8))


@given(own=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 3)), max_size=6),
       lent=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 3)), max_size=6),
       finished=st.lists(st.integers(1, 60), min_size=1, max_size=12),
       gaps=st.lists(gap, min_size=1, max_size=5))
def test_quota_groups_sharing_their_holdings_tables_give_each_gap_its_own_table_bit_for_bit(
        own: list[tuple[int, int]], lent: list[tuple[int, int]], finished: list[int],
        gaps: list[tuple[int, int | None, int]]) -> None:
    """The tenant's pods of several sizes ask about the same holdings with gaps of their own, in
    any order: each reads the rows and release distributions the first worked out (to a larger
    count when a later gap needs more), and gets what a group alone would."""
    mine, theirs, curve, offsets = _holdings(own, lent, finished)
    shared: _Shared = {}
    for to_nominal, to_limit, together in gaps:
        g = QuotaGap("H100", to_nominal, to_limit, together, ("beta",))
        alone = _QuotaGroup(g, mine, theirs).table(curve, offsets)
        sharing = _QuotaGroup(g, mine, theirs, shared).table(curve, offsets)
        assert [a.tobytes() for a in sharing] == [a.tobytes() for a in alone]


node = st.tuples(st.integers(1, 4), st.lists(st.tuples(st.integers(0, 50), st.integers(1, 4)), min_size=1, max_size=5))


def _nodes(nodes: list[tuple[int, list[tuple[int, int]]]], finished: list[int]) -> tuple[list[_NodeGroup], _Curve]:
    """Node groups (need, holdings of (age, devices)) on the survival curve of ``finished``."""
    ages = [a for _, hs in nodes for a, _ in hs]
    times, surv = survival(finished, ages)
    return [_NodeGroup(need, [_Holding(f"node-{i}", a, d) for a, d in hs]) for i, (need, hs) in enumerate(nodes)], \
        _Curve(times, surv)


@given(nodes=st.lists(node, min_size=1, max_size=9), finished=st.lists(st.integers(1, 70), min_size=1, max_size=12),
       offsets=st.lists(st.integers(0, 80), min_size=1, max_size=6))
def test_the_chunk_over_many_nodes_is_the_product_of_each_nodes_table_bit_for_bit(
        nodes: list[tuple[int, list[tuple[int, int]]]], finished: list[int], offsets: list[int]) -> None:
    """Over three or more nodes the chunk skips the table per node (``_node_chunk``): its factors
    and soonest changes are, bit for bit, the per-node tables multiplied and taken the least of in
    node order."""
    groups, curve = _nodes(nodes, finished)
    at = np.array(sorted(offsets), dtype=np.int64)
    tables = _tables(groups, curve, at)
    want = (np.multiply.reduce([f for f, _ in tables], axis=0).tolist(),
            np.minimum.reduce([u for _, u in tables], axis=0).tolist())
    assert _chunk(groups, curve, at) == want


@given(nodes=st.lists(node, min_size=1, max_size=40), finished=st.lists(st.integers(1, 3_000_000), min_size=1,
                                                                          max_size=12),
       cap_ms=st.integers(1, 1_200_000))
def test_the_estimate_is_the_same_whatever_the_width_of_the_first_chunk(
        nodes: list[tuple[int, list[tuple[int, int]]]], finished: list[int], cap_ms: int) -> None:
    """Many nodes start the integral with a short chunk of grid points; every point's factors are
    computed element by element, so the answer is the one a single chunk of 96 gives."""
    groups, curve = _nodes([(need, [(a * 60_000, d) for a, d in hs]) for need, hs in nodes], finished)
    short = _expected(groups, curve, cap_ms, len(finished), len(groups))
    many, first = release_estimate._MANY_GROUPS, release_estimate._FIRST_CHUNK
    try:
        release_estimate._MANY_GROUPS = 10_000
        long = _expected(groups, curve, cap_ms, len(finished), len(groups))
        release_estimate._MANY_GROUPS, release_estimate._FIRST_CHUNK = 1, 1
        shortest = _expected(groups, curve, cap_ms, len(finished), len(groups))
    finally:
        release_estimate._MANY_GROUPS, release_estimate._FIRST_CHUNK = many, first
    assert short == long == shortest
