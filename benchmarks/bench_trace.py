"""A contended trace-driven day: openb-2023 at the default ``--load``, as ``simulate --trace`` runs it.

The public openb-2023 trace (Alibaba Cluster Trace Program, cluster-trace-gpu-v2023) is replayed
for 2 simulated hours (``CLAIMTRAIL_BENCH_TRACE_HOURS=24`` for a whole day, about 9 CPU-minutes
and 3.5 GB, too long beside the other benchmarks) on its 6,212-GPU fleet with
its arrivals compressed to the default load (``ingest/simulate/load.py``). The rows are the
figures the ``simulate`` summary prints, from ``audit.metrics`` (definitions in
``docs/metrics.md``): the peak share of GPUs busy (target ≥ 80 %: the day is contended), Jain's
index under contention and fallback regret, plus the simulator's decisions per CPU-second. The
traces are not part of the repository: without them (``make traces``) the module fails naming
what is missing, and the other modules' rows stand.
"""

from __future__ import annotations

import os
from typing import Any

from audit.metrics import Window, fairness_report, fallback_report, fold_lifecycle
from audit.metrics.busy import cluster_gpus, peak_busy
from benchmarks.paced_day import paced_day
from benchmarks.pacers import MemoryPacer
from ingest.simulate.load import DEFAULT_LOAD
from ingest.simulate.loop import Simulator
from ingest.simulate.trace_files import find_trace_dir
from ingest.simulate.traces import no_trace_dir_message, openb_scenario

BENCH_RUNS = 3  # a rate per CPU-second of one process: make bench reports the median of three runs
HOURS = float(os.environ.get("CLAIMTRAIL_BENCH_TRACE_HOURS", "2"))
SEED = 1


def run() -> list[dict[str, Any]]:
    trace_dir = find_trace_dir()
    if trace_dir is None:
        raise SystemExit(no_trace_dir_message())
    sc = openb_scenario(trace_dir, SEED, HOURS, load=DEFAULT_LOAD)
    with MemoryPacer() as pacer:
        paced = paced_day(Simulator(sc, seed=SEED, hours=HOURS), pacer.speed)
    result = paced.result
    life = fold_lifecycle(result.events, result.world.cluster)
    window = Window(result.start_ms, result.end_ms)
    peak = peak_busy(life.pods, window)
    gpus = cluster_gpus(result.world)
    fair = fairness_report(life, window)
    fb = fallback_report(life, window)
    name = f"trace openb-2023 {HOURS:g} h at --load {DEFAULT_LOAD:g}, seed {SEED}"
    jain = fair["jain_contention"]
    return [
        {"issue": "#16", "name": f"{name}: peak busy GPUs", "value": round(100 * peak.devices / gpus, 1), "unit": "%",
         "target": ">= 80", "note": f"{peak.devices:,} of {gpus:,} GPUs; {result.jobs:,} pods"},
        {"issue": "#16", "name": f"{name}: Jain under contention", "value": None if jain is None else round(jain, 4),
         "unit": "index", "target": "", "note": f"over {fair['contention_windows']} contended hours; "
                                               f"whole window {fair['jain_whole']:.3f}"},
        {"issue": "#16", "name": f"{name}: fallback regret",
         "value": None if fb["regret_rate"] is None else round(100 * fb["regret_rate"], 1), "unit": "%",
         "target": "", "note": f"{fb['fallbacks']:,} fallbacks of {fb['pods_with_preference']:,} pods with "
                               f"alternatives; first choice allocatable within {fb['regret_window_s']:g} s"},
        {"issue": "#16", "name": f"{name}: decisions/s", "target": "", **paced.row(), "note": paced.note()},
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
