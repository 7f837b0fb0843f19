"""``make bench``: run every ``benchmarks/bench_*.py`` and print one performance table.

Each bench module exposes ``run() -> list[dict]``; a row is ``{"issue", "name", "value", "unit",
"target", "note"}`` and optionally ``"scale"`` (``cpu``, ``memory``, ``parallel``, ``scan``, ``mixed``
or ``none``, see ``benchmarks.calibrate``; ``inline`` for a row that brings its own
``inline_factor``, measured between its rounds, ``benchmarks.interleaved``). Each module runs in a process of its own, so what one leaves behind
(caches, a large heap for the garbage collector to walk, open stores) does not slow the next;
that process first measures the machine's CPU speed, a fresh one measures it again right after
(the module's run takes the mean, ``around``), and a module with rows that scale with the
memory system, the store's scans or all cores is followed by a measurement of that speed. Every time and
rate is reported as measured and normalised to the reference machine (``benchmarks/reference.json``)
by the run's factor for its workload, the median of that workload's figures over the whole run
(``run_factors`` says why not the ones beside the row's own module, which each row keeps);
targets are judged on the normalised figure. Ratios against a baseline in the same run need no normalising. A module whose
figures are short latencies, tails of a few hundred requests or microsecond loops, sets ``BENCH_RUNS``
(default 1): it then runs that many times, each in a fresh process, and
each row reports the run whose figure is the median, with every run's in its note and
the spread of their figures (``spread_of``). A
single run of such a figure moves by a quarter or more with where its process lands and what the
kernel does meanwhile; the median of three does not. Those runs are spread over the whole run
(``later_passes``): every module runs once, then the ones that ask for more run again, pass by
pass, so a few busy minutes on the shared machine reach one run of a module, not all. A module
with a time or rate whose runs still spread wider than the ±20 % two runs of one commit must agree
in gets two more runs, widest first, as far as ``--extra-seconds`` allows (``widened``). ``--noise``
runs a CPU-burning process, pinned to one core, beside the whole run, to show that the normalised
figures hold.
The table is printed and written as JSON with the machine, the commit and the factors.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pkgutil
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from benchmarks import calibrate
from benchmarks.lifetime import ending_with_this_process


def machine() -> dict[str, Any]:
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"cpus": os.cpu_count(), "memory_gib": round(mem_gib, 1), "python": platform.python_version(),
            "platform": platform.platform()}


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else "unknown"


def run_module(name: str, rows_path: str) -> None:
    """Entry point of a module's own process: measure the CPU's speed, run the module, write both."""
    cpu = calibrate.cpu_seconds()
    module = importlib.import_module(f"benchmarks.{name}")
    rows = module.run()
    with open(rows_path, "w") as fh:
        json.dump({"cpu_seconds": cpu, "rows": rows, "runs": int(getattr(module, "BENCH_RUNS", 1))}, fh)


def _in_own_process(args: list[str], what: str) -> str:
    done = subprocess.run([sys.executable, "-m", *args], check=False, stdout=subprocess.PIPE, text=True,
                          preexec_fn=ending_with_this_process())
    if done.returncode != 0:
        raise SystemExit(f"{what} failed with exit code {done.returncode}")
    return done.stdout


def _module_in_own_process(name: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="bench-rows-") as work:
        path = os.path.join(work, "rows.json")
        _in_own_process(["benchmarks.run", "--module", name, "--rows-to", path], f"benchmark {name}")
        with open(path) as fh:
            result: dict[str, Any] = json.load(fh)
    return result


SHARED_SCALES = ("cputime", "memory", "parallel", "scan")  # measured in processes of their own, after the module


# the calibrations a blended scale takes (``calibrate.mixed_factor``, ``calibrate.memory_factor``)
TAKES = {"mixed": ("cpu", "parallel"), "memory": ("cputime", "memory")}


Measured = list[tuple[dict[str, Any], dict[str, float]]]  # a run's rows, each with its calibrations' seconds


def _measured_run(name: str) -> tuple[Measured, int]:
    """One run of a module in its own process, followed by the shared calibrations its rows take;
    and how many runs the module asks for."""
    result = _module_in_own_process(name)
    seconds = {"cpu": around(result["cpu_seconds"], _calibration_seconds("cpu"))}
    for scale in shared_calibrations(result["rows"]):
        seconds[scale] = _calibration_seconds(scale)
    return [(r, seconds) for r in result["rows"]], int(result.get("runs", 1))


def around(before: float, after: float) -> float:
    """The ``cpu`` workload's seconds for a module's run: the mean of its figure in the module's
    process just before the run and in a fresh process just after it, one of the run's figures
    for ``run_factors`` and the one the module's rows keep to show the machine's speed around it."""
    return (before + after) / 2


def shared_calibrations(rows: list[dict[str, Any]]) -> list[str]:
    """The calibrations after a module's run that its rows' scales take, in ``SHARED_SCALES`` order."""
    taken = {s for r in rows for s in TAKES.get(scale_of(r), (scale_of(r),))}
    return [scale for scale in SHARED_SCALES if scale in taken]


def _calibration_seconds(scale: str, processes: int = 0) -> float:
    """The median of the figures of ``processes`` fresh processes, one after the other; by default
    ``calibrate.processes(scale)`` of them (one for most scales)."""
    samples = []
    for _ in range(processes or calibrate.processes(scale)):
        out = _in_own_process(["benchmarks.calibrate", scale], f"{scale} calibration")
        samples.append(float(json.loads(out)[f"{scale}_seconds"]))
    if len(samples) > 1:
        print(f"# {scale} calibration: {', '.join(f'{s:.3f}' for s in samples)} s, median {statistics.median(samples):.3f}",
              file=sys.stderr, flush=True)
    return statistics.median(samples)


def scale_of(row: dict[str, Any]) -> str:
    return str(row.get("scale") or calibrate.default_scale(row["unit"]))


def annotate(row: dict[str, Any], factors: dict[str, float | None], cpus: int = os.cpu_count() or 1) -> dict[str, Any]:
    """The row with the factor it was normalised by and its normalised value (``None`` for rows
    that need none — ratios, counts, sizes — and for rows whose factor is unknown)."""
    scale = scale_of(row)
    if scale == "none" or calibrate.kind(row["unit"]) == "other" or not isinstance(row["value"], int | float):
        return {**row, "scale": "none", "factor": None, "normalised": None}
    if scale == "mixed":
        f = calibrate.mixed_factor(factors.get("cpu"), factors.get("parallel"), float(row["cores"]), cpus)
    elif scale == "memory":
        f = calibrate.memory_factor(factors.get("cputime"), factors.get("memory"))
    elif scale == "inline":  # normalised round by round in the module's own process (benchmarks.interleaved)
        f = row.get("inline_factor")
    else:
        f = factors.get(scale)
    if f is None:
        return {**row, "scale": scale, "factor": None, "normalised": None}
    value = calibrate.normalise(float(row["value"]), row["unit"], f)
    return {**row, "scale": scale, "factor": round(f, 3), "normalised": round(value, 3 if abs(value) < 100 else 1)}


def burner_core(available: set[int]) -> int | None:
    """The core ``--noise`` pins its burner to: the highest this process may run on, or None (no
    pinning) when it may run on one core only, where pinning would change nothing."""
    return max(available) if len(available) >= 2 else None


# the busy loop of the burner and the spinners, which end with the run (``benchmarks.lifetime``)
SPIN = "while True:\n    pass\n"


class Noise:
    """A process that burns one core for as long as the run lasts (``--noise``).

    It is pinned to one core (``burner_core``). Left free, the kernel moves it from core to core
    as it balances load, now onto the core a single-process benchmark was running on, now off it,
    so how much of the burner a figure shares would change from one sample to the next; pinned, it
    always takes the same core, the kernel's balancing keeps single-process work on the others,
    and work on every core always shares that one.
    """

    def __init__(self, enabled: bool) -> None:
        self.proc = None
        self.core: int | None = None
        if enabled:
            self.core = burner_core(os.sched_getaffinity(0))
            pin = f"os.sched_setaffinity(0, {{{self.core}}})\n" if self.core is not None else ""
            self.proc = subprocess.Popen([sys.executable, "-c", "import os\n" + pin + SPIN],
                                         preexec_fn=ending_with_this_process())

    def __enter__(self) -> Noise:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


class Awake:
    """One spinner per core at the ``SCHED_IDLE`` policy for as long as the run lasts: it runs only
    when nothing else wants the core, so it takes no time from the benchmarks or from ``--noise``,
    but no core ever sleeps. A sleeping core wakes late, so without it short requests between two
    processes measure faster beside a burned core than on a quiet machine.

    Each spinner is pinned to its own core. Left free, the kernel gathers them where they cost
    least: beside ``--noise``'s burner, both sat on its core nearly all the time, so the core left
    to the benchmarks slept whenever they waited, as it does not in a quiet run."""

    def __init__(self, enabled: bool) -> None:
        self.cores = sorted(os.sched_getaffinity(0)) if enabled else []
        self.procs = [subprocess.Popen([sys.executable, "-c", spinner(core)],
                                       preexec_fn=ending_with_this_process()) for core in self.cores]

    def __enter__(self) -> Awake:
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            proc.kill()
            proc.wait()


def spinner(core: int) -> str:
    """The program of an ``Awake`` spinner on ``core``: pinned there, at idle priority, spinning."""
    return (f"import os; os.sched_setaffinity(0, {{{core}}}); "
            "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n" + SPIN)


def median_rows(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per benchmark from several annotated runs of a module: the run whose normalised
    figure (the measured one where none is normalised) is the median (the lower middle one for an
    even count), so the value, factor and note shown stay those of one real run."""
    if len(runs) == 1:
        return runs[0]
    by_name: dict[str, list[dict[str, Any]]] = {}
    for rows in runs:
        for row in rows:
            by_name.setdefault(row["name"], []).append(row)
    chosen: list[dict[str, Any]] = []
    for row in runs[0]:
        candidates = by_name.pop(row["name"], [])
        numeric = [r for r in candidates if isinstance(_figure(r), int | float)]
        if len(numeric) < 2:
            chosen.append(row)
            continue
        numeric.sort(key=lambda r: float(_figure(r)))
        middle = numeric[(len(numeric) - 1) // 2]
        figures = ", ".join(_shown(_figure(r)) for r in candidates if r in numeric)
        note = f"{middle.get('note', '')}; " if middle.get("note") else ""
        chosen.append({**middle, "note": f"{note}median of {len(numeric)} runs ({figures})",
                       "spread": spread_of([float(_figure(r)) for r in numeric])})
    return chosen


def spread_of(figures: list[float]) -> float | None:
    """How far a row's runs in one ``make bench`` lie apart: the largest figure over the smallest
    (1.0 when they agree; the same for times and rates), rounded to three places. None for fewer
    than two figures or any at or below zero, which have no such ratio. A row whose runs spread
    wider than the band two ``make bench`` runs are compared in can fail that comparison by
    measurement alone."""
    if len(figures) < 2 or min(figures) <= 0:
        return None
    return round(max(figures) / min(figures), 3)


def later_passes(wanted: dict[str, int]) -> list[list[str]]:
    """The modules each pass after the first runs again, in the order given: the k-th pass holds
    every module that asks for k runs or more.

    A module's runs are spread over the whole ``make bench`` this way, minutes apart, rather than
    made one after the other: whatever else the shared machine does for a few minutes then lands
    in one of a module's runs, which the median sets aside, not in all of them."""
    return [[name for name, runs in wanted.items() if runs > k] for k in range(1, max(wanted.values(), default=1))]


SPREAD_BAND = 1.2  # the ±20 % within which two runs of one commit must agree, as a spread
EXTRA_RUNS = 2  # five runs instead of three: the median then sets two disturbed runs aside, not one
# What those extra runs may add to a make bench, by default. At 120 s only the short modules fitted:
# in one quiet run the OTel export's and the store's three runs spread 1.56 and 1.24, got no more
# runs (70-80 s each), and their medians moved 24 % and 27 % against the run beside --noise.
EXTRA_SECONDS = 600.0


def widened(modules: dict[str, tuple[float, float]], budget: float, band: float = SPREAD_BAND,
            extra: int = EXTRA_RUNS) -> list[str]:
    """The modules that get ``extra`` more runs, from each module of several runs' widest row
    spread and seconds per run: those with a time or rate whose runs lie further apart than
    ``band``, widest first, each as long as its extra runs fit in what is left of ``budget``
    seconds. A module stays on its own runs' count otherwise, so the run's length stays bounded."""
    chosen = []
    left = budget
    for name, (spread, seconds) in sorted(modules.items(), key=lambda item: -item[1][0]):
        if spread > band and extra * seconds <= left:
            chosen.append(name)
            left -= extra * seconds
    return chosen


def widest_spread(runs: list[Measured]) -> float:
    """The widest spread over a module's runs among its times and rates (1.0 for none), on their
    measured figures: every row of a ``make bench`` is normalised by the same factor of its
    workload (``run_factors``), so measured and normalised figures spread alike."""
    rows = median_rows([[row for row, _ in run] for run in runs])
    return max((float(r["spread"]) for r in rows if r.get("spread") and calibrate.kind(r["unit"]) != "other"),
               default=1.0)


def _attempt(name: str, number: int, failed: list[str], of: int) -> tuple[Measured, int, float] | None:
    """Run ``name`` once (its ``number``-th run, of ``of`` when known): its rows, the runs it asks
    for and the seconds it took; None, noted in ``failed``, when it fails: the others' figures
    are still worth having."""
    started = time.perf_counter()
    which = f"run {number} of {of}" if of else f"run {number}"
    print(f"# {name} ({which}) ...", file=sys.stderr, flush=True)
    try:
        run, wanted = _measured_run(name)
    except SystemExit as exc:
        failed.append(f"{name}: {exc}")
        print(f"# {name} FAILED: {exc}", file=sys.stderr, flush=True)
        return None
    took = time.perf_counter() - started
    print(f"# {name} ({which}) done in {took:.1f}s", file=sys.stderr, flush=True)
    return run, wanted, took


Attempt = Callable[[str, int, int], tuple[Measured, int, float] | None]  # ``_attempt`` without its failure list


def run_modules(names: list[str], attempt: Attempt, extra_seconds: float) -> dict[str, list[Measured]]:
    """Every module's runs, by name, for the modules that did not fail: each runs once, in the
    order given; then again, pass by pass, until it has the runs it asks for (``later_passes``);
    then the modules ``widened`` picks run ``EXTRA_RUNS`` more times, pass by pass too.
    ``attempt(name, number, of)`` makes a module's ``number``-th run (``of`` runs, 0 while not
    known) and gives its rows, the runs it asks for and its seconds, or None when it failed."""
    runs_of: dict[str, list[Measured]] = {}
    wanted: dict[str, int] = {}
    took: dict[str, list[float]] = {}

    def again(passes: list[list[str]]) -> None:
        for group in passes:
            for name in group:
                if name not in runs_of:  # failed in an earlier pass
                    continue
                got = attempt(name, len(runs_of[name]) + 1, wanted[name])
                if got is None:
                    del runs_of[name]
                else:
                    runs_of[name].append(got[0])
                    took[name].append(got[2])

    for name in names:
        got = attempt(name, 1, 0)
        if got is not None:
            runs_of[name], wanted[name], took[name] = [got[0]], got[1], [got[2]]
    again(later_passes(wanted))
    spreads = {name: (widest_spread(runs), statistics.mean(took[name]))
               for name, runs in runs_of.items() if wanted[name] > 1}
    more = widened(spreads, extra_seconds)
    for name in more:
        wanted[name] += EXTRA_RUNS
        print(f"# {name}: a row's runs spread {spreads[name][0]:.2f}, wider than {SPREAD_BAND:g}: "
              f"{EXTRA_RUNS} more runs", file=sys.stderr, flush=True)
    again([more] * EXTRA_RUNS)
    return runs_of


CALIBRATIONS = ("cpu", *SHARED_SCALES)


def run_calibrations(module_runs: list[list[Measured]]) -> dict[str, list[float]]:
    """Every figure each workload measured in the run, in seconds, sorted: one per module run that
    took it (the rows of a module's run share their calibrations)."""
    seconds: dict[str, list[float]] = {scale: [] for scale in CALIBRATIONS}
    for runs in module_runs:
        for run in runs:
            for scale, s in (run[0][1] if run else {}).items():
                seconds.setdefault(scale, []).append(s)
    return {scale: sorted(figures) for scale, figures in seconds.items()}


def run_factors(calibrations: dict[str, list[float]], reference: dict[str, Any]) -> dict[str, float | None]:
    """The factor every row of a run is normalised by, per workload: the median of that workload's
    figures over the whole run against the reference (None for a workload the run did not measure
    or the reference lacks).

    Not the figures measured beside the row's own module. The shared machine's speed swings on a
    scale of seconds: within one quiet run the ``cpu`` workload took from 41 to 69 ms, and a module's
    rows did not follow the figures taken just before and after it. Two quiet runs of one commit,
    on two days, each row normalised by its own module's calibrations: 40 of 94 rows more than
    20 % apart, more than their measured figures (31); by each run's medians: 23."""
    return {scale: calibrate.factor(reference, scale, statistics.median(figures)) if figures else None
            for scale, figures in calibrations.items()}


def normalised_rows(module_runs: list[list[Measured]], factors: dict[str, float | None]) -> list[dict[str, Any]]:
    """Every module's rows annotated with the run's ``factors``, one row per benchmark
    (``median_rows``), each keeping the calibrations measured beside its own run, which show
    what the machine did around it."""
    return [row for runs in module_runs for row in median_rows([
        [{**annotate(row, factors), "calibration": seconds} for row, seconds in run] for run in runs])]


def _figure(row: dict[str, Any]) -> Any:
    return row["normalised"] if row.get("normalised") is not None else row["value"]


def _rounded(value: float | None) -> float | None:
    return round(value, 3) if value is not None else None


def _shown(value: Any) -> str:
    if value is None:
        return ""
    return f"{value:,.3f}" if isinstance(value, float) else f"{value:,}"


def selected(module: str, only: str) -> bool:
    """Whether ``--only`` (comma-separated substrings; empty for every module) picks ``module``."""
    return any(part in module for part in only.split(","))


def previous_results(path: str) -> str:
    """Where a run keeps the results file it replaces: ``results.json`` -> ``results.previous.json``."""
    root, ext = os.path.splitext(path)
    return f"{root}.previous{ext or '.json'}"


def keep_previous(path: str) -> None:
    """Move the last run's results aside before a new run writes its own, so that
    ``benchmarks.compare`` can always set the two side by side."""
    if os.path.exists(path):
        os.replace(path, previous_results(path))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", default="benchmarks/results.json")
    parser.add_argument("--only", default="",
                        help="run only the bench modules whose names contain one of these comma-separated substrings")
    parser.add_argument("--noise", action="store_true", help="burn one core in another process during the run")
    parser.add_argument("--awake", action=argparse.BooleanOptionalAction, default=True,
                        help="keep every core awake with idle-priority spinners (the default)")
    parser.add_argument("--extra-seconds", type=float, default=EXTRA_SECONDS,
                        help="seconds the extra runs of modules whose rows' runs spread wider than the band may add "
                             f"(default {EXTRA_SECONDS:g}; 0 for none)")
    parser.add_argument("--set-reference", action="store_true",
                        help="make this run's calibration the reference (factor 1.0) in benchmarks/reference.json")
    parser.add_argument("--module", help=argparse.SUPPRESS)  # set for a module's own process
    parser.add_argument("--rows-to", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.module:
        run_module(args.module, args.rows_to)
        return 0
    import benchmarks

    names = [info.name for info in sorted(pkgutil.iter_modules(benchmarks.__path__), key=lambda m: m.name)
             if info.name.startswith("bench_") and selected(info.name, args.only)]
    failed: list[str] = []
    with Awake(args.awake), Noise(args.noise):
        runs_of = run_modules(names, lambda name, number, of: _attempt(name, number, failed, of), args.extra_seconds)
    module_runs = [runs_of[name] for name in names if name in runs_of]
    calibrations = run_calibrations(module_runs)
    if args.set_reference:
        earlier = calibrate.load_reference() if calibrate.REFERENCE.exists() else {}
        reference = {f"{scale}_seconds": statistics.median(r) if r else earlier.get(f"{scale}_seconds")
                     for scale, r in calibrations.items()}
        reference.update(commit=commit(), machine=machine())
        with open(calibrate.REFERENCE, "w") as fh:
            json.dump(reference, fh, indent=2)
            fh.write("\n")
    reference = calibrate.load_reference() if calibrate.REFERENCE.exists() else {}
    factors = run_factors(calibrations, reference)
    rows = normalised_rows(module_runs, factors)
    summary = {scale: _rounded(f) for scale, f in factors.items()}
    print("speed factor against the reference: " + ", ".join(f"{k} {v}" for k, v in summary.items())
          + (" (with --noise)" if args.noise else ""))
    print(f"{'issue':<6} {'benchmark':<62} {'measured':>14} {'normalised':>14} {'spread':>7} {'unit':<10} "
          "target (normalised)")
    for r in rows:
        spread = f"{r['spread']:.2f}" if r.get("spread") else ""
        print(f"{r['issue']:<6} {r['name']:<62} {_shown(r['value']):>14} {_shown(r['normalised']):>14} {spread:>7} "
              f"{r['unit']:<10} {r.get('target', '')}")
    keep_previous(args.json)
    with open(args.json, "w") as fh:
        json.dump({"machine": machine(), "commit": commit(), "noise": args.noise, "awake": args.awake, "factor": summary,
                   "calibration": {f"{scale}_seconds": r for scale, r in calibrations.items()},
                   "reference": reference, "failed": failed, "rows": rows}, fh, indent=2)
    if failed:
        print("failed benchmarks:\n  " + "\n  ".join(failed), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
