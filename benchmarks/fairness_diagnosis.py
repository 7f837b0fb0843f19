"""Where the fairness figures of a simulated day come from, for ``bench_fairness`` and by hand.

Breakdowns, each computed with the definitions of ``audit.metrics`` (nothing here is a new
metric, and none changes a figure):

* ``contended_hours``: per hour that counts in Jain under contention, the backlogged tenants,
  their xᵢ (H100-eq-hours used / weight-hours) and the hour's index, plus the tenants whose
  backlog in that hour came only from device-plugin pods. Such a pod can use only the nodes its
  nodeSelector admits, so its wait says nothing about the tenant's demand on the shared pool
  that xᵢ measures. Also the xᵢ every tenant would have with the whole capacity shared by the
  weights of all the policy's tenants (``fair_x``), and the index with each xᵢ cut to it
  (``jain_capped``): what the hour's index owes to a tenant using more than its weighted share,
  capacity that tenants idle or unable to use it left (the index itself counts that as unfair).
* ``regret_by_reason``: the fallbacks of an adaptive run grouped by what the engine's
  ``fallback_estimate`` evidence said when the pod fell back (the estimate's basis, whether it
  waited on devices or on quota, whether the pod had waited ``maxWait``, and whether its tenant
  had device-plugin pods pinned to the first choice ahead of it, which take the tenant's quota of
  it first), with how many of each group were regretted. Regret asks only whether the first
  choice fit the pod within the tenant's quota, not whether the tenant's own pods ahead of it,
  which can use nothing else, would have taken that quota first.
* ``regret_by_ask``: the same fallbacks grouped by who asked for what — the tenant, the device
  count of the first choice, whether the estimate waited on devices or on quota, and its basis —
  most regretted first: a group where most fallbacks are regretted points at an estimate that is
  wrong for that tenant's holdings (e.g. one that says a quota will not reopen within ``maxWait``
  while it does).
* ``pending_over_share``: the share of a tenant's pending pod-time during which it already held at
  least its weighted share of the cluster's H100-equivalent capacity (capacity × its weight / the
  weights of every tenant the policy names): how much of its wait is behind its own demand, where
  serving it sooner would take from tenants below their share.
* ``p99_by_track``: each tenant's p99 wait (nearest rank, as ``fairness_report``) over all its
  pods and per track, to tell a tenant's wait on its device-plugin pods from its wait on DRA.
* ``p99_beside_own``: each tenant's p99 wait, and the same with every pod's wait cut by the time
  during it that its tenant's quota of the pod's first choice had no room for one more device
  (``quota_closed``, the rule of ``audit.scheduler.quota.check_quota`` applied to the devices the
  lifecycle shows held), or that its tenant held at least its weighted share (as
  ``pending_over_share``): how much of the gap between tenants' p99 waits is a wait behind the
  tenant's own quota or own demand rather than behind other tenants.
* ``p99_floor``: a lower bound on one tenant's p99 wait over every schedule that leaves the other
  tenants' pods holding what they held in the run (the same devices count at the same times) and
  binds the same pods of the tenant within the window: how far the worst/best ratio can fall
  without taking from the other tenants or making them wait longer. The argument: a pod that
  arrived at aᵢ and waited at most X starts by aᵢ + X and, if its run dᵢ is longer than τ − aᵢ,
  still holds its gᵢ devices at τ ≥ aᵢ + X. At τ only the devices the others do not hold are left,
  so of the pods with aᵢ ≤ τ − X < τ < aᵢ + dᵢ at most as many as the smallest gᵢ fit into them
  waited ≤ X; every other such pod waited longer. Nodes, quotas, health and the tenant's own other
  pods are ignored, which can only lower the bound.

Run ``python -m benchmarks.fairness_diagnosis [seed] [default|immediate|adaptive] [hours]`` to print
them for the default scenario: with its own policies, with immediate fallback all day, or with
adaptive fallback.
"""

from __future__ import annotations

