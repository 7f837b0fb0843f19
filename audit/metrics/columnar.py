"""The per-pod passes of the reference functions, evaluated on the lifecycle's columns.

Each function here computes exactly what the reference function it names computes — same
population, same clipping, same sums (integers, converted by weight with ``eq_hours``, so the
order pods are visited in cannot change a bit) — on whole arrays instead of one ``PodLife`` at a time; the property tests
(``tests/metrics/test_columnar.py``) hold them to equality on random histories and windows. The
definitions stay in the reference modules: a rule changes there first, then here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from audit.metrics.columns import NEVER, Columns
from audit.metrics.fairness import CONTENTION_WINDOW_MS
from audit.metrics.fallback import FallbackStats
from audit.metrics.usage import HOUR_MS, Usage, eq_hours
from audit.metrics.waits import WaitStats
from audit.metrics.window import Window


def _eq_hours_of(ms: Any, weights: tuple[float, ...]) -> dict[int, float]:
    """Per row of ``ms`` (milliseconds held, one column per weight) that held anything, its
    ``eq_hours``."""
    return {k: eq_hours({weights[j]: int(ms[k, j]) for j in np.flatnonzero(ms[k]).tolist()})
            for k in np.flatnonzero(ms.sum(axis=1)).tolist()}


def _sum_by(keys: Any, values: Any, size: int) -> Any:
    """Σ of non-negative integer ``values`` per key in 0..size-1, exactly, as int64. ``bincount``
    adds in float64, which is exact while every partial sum stays below 2**53 (the total bounds
    them all); beyond that the slower integer ``add.at``."""
    if values.size == 0 or int(values.sum()) < 2**53:
        return np.bincount(keys, weights=values, minlength=size).astype(np.int64)
    out = np.zeros(size, dtype=np.int64)
    np.add.at(out, keys, values)
    return out


def _present(codes: Any, size: int) -> list[int]:
    """The distinct codes in 0..size-1, ascending."""
    return np.flatnonzero(np.bincount(codes, minlength=size)).tolist()


class ColumnarPods:
    """The per-pod figures of ``audit.metrics.report`` over ``cols`` (optionally only ``rows``)."""

    def __init__(self, cols: Columns, rows: Any = None) -> None:
        self.c = cols
        self.rows = rows  # a boolean mask of the rows counted (None: all)
        self._state: dict[Window, tuple[Any, Any, Any]] = {}
        self._group: dict[Callable[[str], str], tuple[Any, list[str]]] = {}

    def _kept(self, mask: Any) -> Any:
        return mask if self.rows is None else mask & self.rows

    def where(self, field: str, value: str) -> ColumnarPods:
        """Only the pods whose ``field`` (tenant, preferred or allocated) is ``value``."""
        c = self.c
        code = c.names.index(value) if value in c.names else -1
        mask = getattr(c, field) == code
        return ColumnarPods(c, mask if self.rows is None else mask & self.rows)

    def values(self, field: str) -> set[str]:
        """The values ``field`` (tenant, preferred or allocated) takes among the pods."""
        codes = getattr(self.c, field) if self.rows is None else getattr(self.c, field)[self.rows]
        return {self.c.names[i] for i in _present(codes, len(self.c.names))}

    def _groups(self, group: Callable[[str], str]) -> tuple[Any, list[str]]:
        """Per row the index of its tenant's group, and the groups' names."""
        if group not in self._group:
            names = sorted({group(n) for n in self.c.names})
            index = {g: i for i, g in enumerate(names)}
            table = np.array([index[group(n)] for n in self.c.names] or [0], dtype=np.int64)
            self._group[group] = (table[self.c.tenant], names)
        return self._group[group]

    def usage(self, window: Window) -> dict[str, Usage]:
        """``audit.metrics.usage.tenant_usage``."""
        c = self.c
        start = np.maximum(c.allocated_ms, window.since_ms)
        held = np.minimum(c.released_ms, window.until_ms) - start
        m = self._kept((c.allocated_ms != NEVER) & (c.devices > 0) & (held > 0))
        tenant, held = c.tenant[m], held[m]
        device_ms = _sum_by(tenant, c.devices[m] * held, len(c.names))
        n_weights = len(c.weights)
        ms = _sum_by(tenant.astype(np.int64) * n_weights + c.h100_eq[m], held, len(c.names) * n_weights)
        eq = _eq_hours_of(ms.reshape(len(c.names), n_weights), c.weights)
        return {c.names[t]: Usage(int(device_ms[t]) / HOUR_MS, eq[t]) for t in sorted(eq)}

    def alive_tenants(self, window: Window) -> set[str]:
        """The tenants ``audit.metrics.usage.alive_in`` finds a pod of."""
        c = self.c
        end = np.minimum(c.failed_ms, c.released_ms)
        m = self._kept(c.created_ms < window.until_ms) & (end > window.since_ms)
        return {c.names[t] for t in _present(c.tenant[m], len(c.names))}

    def _states(self, window: Window) -> tuple[Any, Any, Any]:
        """Rows first bound in the window, pending at its end, failed unbound in it."""
        if window not in self._state:
            c = self.c
            started = (c.bound_ms >= window.since_ms) & (c.bound_ms < window.until_ms)
            pending = (c.created_ms < window.until_ms) & (c.bound_ms >= window.until_ms) & (
                c.failed_ms >= window.until_ms)
            failed = (c.bound_ms == NEVER) & (c.failed_ms >= window.since_ms) & (c.failed_ms < window.until_ms)
            self._state[window] = (self._kept(started), self._kept(pending), self._kept(failed))
        return self._state[window]

    def waits(self, window: Window, group: Callable[[str], str] = lambda t: t) -> dict[str, WaitStats]:
        """``audit.metrics.waits.tenant_waits``."""
        c = self.c
        g, names = self._groups(group)
        started, pending, failed = self._states(window)
        out: dict[str, WaitStats] = {}
        sg = g[started]
        waits = (c.bound_ms - c.created_ms)[started]
        for i in _present(sg, len(names)):
            ascending: Any = np.sort(waits[sg == i])  # an int64 array serves nearest_rank as a list does
            out[names[i]] = WaitStats(ascending)
        so_far = np.where(pending, window.until_ms - c.created_ms, c.failed_ms - c.created_ms)
        for mask, what in ((pending, "pending_at_end"), (failed, "failed")):
            counts = np.bincount(g[mask], minlength=len(names))
            for i in np.flatnonzero(counts).tolist():
                s = out.setdefault(names[i], WaitStats([]))
                setattr(s, what, int(counts[i]))
        either = pending | failed
        longest = np.zeros(len(names), dtype=np.int64)
        np.maximum.at(longest, g[either], so_far[either])
        for i in _present(g[either], len(names)):
            out[names[i]].longest_wait_ms = int(longest[i])
        return out

    def starving(self, window: Window, timeout_ms: int, group: Callable[[str], str] = lambda t: t) -> dict[str, int]:
        """``audit.metrics.starving.starving_pods``."""
        c = self.c
        g, names = self._groups(group)
        started, pending, _ = self._states(window)
        over = (started & (c.bound_ms - c.created_ms > timeout_ms)) | (
            pending & (window.until_ms - c.created_ms > timeout_ms))
        counts = np.bincount(g[over], minlength=len(names))
        return {names[i]: int(counts[i]) for i in np.flatnonzero(counts).tolist()}

    def pending(self, window: Window) -> dict[str, list[tuple[int, int]]]:
        """``audit.metrics.fairness.pending_intervals``: per tenant, merged, ascending."""
        c = self.c
        end = np.minimum(np.minimum(c.bound_ms, c.failed_ms), window.until_ms)
        m = self._kept(end > c.created_ms) & (end > window.since_ms) & (c.created_ms < window.until_ms)
        tenant, a, b = c.tenant[m], c.created_ms[m], end[m]
        # by tenant, then start (one int64 key: starts span far less than 2**40 ms); the order of
        # intervals with one start does not change what they merge into
        lo_a = int(a.min()) if a.size else 0
        if a.size and int(a.max()) - lo_a < 2**40:
            order = np.argsort((tenant.astype(np.int64) << 40) + (a - lo_a))
        else:
            order = np.lexsort((a, tenant))
        tenant, a, b = tenant[order], a[order], b[order]
        out: dict[str, list[tuple[int, int]]] = {}
        for t in _present(tenant, len(c.names)):
            lo, hi = np.searchsorted(tenant, [t, t + 1])
            ta, reach = a[lo:hi], np.maximum.accumulate(b[lo:hi])
            # an interval opens a new run when it starts after every earlier one has ended
            first = np.concatenate(([0], np.flatnonzero(ta[1:] > reach[:-1]) + 1))
            last = np.concatenate((first[1:] - 1, [ta.size - 1]))
            out[c.names[t]] = list(zip(ta[first].tolist(), reach[last].tolist(), strict=True))
        return out

    def hourly_use(self, window: Window) -> dict[tuple[int, str], float]:
        """``audit.metrics.fairness.hourly_use``: a pod's milliseconds in its first and last hour are
        added as they are, the hours between (held whole) as a count of pods per hour."""
        c, since, hour_ms = self.c, window.since_ms, CONTENTION_WINDOW_MS
        start = np.maximum(c.allocated_ms, since)
        end = np.minimum(c.released_ms, window.until_ms)
        m = self._kept(c.allocated_ms != NEVER) & (c.devices > 0) & (end > start)
        if not m.any():
            return {}
        start, end = start[m], end[m]
        key = c.tenant[m].astype(np.int64) * len(c.weights) + c.h100_eq[m]  # (tenant, weight)
        first, last = (start - since) // hour_ms, (end - 1 - since) // hour_ms
        n_hours, n_keys = int(last.max()) + 1, len(c.names) * len(c.weights)
        size = (n_hours + 1) * n_keys
        # the first hour's part, the last hour's part (none when it is the first) and, between
        # them, whole hours: +1 pod from the hour after the first, -1 from the last
        ms = _sum_by(np.concatenate((first * n_keys + key, last * n_keys + key)),
                     np.concatenate((np.minimum(end, since + (first + 1) * hour_ms) - start,
                                     np.where(last > first, end - (since + last * hour_ms), 0))), size)
        lo = np.maximum(last, first + 1)
        whole = np.bincount((first + 1) * n_keys + key, minlength=size) - np.bincount(lo * n_keys + key, minlength=size)
        ms += np.cumsum(whole.reshape(n_hours + 1, n_keys), axis=0).reshape(size) * hour_ms
        per = ms.reshape(n_hours + 1, n_keys)[:n_hours].reshape(n_hours * len(c.names), len(c.weights))
        n = len(c.names)
        return {(i // n, c.names[i % n]): v for i, v in _eq_hours_of(per, c.weights).items()}

    def fallback(self, window: Window, tenant: str | None = None) -> FallbackStats:
        """``audit.metrics.fallback.fallback_stats`` (of one tenant's pods when ``tenant`` is given)."""
        c = self.c
        m = self._kept(c.dra & c.alternatives & (c.bound_ms >= window.since_ms) & (c.bound_ms < window.until_ms))
        if tenant is not None:
            m &= c.tenant == (c.names.index(tenant) if tenant in c.names else -1)
        s = FallbackStats(int(m.sum()), int((m & c.first_choice).sum()), int((m & c.fallback).sum()),
                          int((m & c.fallback & c.regretted).sum()))
        n = len(c.names)
        counts = np.bincount(c.preferred[m].astype(np.int64) * n + c.allocated[m], minlength=n * n)
        s.paths = {(c.names[k // n], c.names[k % n]): int(counts[k]) for k in np.flatnonzero(counts).tolist()}
        return s
