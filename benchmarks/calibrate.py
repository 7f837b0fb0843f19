"""The machine's speed, measured beside every benchmark, so figures compare across runs.

The machines `make bench` runs on are shared: the same code measures up to three times slower in
one hour than in the next. A figure alone therefore says little about the code; a figure next to
the speed of the machine at that moment does. Fixed workloads stand for the kinds of work
the benchmarks do:

- ``cpu``: the pure-Python core — sorted-key JSON of a fixed set of decision-like records and a
  fixed depth-first device search with alternatives and a shared-NUMA constraint, written apart
  from the project's own code in ``benchmarks.calibration_workload`` so that it does not speed
  up with the code it calibrates — best of ``CPU_ROUNDS``, measured in each benchmark's own
  process just before it runs and in a fresh process just after, the run taking the mean of the
  two (``benchmarks.run.around``);
- ``memory``: the memory-heavy pure-Python work of the engine, replay and the simulated days —
  scattered lookups, in-place updates and allocation churn over a heap of 300,000 small records
  (about 200 MB), then a walk over all of it, in ``benchmarks.memory_workload`` — best of
  ``MEMORY_ROUNDS`` in *CPU* time, measured in each of ``MEMORY_PROCESSES`` fresh processes, one
  after the other, right after a benchmark with rows that take it; the module gets the median of
  those. Those rows are rates per CPU-second of a process holding hundreds of
  megabytes; waiting for a core does not change them, a slower memory system does (another
  machine on the host using the memory bus, a sibling thread sharing the caches). The ``cpu``
  workload fits in the caches and is timed on the wall clock, so it misses the first and sees the
  time a process waits for a core, which those rows do not. Nor are those rows memory-bound
  throughout: between the lookups they do the cache-resident interpreter work the ``cpu``
  workload stands for. Their factor is therefore neither workload's but a blend of both, taken in
  equal shares (``MEMORY_SHARE``, ``memory_factor``): ``1 / factor = 0.5 / cputime factor + 0.5 /
  memory factor``, the shape of the ``mixed`` scale's, where ``cputime`` is the ``cpu`` workload
  timed in CPU time like the rows (below): blended with the wall-clock ``cpu`` factor instead, a
  crowded machine's waits for a core (the ``cpu`` factor fell to 0.13 under a load of 10 on two
  cores) made the engine's rate come out 2.5 times higher beside ``--noise`` than without it. The
  memory factor alone overcorrected:
  between two quiet runs it moved 1.39x while every row it scaled moved 1.09-1.31x, and beside
  ``--noise`` it fell from 1.68 to 1.50 while the simulated day did not slow; over six runs the
  engine's rate normalised by the blend stayed within 1,905-2,099 decisions/s, by the memory
  factor alone it spread over 1,533-1,922. (The rows it was made for are now normalised slice by
  slice by the same blend measured around each slice, ``benchmarks.pacers.MemoryPacer``; what
  follows describes the figure of the run, for a row that declares the scale.) One process is not enough: its
  rounds agree within a few percent, but fresh processes started one after another on the same
  machine spread over 15–20 % against a long-lived one timed between them (the timed rounds take
  no page faults, the heap is touched while it is built; address-space randomisation off changes
  nothing), and a busy host moves the figure as much again within minutes, so one process could
  put a module's factor 30 % away from the same module's in the next run;
- ``cputime``: the ``cpu`` workload timed in CPU time instead of on the wall clock, best of
  ``CPU_ROUNDS`` in a fresh process right after a benchmark with ``memory`` rows, for their
  cache-resident share. Its reference is the ``cpu`` workload's: on a quiet machine the two
  timings of this single-threaded loop agree;
- ``parallel``: the ``cpu`` workload run at once in one process per core, started together each
  round, best of ``PARALLEL_ROUNDS`` of the mean time per process, measured right after a
  benchmark with rows that keep several cores busy (a server and its clients, a writer and its
  delivery thread, a dashboard and the API it reads). A single-process workload cannot see the
  cores being shared: with one core taken by another program it still has a core to itself, while
  a benchmark that needs both cores loses a third of its CPU;
- ``scan``: the query shapes of the store's reads — the newest page of a decisions-like table
  (a top-N sort over narrow key columns, ``LIMIT 1 BY``), a lookup by a column outside the sort
  key, and a grouped count over a day — on a fixed synthetic table of ``SCAN_ROWS`` rows in a
  fresh embedded chDB database, best of ``SCAN_ROUNDS`` per shape, measured in a process of its
  own right after a benchmark whose rows are led by such reads. ClickHouse runs each of these on
  every core with threads of its own that take turns with the Python caller; how much a busy
  machine slows that mix is neither the single-core nor the all-processes figure, and it is
  what the rows it scales are made of. The raw insert of prepared columns (``bench_store``'s
  baseline) takes it too: it is the same engine's work, and although it keeps about one core
  busy (its CPU time matches its wall time), a burned core beside it slows it as it slows the
  scans, not as it leaves the single-threaded ``cpu`` workload. In three pairs of runs of one
  commit, one of each beside ``--noise``, the insert's measured rate moved 0.85-0.89x and this
  factor 0.79-0.86x, within 9 % of each other. A
  calibration of its own (the same insert of 10,000 rows in a fresh process) did worse than
  either: on a quiet machine its best of three rounds ranged over 0.21-0.41 s within minutes, and
  the pairs' medians of it moved 0.95-1.26x.
  The store's short keyed reads (a decision by id or by pod, the newest page, the hourly rollup's
  rate) do not: they are mostly one thread's work and take ``cpu`` (the history check's lookups,
  since, are normalised round by round, ``benchmarks.interleaved``).
  In the same three pairs their measured times moved 0.91-1.18x (leaving out one p95 whose own
  runs spread 1.34x), and this factor would have put them up to 26 % away from that; the ``cpu``
  factor moved by less than 2 %.

- ``mixed``: no workload of its own, for rows whose work keeps more than one core but fewer than
  all of them busy (a script on one core waiting on a server's queries on several): the row
  declares ``cores``, how many its processes keep busy on a machine with cores to spare. On a
  shared machine that is estimated as the cores they got during the row (CPU seconds per wall
  second, which ``benchmarks.cores`` measures and the row reports every run) times how much
  the ``cpu`` workload was slowed in the same run: the cores the work would have had, had each
  of its threads been served as that workload's one was. With
  ``n`` cores, a share ``w = (cores - 1) / (n - 1)`` of its time behaves like the ``parallel``
  workload and the rest like the ``cpu`` one, so its time stretches by the weighted mean of theirs:
  ``1 / factor = (1 - w) / cpu factor + w / parallel factor``. On two cores beside one burned
  core this is fair sharing exactly: work that wants ``c`` cores gets ``2c / (c + 1)`` of them,
  so it takes ``(c + 1) / 2`` times as long, from 1 at one core to the ``parallel`` workload's
  1.5 at two. A declared figure (the median of a few runs' estimates), not the one measured in
  the run, sets the weight, so that the scatter of that estimate does not add to the figure's.

The speed factor of a workload is ``reference seconds / measured seconds`` (1.0 on the run that
set the reference, 0.5 on a machine half as fast). A time is normalised by multiplying it by the
factor, a rate by dividing it by the factor; ratios measured within one run need neither. Which
factor a row takes is its ``scale`` (``cpu``, ``memory``, ``parallel``, ``scan``, ``mixed``, ``inline``
or ``none``), by default read from its unit; an ``inline`` row brings its own factor, measured
between its rounds (``benchmarks.interleaved``); ``memory`` and ``mixed`` rows take a blend of two
workloads' factors (``blended_factor``), the others their own workload's. Every figure a
workload measured in one ``make bench`` counts towards that run's factor, the median of them
(``benchmarks.run.run_factors``), by which every row of the run is normalised.
"""