import bisect
import math
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from audit.metrics import Window, fold_lifecycle
from audit.metrics.fairness import BACKLOG_MS, hourly_use, hours, jain, pending_intervals
from audit.metrics.lifecycle import Lifecycle
from audit.metrics.ranks import nearest_rank
from audit.metrics.usage import weight_hours
from audit.records import Blocker, DecisionRecord, Outcome

DEVICE_PLUGIN = "device-plugin"


def _backlogged(pending: dict[str, list[tuple[int, int]]], hour: Window) -> list[str]:
    return sorted(t for t, iv in pending.items() if sum(hour.overlap_ms(a, b) for a, b in iv) >= BACKLOG_MS)


def contended_hours(life: Lifecycle, window: Window) -> list[dict[str, Any]]:
    """The hours ``jain_contention`` averages, each with its tenants' xᵢ and Jain's index."""
    pending = pending_intervals(life.pods, window)
    # the same intervals without device-plugin pods: who would still be backlogged
    pending_dra = pending_intervals([p for p in life.pods if p.track != DEVICE_PLUGIN], window)
    used = hourly_use(life.pods, window)
    rows = []
    for i, hour in enumerate(hours(window)):
        backlogged = _backlogged(pending, hour)
        if len(backlogged) < 2:
            continue
        xs = {}
        for t in backlogged:
            w = weight_hours(life, hour, t)
            xs[t] = used.get((i, t), 0.0) / w if w > 0 else 0.0
        on_dra = set(_backlogged(pending_dra, hour))
        policy = life.policy_at(hour.since_ms)
        capacity = next((c for start, c in reversed(life.capacity) if start <= hour.since_ms), 0.0)
        weights = sum(policy.weight(t.name) for t in policy.tenants)
        fair_x = capacity / weights if weights > 0 else 0.0
        rows.append({"hour": i, "jain": jain(xs.values()), "x": xs,
                     "pinned_only": [t for t in backlogged if t not in on_dra], "fair_x": fair_x,
                     "jain_capped": jain(min(x, fair_x) for x in xs.values())})
    return rows


def _fallback_estimates(records: Iterable[DecisionRecord], life: Lifecycle
                        ) -> Iterator[tuple[Any, dict[str, Any] | None]]:
    """Each pod placed on a fallback, with the ``fallback_estimate`` evidence of the decision that
    placed it (None when that decision gave none), in the lifecycle's pod order."""
    placed: dict[str, DecisionRecord] = {}
    for r in records:
        if r.outcome == Outcome.ALLOCATED.value and r.fallback:
            placed[r.pod_uid] = r
    for p in life.pods:
        placing = placed.get(p.uid)
        if placing is None:
            continue
        said = [b.detail for b in placing.blockers if b.code == Blocker.FALLBACK_ESTIMATE.value]
        yield p, (said[0] if said else None)


def _count(groups: dict[Any, list[int]], key: Any, regretted: bool) -> None:
    counts = groups.setdefault(key, [0, 0])
    counts[0] += 1
    counts[1] += bool(regretted)


def regret_by_reason(records: Iterable[DecisionRecord], life: Lifecycle) -> list[dict[str, Any]]:
    """Fallbacks grouped by the evidence of the decision that placed them, most first."""
    groups: dict[tuple[str, str, bool, bool], list[int]] = {}
    for p, d in _fallback_estimates(records, life):
        if d is not None:
            key = (str(d.get("basis")), str(d.get("wait_on")), int(d.get("waited_ms", 0)) >= int(d.get("max_wait_ms", 0)),
                   int(d.get("ahead", 0)) > 0)
        else:
            key = ("no estimate", "", False, False)
        _count(groups, key, p.regretted)
    return [{"basis": k[0], "wait_on": k[1], "waited_max_wait": k[2], "behind_pinned": k[3], "fallbacks": n,
             "regretted": reg}
            for k, (n, reg) in sorted(groups.items(), key=lambda kv: (-kv[1][0], kv[0]))]


