"""Load scaling for trace-driven days: how hard the trace's arrivals press on the cluster.

``--load L`` names the share of the cluster's GPUs the arrivals would keep busy at the end of the
simulated window if every pod were placed the moment it arrived. For arrivals at a steady rate
into an empty cluster, the GPUs busy at time t are rate × E[gpus × min(duration, t)] (each pod that
arrived s before t still runs when its duration exceeds s), so L is also the uncontended peak of
the window; above about 0.8 pods queue behind each other and the scheduler's choices matter.
Durations are never changed: a trace's runtimes are what it is about. Because the load is defined
at the window's end, the same load over a longer window is another workload, not a continuation:
unlike a scenario's run (``loop.py``), a shorter window is not the first part of a longer one.

The two traces get there differently, because their workloads differ:

* ``openb-2023`` replays recorded pods. Its arrivals are *compressed in time* by a factor k
  (a pod created s seconds into the trace's busy period arrives s / k into the window), which
  keeps every recorded pod, its order, size, model constraint and runtime, and needs no sampling.
  The trace offers only about 1 % of its GPUs over its 34 busy days, so filling the cluster takes
  k in the hundreds or thousands and the compressed trace is shorter than a day; it is then
  replayed again from its start (cycle m adds ``-rm`` to the pod names) until the window is full.
  Pods already running when the busy period starts arrive once, at the start, and count as
  constant load.
* ``spot-2026`` has no job file, so its workload is a seeded Poisson mix: the *arrival rates are
  scaled*, since that is the mix's only free parameter; sizes and the lognormal runtimes stay.

Everything here is arithmetic on the inputs: no clock and no randomness.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import replace

from ingest.simulate.loop import Job

# 20 % more than the cluster holds by the window's end, so pods queue whatever packing loses to
# fragmentation (spot-2026's 1-GPU nodes, for instance, take only 1-GPU pods).
DEFAULT_LOAD = 1.2


class LoadError(ValueError):
    """A ``--load`` value the arithmetic cannot honour; the message names the value."""


# More pods than a run can simulate in hours: a load far beyond any contended day (``--load 1e9``)
# is refused before the arrivals are made, not left to fill memory.
MAX_ARRIVALS = 2_000_000


def check_arrivals(load: float, expected: float) -> None:
    """LoadError when ``load`` makes about ``expected`` pods arrive, more than ``MAX_ARRIVALS``."""
    if expected > MAX_ARRIVALS:
        raise LoadError(f"--load {load:g}: about {expected:,.0f} pods would arrive in the window, more than the "
                        f"{MAX_ARRIVALS:,} a run simulates; give a smaller load or fewer hours")


def check_load(load: float) -> float:
    if not math.isfinite(load) or load <= 0:
        raise LoadError(f"--load {load:g}: must be a number > 0 (the share of GPUs kept busy, e.g. 1.0)")
    return load


def offered_gpu_ms(jobs: Iterable[Job], horizon_ms: int) -> float:
    """GPU-milliseconds the jobs ask for, each run counted up to ``horizon_ms``."""
    return float(sum(j.size * min(j.duration_ms, horizon_ms) for j in jobs))


def compression_factor(load: float, gpus: int, carried_gpus: int, span_ms: int, offered_ms: float) -> float:
    """k such that arrivals compressed k-fold keep ``load`` × ``gpus`` busy by the window's end.

    ``offered_ms`` is what the trace's arrivals over ``span_ms`` ask for, each run counted up to the
    window's length (``offered_gpu_ms``); ``carried_gpus`` are held all along by pods that were
    already running. Compressed k-fold, the arrivals come k times as fast, so they keep
    k × offered / span GPUs busy; solving k × offered / span + carried = load × gpus for k."""
    want = load * gpus - carried_gpus
    if want <= 0 or offered_ms <= 0:
        raise LoadError(f"--load {load:g}: the trace's running pods alone hold {carried_gpus:,} of "
                        f"{gpus:,} GPUs; give a larger load")
    return want * span_ms / offered_ms


def compress(jobs: Sequence[Job], carried: Sequence[Job], k: float, span_ms: int,
             start_ms: int, end_ms: int) -> list[Job]:
    """The trace's jobs with arrivals compressed k-fold, cycled until the window [start, end) is full.

    ``jobs`` arrive at ``start_ms`` + their offset into the trace's busy period; in cycle m a job
    arrives at start + (m × span + offset) / k, truncated to the millisecond, and is named
    ``<name>-r<m>`` (m ≥ 1) so that every pod is a different one. ``carried`` jobs arrive once,
    as given."""
    out = [j for j in carried if j.arrival_ms < end_ms]
    cycle = 0
    while start_ms + int(cycle * span_ms / k) < end_ms:
        suffix = f"-r{cycle}" if cycle else ""
        for j in jobs:
            at = start_ms + int((cycle * span_ms + (j.arrival_ms - start_ms)) / k)
            if at < end_ms:
                out.append(replace(j, name=j.name + suffix, arrival_ms=at))
        cycle += 1
    out.sort(key=lambda j: (j.arrival_ms, j.namespace, j.name))
    return out


def lognormal_mean_clipped(median: float, sigma: float, horizon: float) -> float:
    """E[min(D, horizon)] for D = median × exp(sigma × Z), Z standard normal.

    With μ = ln median: E[D; D < h] = e^(μ + σ²/2) Φ((ln h − μ − σ²)/σ), plus h × P(D ≥ h)."""
    if horizon <= 0:
        return 0.0
    if sigma == 0:
        return min(median, horizon)
    z = math.log(horizon / median) / sigma
    mean = median * math.exp(sigma * sigma / 2)
    return mean * _phi(z - sigma) + horizon * (1 - _phi(z))


def _phi(x: float) -> float:
    return 0.5 * (1 + math.erf(x / math.sqrt(2)))


def arrival_scale(load: float, gpus: int, per_hour_gpu_ms: float) -> float:
    """The factor on every arrival rate that keeps ``load`` × ``gpus`` busy by the window's end.

    ``per_hour_gpu_ms`` is what one hour of the unscaled mix's arrivals asks for, runs counted up
    to the window's length: Σ rate × E[size] × E[min(duration, window)]."""
    if per_hour_gpu_ms <= 0:
        raise LoadError(f"--load {load:g}: the workload mix asks for no GPU time to scale")
    return load * gpus * 3_600_000 / per_hour_gpu_ms


def mix_gpu_ms_per_hour(rates: Sequence[tuple[float, Sequence[tuple[int, float]], float, float]],
                        horizon_ms: int) -> float:
    """Σ over tenants of rate/h × E[size] × E[min(duration, horizon)] in GPU-ms, for
    (rate per hour, size weights, median duration in minutes, sigma) per tenant."""
    total = 0.0
    for rate, sizes, median_min, sigma in rates:
        weight = sum(w for _, w in sizes)
        mean_size = sum(s * w for s, w in sizes) / weight if weight > 0 else 0.0
        total += rate * mean_size * lognormal_mean_clipped(median_min * 60_000, sigma, horizon_ms)
    return total