from __future__ import annotations

import gc
import json
import multiprocessing
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REFERENCE = Path(__file__).with_name("reference.json")
CPU_ROUNDS = 5
MEMORY_ROUNDS = 3
MEMORY_PROCESSES = 3  # odd, so the median is one process's real figure
PARALLEL_ROUNDS = 5
PARALLEL_REPEAT = 4  # ~100 ms per round, long enough for the kernel to share the cores fairly
SCAN_ROWS = 1_000_000
SCAN_ROUNDS = 5
RECORDS = 1_000
SEARCHES = 1_000
TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def default_scale(unit: str) -> str:
    """``cpu`` for times and rates, ``none`` for everything else (ratios, %, bytes, counts)."""
    return "cpu" if unit in TIME_UNITS or unit.endswith("/s") else "none"


def kind(unit: str) -> str:
    """``time`` (lower is better), ``rate`` (higher is better) or ``other``."""
    if unit in TIME_UNITS:
        return "time"
    return "rate" if unit.endswith("/s") else "other"


def normalise(value: float, unit: str, factor: float) -> float:
    """The value this row would have shown on the reference machine."""
    k = kind(unit)
    if k == "time":
        return value * factor
    if k == "rate":
        return value / factor
    return value


def blended_factor(first: float | None, second: float | None, weight: float) -> float | None:
    """The factor of work whose time is a share ``1 - weight`` like the workload of factor
    ``first`` and ``weight`` like the one of ``second``: each share's time stretches by its
    workload's ``1 / factor``, so ``1 / factor = (1 - weight) / first + weight / second``. None
    when either factor is unknown."""
    if first is None or second is None:
        return None
    return 1.0 / ((1 - weight) / first + weight / second)