def regret_by_ask(records: Iterable[DecisionRecord], life: Lifecycle) -> list[dict[str, Any]]:
    """Fallbacks grouped by (tenant, first choice's count, wait_on, basis) from the placing
    decision's ``fallback_estimate`` evidence, most regretted first (then most fallbacks, then the
    key); a fallback with no estimate has count 0 and basis ``no estimate``."""
    groups: dict[tuple[str, int, str, str], list[int]] = {}
    for p, found in _fallback_estimates(records, life):
        d = found or {}
        key = (p.tenant, int(d.get("count", 0)), str(d.get("wait_on", "")), str(d.get("basis", "no estimate")))
        _count(groups, key, p.regretted)
    return [{"tenant": k[0], "count": k[1], "wait_on": k[2], "basis": k[3], "fallbacks": n, "regretted": reg}
            for k, (n, reg) in sorted(groups.items(), key=lambda kv: (-kv[1][1], -kv[1][0], kv[0]))]


def pending_over_share(life: Lifecycle, window: Window, tenant: str) -> tuple[float, float]:
    """(pending pod-hours of ``tenant`` in the window, the part of them while it held at least its
    weighted share of capacity), swept exactly over the instants where either can change."""
    deltas: dict[int, list[float]] = {}  # time -> [pending pods, held H100-eq]

    def add(at: int, pods: float, eq: float) -> None:
        d = deltas.setdefault(max(at, window.since_ms), [0.0, 0.0])
        d[0] += pods
        d[1] += eq

    for p in life.pods:
        if p.tenant != tenant:
            continue
        end = p.pending_until(window.until_ms)
        if end > p.created_ms:
            add(p.created_ms, 1, 0.0)
            add(end, -1, 0.0)
        if p.allocated_ms is not None and p.h100_eq:
            add(p.allocated_ms, 0, p.h100_eq)
            add(window.until_ms if p.released_ms is None else p.released_ms, 0, -p.h100_eq)
    for at, _ in [*life.policies, *life.capacity]:
        add(at, 0, 0.0)
    times = sorted(t for t in deltas if t < window.until_ms) + [window.until_ms]
    pending = held = total = over = 0.0
    for a, b in zip(times, times[1:], strict=False):
        pending += deltas[a][0]
        held += deltas[a][1]
        if pending <= 0:
            continue
        policy = life.policy_at(a)
        capacity = next((c for start, c in reversed(life.capacity) if start <= a), 0.0)
        weights = sum(policy.weight(t.name) for t in policy.tenants)
        share = capacity * policy.weight(tenant) / weights if weights > 0 else 0.0
        span = pending * (b - a) / 3_600_000
        total += span
        # held is a float sum: a tenant exactly at its share must not read as a hair below it
        over += span if held >= share - 1e-9 else 0.0
    return total, over


def p99_by_track(life: Lifecycle) -> dict[str, float]:
    """p99 wait in seconds of the pods first bound, per tenant and per ``tenant track``."""
    waits: dict[str, list[float]] = {}
    for p in life.pods:
        if p.bound_ms is None:
            continue
        wait = (p.bound_ms - p.created_ms) / 1000
        waits.setdefault(p.tenant, []).append(wait)
        waits.setdefault(f"{p.tenant} {p.track}", []).append(wait)
    return {k: nearest_rank(sorted(v), 0.99) for k, v in sorted(waits.items())}


def _held_changes(life: Lifecycle, window: Window, tenant: str | None) -> dict[int, list[tuple[str, str, float]]]:
    """At each instant (from the window's start): (tenant, model, devices) held changes, and one
    ("", "", 0) where the policy or the capacity changes (what the rules below read)."""
    out: dict[int, list[tuple[str, str, float]]] = {}
    for p in life.pods:
        if p.allocated_ms is None or not p.allocated or (tenant is not None and p.tenant != tenant):
            continue
        models = p.allocated.split("|")
        end = window.until_ms if p.released_ms is None else p.released_ms
        for m in models:  # a pod of several models: its devices spread evenly (none here has two)
            n = p.devices / len(models)
            out.setdefault(max(p.allocated_ms, window.since_ms), []).append((p.tenant, m, n))
            out.setdefault(max(end, window.since_ms), []).append((p.tenant, m, -n))
    for at, _ in [*life.policies, *life.capacity]:
        out.setdefault(max(at, window.since_ms), []).append(("", "", 0.0))
    return out


def _intervals(changes: dict[int, list[tuple[str, str, float]]], window: Window,
               closed: Any) -> list[tuple[int, int]]:
    """The spans of the window where ``closed(held by (tenant, model), time)`` is true."""
    held: dict[tuple[str, str], float] = {}
    times = sorted(t for t in changes if t < window.until_ms) + [window.until_ms]
    out: list[tuple[int, int]] = []
    for a, b in zip(times, times[1:], strict=False):
        for t, m, n in changes[a]:
            if t:
                held[(t, m)] = held.get((t, m), 0.0) + n
        if b > a and closed(held, a):
            if out and out[-1][1] == a:
                out[-1] = (out[-1][0], b)
            else:
                out.append((a, b))
    return out


def quota_closed(life: Lifecycle, window: Window, tenant: str, model: str) -> list[tuple[int, int]]:
    """The spans where ``tenant``'s quota of ``model`` had no room for one more device: its nominal
    used up, and borrowing over its limit or beyond what the others' unused nominal lends less
    what they borrow (Kueue's ClusterQueue rules, as ``check_quota``)."""

    def closed(held: dict[tuple[str, str], float], at: int) -> bool:
        policy = life.policy_at(at)
        q = policy.quota(tenant, model)
        if q is None:
            return False
        want = held.get((tenant, model), 0.0) + 1
        if want <= q.nominal + 1e-9:
            return False
        if q.limit is not None and want > q.limit + 1e-9:
            return True
        others = [(o.quotas[model].nominal, held.get((o.name, model), 0.0))
                  for o in policy.tenants if o.name != tenant and model in o.quotas]
        room = sum(max(0.0, nom - used) for nom, used in others) - sum(max(0.0, used - nom) for nom, used in others)
        return want - q.nominal > room + 1e-9

    return _intervals(_held_changes(life, window, None), window, closed)


def over_share(life: Lifecycle, window: Window, tenant: str) -> list[tuple[int, int]]:
    """The spans where ``tenant`` held at least its weighted share of capacity in H100-eq (the
    rule of ``pending_over_share``)."""
    changes: dict[int, list[tuple[str, str, float]]] = {}
    for p in life.pods:
        if p.tenant != tenant or p.allocated_ms is None or not p.h100_eq:
            continue
        end = window.until_ms if p.released_ms is None else p.released_ms
        changes.setdefault(max(p.allocated_ms, window.since_ms), []).append((tenant, "eq", p.h100_eq))
        changes.setdefault(max(end, window.since_ms), []).append((tenant, "eq", -p.h100_eq))
    for at, _ in [*life.policies, *life.capacity]:
        changes.setdefault(max(at, window.since_ms), []).append(("", "", 0.0))

    def closed(held: dict[tuple[str, str], float], at: int) -> bool:
        policy = life.policy_at(at)
        capacity = next((c for start, c in reversed(life.capacity) if start <= at), 0.0)
        weights = sum(policy.weight(t.name) for t in policy.tenants)
        share = capacity * policy.weight(tenant) / weights if weights > 0 else 0.0
        return held.get((tenant, "eq"), 0.0) >= share - 1e-9

    return _intervals(changes, window, closed)


def _overlap(spans: list[tuple[int, int]], a: int, b: int) -> int:
    return sum(max(0, min(b, y) - max(a, x)) for x, y in spans)