def mixed_factor(cpu: float | None, parallel: float | None, cores: float, cpus: int) -> float | None:
    """The factor of a row that keeps ``cores`` of the machine's ``cpus`` cores busy: its time
    stretches by the mean of the ``cpu`` and ``parallel`` workloads' stretches, weighted by how
    far ``cores`` lies from one core towards all of them. None when either factor is unknown."""
    weight = min(1.0, max(0.0, (cores - 1) / (cpus - 1))) if cpus > 1 else 0.0
    return blended_factor(cpu, parallel, weight)


MEMORY_SHARE = 0.5  # of a ``memory`` row's time, the memory-bound part (the rest is cache-resident)


def memory_factor(cputime: float | None, memory: float | None) -> float | None:
    """The factor of a ``memory`` row: ``MEMORY_SHARE`` of its time stretches like the ``memory``
    workload's, the rest like the ``cpu`` workload's timed in CPU time (``cputime``). None when
    either factor is unknown."""
    return blended_factor(cputime, memory, MEMORY_SHARE)


def cpu_workload() -> Any:
    """The function that does the timed work, its fixed inputs built."""
    from benchmarks import calibration_workload

    return calibration_workload.make(RECORDS, SEARCHES)


def cpu_seconds(clock: Callable[[], float] = time.perf_counter) -> float:
    work = cpu_workload()
    work()  # warm: the selectors' compiled programs and per-device answers are cached from here on
    return best_round_seconds(work, clock)