def p99_beside_own(life: Lifecycle, window: Window) -> dict[str, dict[str, float]]:
    """Per tenant: p99 wait in seconds of the pods first bound (``all``), and the same with each
    pod's wait less the time its tenant's quota of its first choice was closed (``less_quota``), or
    less the time its tenant held at least its weighted share (``less_share``)."""
    out: dict[str, dict[str, float]] = {}
    tenants = sorted({p.tenant for p in life.pods})
    share = {t: over_share(life, window, t) for t in tenants}
    closed: dict[tuple[str, str], list[tuple[int, int]]] = {}
    waits: dict[str, dict[str, list[float]]] = {t: {"all": [], "less_quota": [], "less_share": []} for t in tenants}
    for p in life.pods:
        if p.bound_ms is None:
            continue
        w = waits[p.tenant]
        wait = p.bound_ms - p.created_ms
        w["all"].append(wait / 1000)
        model = p.preferred or p.allocated  # a device-plugin pod's only choice is what it got
        if model and "|" not in model:
            spans = closed.get((p.tenant, model))
            if spans is None:
                spans = closed[(p.tenant, model)] = quota_closed(life, window, p.tenant, model)
            w["less_quota"].append((wait - _overlap(spans, p.created_ms, p.bound_ms)) / 1000)
        else:
            w["less_quota"].append(wait / 1000)
        w["less_share"].append((wait - _overlap(share[p.tenant], p.created_ms, p.bound_ms)) / 1000)
    for t, w in waits.items():
        if w["all"]:
            out[t] = {k: nearest_rank(sorted(v), 0.99) for k, v in w.items()}
    return out


def _held_by_others(life: Lifecycle, tenant: str, track: str) -> tuple[list[int], list[int]]:
    """When devices of ``track`` held by the other tenants' pods change, and how many they hold from
    then on (a pod still holding at the fold's end holds on)."""
    changes: dict[int, int] = {}
    for p in life.pods:
        if p.tenant == tenant or p.track != track or p.allocated_ms is None or not p.devices:
            continue
        changes[p.allocated_ms] = changes.get(p.allocated_ms, 0) + p.devices
        if p.released_ms is not None:
            changes[p.released_ms] = changes.get(p.released_ms, 0) - p.devices
    times = sorted(changes)
    held, total = [], 0
    for t in times:
        total += changes[t]
        held.append(total)
    return times, held


def _late_at_least(pods: list[tuple[int, int, int]], free_at: Callable[[int], int], wait_ms: int) -> int:
    """The most pods of ``pods`` ((arrival, run lower bound, devices)) some instant proves waited
    longer than ``wait_ms`` (``p99_floor``'s argument, at every τ = aᵢ + ``wait_ms``)."""
    worst = 0
    for a, _, _ in pods:
        tau = a + wait_ms
        running = sorted(g for a2, d2, g in pods if a2 <= a and a2 + d2 > tau)
        room, fit = free_at(tau), 0
        for g in running:
            if g > room:
                break
            room -= g
            fit += 1
        worst = max(worst, len(running) - fit)
    return worst


def p99_floor(life: Lifecycle, window: Window, tenant: str, devices: int, track: str = "dra") -> float:
    """A lower bound in seconds on ``tenant``'s nearest-rank p99 wait (see the module's
    ``p99_floor``), its pods all of ``track`` on a pool of ``devices`` devices: a whole second X at
    which some instant proves that more of the tenant's pods first bound in the window waited longer
    than X than the nearest-rank p99 allows, so the p99 exceeds X; 0.0 when nothing is proved. X is
    found by bisection over seconds, each step proved on its own, so a larger X may hold too."""
    bound = [p for p in life.pods if p.tenant == tenant and window.holds(p.bound_ms)]
    waits = [b - p.created_ms for p in bound if (b := p.bound_ms) is not None]
    if not bound or any(p.track != track for p in life.pods if p.tenant == tenant):
        return 0.0
    times, held = _held_by_others(life, tenant, track)

    def free_at(t: int) -> int:
        i = bisect.bisect_right(times, t) - 1
        return devices - (held[i] if i >= 0 else 0)

    end = life.end_ms
    # a run's length from the run itself; a pod still holding at the end ran at least until then
    pods = sorted((p.created_ms, (p.released_ms if p.released_ms is not None else end) - held_from, p.devices)
                  for p in bound if (held_from := p.allocated_ms) is not None)
    n = len(bound)
    needed = n - math.ceil(0.99 * n) + 1  # pods longer than X that put the ⌈0.99·n⌉-th smallest wait above X
    lo, hi = 0, max(waits) // 1000  # proved above lo - 1; not above hi
    if _late_at_least(pods, free_at, 0) < needed:
        return 0.0
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _late_at_least(pods, free_at, mid * 1000) >= needed:
            lo = mid
        else:
            hi = mid - 1
    return float(lo)


def main(argv: list[str]) -> None:
    from benchmarks.bench_fairness import ADAPTIVE, IMMEDIATE, day_scenario, dra_devices
    from ingest.simulate.loop import simulate

    fallbacks = {"default": None, "immediate": IMMEDIATE, "adaptive": ADAPTIVE}
    seed = int(argv[0]) if argv else 1
    mode = argv[1] if len(argv) > 1 else "default"
    if mode not in fallbacks:
        raise SystemExit(f"fallback {mode!r}: one of {', '.join(fallbacks)}")
    hours_ = float(argv[2]) if len(argv) > 2 else 24.0
    scenario = day_scenario("", fallbacks[mode])
    result = simulate(scenario, seed=seed, hours=hours_)
    window = Window(result.start_ms, result.end_ms)
    life = fold_lifecycle(result.events, result.world.cluster)
    rows = contended_hours(life, window)
    for row in rows:
        tenants = ", ".join(f"{t}{'*' if t in row['pinned_only'] else ''} {x:.1f}" for t, x in row["x"].items())
        print(f"h{row['hour']:02d} Jain {row['jain']:.3f}: {tenants}; weighted share {row['fair_x']:.1f}, "
              f"Jain with each cut to it {row['jain_capped']:.3f}")
    if rows:
        print(f"mean Jain {sum(r['jain'] for r in rows) / len(rows):.3f}, with each xᵢ cut to the weighted share "
              f"{sum(r['jain_capped'] for r in rows) / len(rows):.3f}")
    print("(* backlog only from device-plugin pods)")
    for g in regret_by_reason(result.records, life):
        print(f"{g['regretted']:5d} of {g['fallbacks']:5d} regretted: basis {g['basis']}, on {g['wait_on'] or '-'}"
              f"{', after maxWait' if g['waited_max_wait'] else ''}"
              f"{', behind pinned device-plugin pods' if g['behind_pinned'] else ''}")
    for g in regret_by_ask(result.records, life)[:12]:
        print(f"{g['regretted']:5d} of {g['fallbacks']:5d} regretted: {g['tenant']} asking {g['count']}, "
              f"on {g['wait_on'] or '-'}, basis {g['basis']}")
    for tenant in sorted({p.tenant for p in life.pods}):
        total, over = pending_over_share(life, window, tenant)
        if total:
            print(f"{tenant}: {total:,.1f} pending pod-hours, {100 * over / total:.1f} % of them while it held "
                  "at least its weighted share of capacity")
    for track, p99 in p99_by_track(life).items():
        print(f"p99 wait {track}: {p99:,.0f} s")
    beside = p99_beside_own(life, window)
    for k, v in beside.items():
        print(f"p99 wait {k}: {v['all']:,.0f} s; less the time its quota of the first choice was closed "
              f"{v['less_quota']:,.0f} s; less the time it held its weighted share {v['less_share']:,.0f} s")
    for k in ("all", "less_quota", "less_share"):
        vals = [max(1.0, v[k]) for v in beside.values()]
        print(f"worst/best p99 ({k}): {max(vals) / min(vals):.1f}")
    devices = dra_devices(scenario)
    for tenant in sorted({p.tenant for p in life.pods}):
        print(f"p99 wait {tenant} exceeds {p99_floor(life, window, tenant, devices):,.0f} s in any schedule that leaves "
              "the other tenants' pods holding what they held (0: nothing proved)")


if __name__ == "__main__":
    main(sys.argv[1:])