def best_round_seconds(work: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> float:
    """The best of ``CPU_ROUNDS`` timed rounds of the ``cpu`` workload ``work``, already warmed."""
    samples = []
    for _ in range(CPU_ROUNDS):
        started = clock()
        work()
        samples.append(clock() - started)
    return min(samples)


def cputime_seconds() -> float:
    """The ``cpu`` workload's best round in CPU time: what it costs a process that is not kept
    waiting for a core, as the ``memory`` rows' rates per CPU-second are not."""
    return cpu_seconds(time.process_time)


def memory_seconds() -> float:
    """Best CPU time of a round of the memory workload over ``MEMORY_ROUNDS``, its heap built
    once. CPU time, not wall time: the rows it scales are rates per CPU-second, which a process
    waiting for a core does not change but a slower memory system does."""
    from benchmarks import memory_workload

    work = memory_workload.make()
    samples = []
    for _ in range(MEMORY_ROUNDS):
        gc.collect()  # each round starts with the collector in the same state, so does the same work
        started = time.process_time()
        work()
        samples.append(time.process_time() - started)
    del work
    gc.collect()  # the heap goes before the benchmark that runs next in this process
    return min(samples)


def processes(scale: str) -> int:
    """How many fresh processes measure ``scale`` after a module; the module takes their median."""
    return MEMORY_PROCESSES if scale == "memory" else 1


def _parallel_worker(start: Any, results: Any) -> None:
    work = cpu_workload()
    work()
    for _ in range(PARALLEL_ROUNDS):
        start.wait()
        results.put(parallel_pass_seconds(work))


def parallel_pass_seconds(work: Callable[[], object]) -> float:
    """One worker's share of a ``parallel`` round: ``PARALLEL_REPEAT`` runs of the ``cpu`` workload."""
    started = time.perf_counter()
    for _ in range(PARALLEL_REPEAT):
        work()
    return time.perf_counter() - started


def parallel_seconds() -> float:
    """Best over rounds of the mean time one process takes while every core runs one."""
    processes = os.cpu_count() or 1
    context = multiprocessing.get_context("spawn")  # a clean interpreter, as the benchmarks get
    start, results = context.Barrier(processes), context.Queue()
    workers = [context.Process(target=_parallel_worker, args=(start, results)) for _ in range(processes)]
    for w in workers:
        w.start()
    times = [results.get() for _ in range(processes * PARALLEL_ROUNDS)]
    for w in workers:
        w.join()
    return best_round(times, processes)


def best_round(times: list[float], processes: int) -> float:
    """The smallest mean over rounds of the processes' times, given in the order they arrived.

    A worker starts round k+1 only once every worker has finished round k (the barrier), so the
    k-th group of ``processes`` times is round k.
    """
    rounds = [times[i:i + processes] for i in range(0, len(times), processes)]
    return min(sum(r) / len(r) for r in rounds)


# A decisions-like table: the columns and sort key of the store's ``decisions`` table that its
# reads touch, filled from ``numbers()`` inside the engine (no Python rows, so the fill is fast and
# the same every time).
_SCAN_TABLE = """CREATE TABLE cal.decisions (time DateTime64(3, 'UTC'), decision_id String, tenant LowCardinality(String),
namespace LowCardinality(String), pod String, fallback Bool)
ENGINE = MergeTree ORDER BY (tenant, toStartOfHour(time), decision_id)"""
_SCAN_FILL = """INSERT INTO cal.decisions SELECT
toDateTime64('2026-11-01 00:00:00', 3, 'UTC') + toIntervalMillisecond((number * 604800000) DIV {rows}),
concat(hex(cityHash64(number)), hex(cityHash64(number, 1))), concat('tenant-', toString(number % 4)),
concat('tenant-', toString(number % 4), '-ml'), concat('pod-', toString(number % 50000)), number % 5 = 0
FROM numbers({rows})"""
SCAN_QUERIES = (
    "SELECT toUnixTimestamp64Milli(time), decision_id FROM cal.decisions "
    "ORDER BY time DESC, decision_id DESC LIMIT 1 BY decision_id LIMIT 51",
    "SELECT decision_id FROM cal.decisions WHERE namespace = 'tenant-1-ml' AND pod = 'pod-4321' "
    "ORDER BY time DESC LIMIT 1",
    "SELECT tenant, count(), countIf(fallback) FROM cal.decisions "
    "WHERE time >= '2026-11-03 00:00:00' AND time < '2026-11-04 00:00:00' GROUP BY tenant",
)


def scan_database(client: Any, rows: int = SCAN_ROWS) -> None:
    """Create and fill the synthetic table in database ``cal``, merged to one part as a settled
    store's would be."""
    client.command("CREATE DATABASE IF NOT EXISTS cal")
    client.command(_SCAN_TABLE)
    client.command(_SCAN_FILL.format(rows=rows))
    client.command("OPTIMIZE TABLE cal.decisions FINAL")


def scan_seconds() -> float:
    """Σ over the store's read shapes of the best time of each, on the fixed synthetic table."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from audit.store import connection

    with tempfile.TemporaryDirectory(prefix="bench-calibrate-") as work:
        client = connection.connect(connection.resolve_dsn(f"chdb://{work}/db"))
        scan_database(client)
        for sql in SCAN_QUERIES:
            client.query(sql)  # warm: marks and the first read of each column
        total = scan_pass(client)
        client.close()
    return total


def scan_pass(client: Any) -> float:
    """Σ over the read shapes of the best of ``SCAN_ROUNDS`` of each, on the table of ``scan_database``."""
    total = 0.0
    for sql in SCAN_QUERIES:
        samples = []
        for _ in range(SCAN_ROUNDS):
            started = time.perf_counter()
            client.query(sql)
            samples.append(time.perf_counter() - started)
        total += min(samples)
    return total


def load_reference() -> dict[str, Any]:
    with open(REFERENCE) as fh:
        reference: dict[str, Any] = json.load(fh)
    return reference


def factor(reference: dict[str, Any], scale: str, seconds: float) -> float | None:
    """The speed against the reference; None when the reference has no figure for ``scale``."""
    known = reference.get(f"{scale}_seconds")
    return float(known) / seconds if known else None


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    measure = {"cpu": cpu_seconds, "cputime": cputime_seconds, "memory": memory_seconds, "parallel": parallel_seconds, "scan": scan_seconds}[which]
    print(json.dumps({f"{which}_seconds": measure()}))
