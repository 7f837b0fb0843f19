"""Helper processes that measure a calibration's speed on demand, between the rounds of a run.

Rows timed round by round (``benchmarks.interleaved.paced_by``) take the speed of the machine
measured just around each round. The ``cpu`` workload can be timed in the measured process
itself; two calibrations cannot, and run in helper processes started once per module:

- ``MemoryPacer``, for rates per CPU-second of a process holding hundreds of megabytes (a
  simulated day, a replay), normalised by a blend of the ``cputime`` and ``memory`` calibrations
  (``calibrate.memory_factor``). Measured in fresh processes after the module, that blend missed
  how the shared machine's speed moved during the module: in one quiet ``make bench`` the three
  runs of one simulated day spread 1.4-1.6x, and the same days moved 24-43 % (both ways) between a
  quiet run and a ``--noise`` one. The helper builds both workloads once and times a pass of each
  in CPU time as the calibrations do: the ``cpu`` workload best of ``calibrate.CPU_ROUNDS``, one
  round of the memory workload after a collection. Not in the measured process: the memory
  workload's heap (about 200 MB) and the collections before its rounds would change the work being
  measured; nor in a fresh process per pass, which would bring back the 15-20 % spread between
  fresh processes that ``calibrate`` describes.
- ``ParallelPacer``, for rows whose work keeps several cores busy (``calibrate``'s ``parallel``
  and ``mixed`` scales): one worker per core, each with the ``cpu`` workload built, started
  together on a barrier for each pass, timed as ``calibrate.parallel_seconds`` times one round;
  by the mean helper or by the slowest one.
- ``MixedPacer``, for rows of ``calibrate``'s ``mixed`` blend: the ``cpu`` workload timed in the
  measured process, beside a ``ParallelPacer``.
- ``ScanPacer``, for reads led by the store's scans (``calibrate``'s ``scan`` scale): the fixed
  synthetic table built once in an embedded chDB of its own (chDB keeps one database per
  process), each pass timing the read shapes as ``calibrate.scan_seconds`` does.

The measured process waits for the answer and takes no CPU meanwhile.
"""

from __future__ import annotations

import gc
import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any

from benchmarks import calibrate


class _Helpers:
    """Processes running ``target(conn, *args)``, which builds its workload, sends "ready" and then
    answers each "pass" with a pass's figures until it receives None."""

    def __init__(self, target: Callable[..., None], count: int = 1, barrier: bool = False) -> None:
        context = multiprocessing.get_context("spawn")  # a clean interpreter, as the calibrations get
        args = (context.Barrier(count),) if barrier else ()
        self._conns: list[Connection] = []
        self._processes = []
        for _ in range(count):
            conn, child = context.Pipe()
            process = context.Process(target=target, args=(child, *args), daemon=True)
            process.start()
            child.close()
            self._conns.append(conn)
            self._processes.append(process)
        for conn in self._conns:
            conn.recv()

    def ask(self) -> list[Any]:
        """One pass in every helper at once; their answers."""
        for conn in self._conns:
            conn.send("pass")
        return [conn.recv() for conn in self._conns]

    def close(self) -> None:
        for conn in self._conns:
            conn.send(None)
        for process in self._processes:
            process.join(timeout=60)
        for conn in self._conns:
            conn.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _memory_helper(conn: Connection) -> None:
    from benchmarks import memory_workload

    cpu = calibrate.cpu_workload()
    cpu()  # warm, as the calibration does
    memory = memory_workload.make()
    conn.send("ready")
    while conn.recv() is not None:
        cputime = calibrate.best_round_seconds(cpu, time.process_time)
        gc.collect()  # each round starts with the collector in the same state (calibrate.memory_seconds)
        started = time.process_time()
        memory()
        conn.send((cputime, time.process_time() - started))


class MemoryPacer(_Helpers):
    """A helper process answering ``speed()``: the ``memory`` scale's factor of this moment."""

    def __init__(self, reference: dict[str, Any] | None = None) -> None:
        known = reference or calibrate.load_reference()
        self._cputime_reference = float(known["cputime_seconds"])
        self._memory_reference = float(known["memory_seconds"])
        super().__init__(_memory_helper)
        self.last: tuple[float, float] = (0.0, 0.0)  # the latest pass's CPU seconds: cpu workload, memory workload

    def speed(self) -> float:
        """One pass of both workloads; their factors blended as a ``memory`` row's are."""
        [(cputime, memory)] = self.ask()
        self.last = (cputime, memory)
        blended = calibrate.memory_factor(self._cputime_reference / cputime, self._memory_reference / memory)
        assert blended is not None  # both factors are known
        return blended


def _parallel_helper(conn: Connection, start: Any) -> None:
    work = calibrate.cpu_workload()
    work()
    conn.send("ready")
    while conn.recv() is not None:
        start.wait()
        conn.send(calibrate.parallel_pass_seconds(work))


class ParallelPacer(_Helpers):
    """Helper processes, one per core, answering ``speed()``: the ``parallel`` scale's factor of
    this moment (the reference's seconds over the mean time of one pass per helper).

    ``slowest_speed()`` takes the slowest helper's pass instead, for work split into one thread
    per core that is done when its last thread is (a query the engine runs on every core). Beside
    ``--noise``'s burner, pinned to one core, the helpers do not share it equally within a pass:
    over 40 passes the slowest took a median 1.16x the mean (1.008x on a quiet machine), and a
    grouped scan over a million decisions' pods slowed 1.67x where the mean pass slowed 1.36x.
    Both take the ``parallel`` reference, the best round's mean: on a quiet machine the slowest
    helper is within 1 % of it."""

    def __init__(self, reference: dict[str, Any] | None = None, workers: int = 0) -> None:
        self._reference = float((reference or calibrate.load_reference())["parallel_seconds"])
        super().__init__(_parallel_helper, workers or os.cpu_count() or 1, barrier=True)
        self.last: list[float] = []  # the latest pass's seconds, one per helper

    def speed(self) -> float:
        self.last = self.ask()
        return self._reference / (sum(self.last) / len(self.last))

    def slowest_speed(self) -> float:
        self.last = self.ask()
        return self._reference / max(self.last)


def _scan_helper(conn: Connection) -> None:
    from audit.store import connection

    with tempfile.TemporaryDirectory(prefix="bench-scan-pacer-") as work:
        client = connection.connect(connection.resolve_dsn(f"chdb://{work}/db"))
        calibrate.scan_database(client)
        for sql in calibrate.SCAN_QUERIES:
            client.query(sql)  # warm: marks and the first read of each column
        conn.send("ready")
        while conn.recv() is not None:
            conn.send(calibrate.scan_pass(client))
        client.close()


class ScanPacer(_Helpers):
    """A helper process answering ``speed()``: the ``scan`` scale's factor of this moment."""

    def __init__(self, reference: dict[str, Any] | None = None) -> None:
        self._reference = float((reference or calibrate.load_reference())["scan_seconds"])
        super().__init__(_scan_helper)

    def speed(self) -> float:
        [seconds] = self.ask()
        return self._reference / float(seconds)


class MixedPacer:
    """For ``mixed`` rows: the ``cpu`` workload timed in this process (as ``interleaved.paced``
    does) and a ``ParallelPacer``; ``speed()`` gives both factors, ``factor`` blends them for the
    cores a row declares (``calibrate.mixed_factor``)."""

    def __init__(self, reference: dict[str, Any] | None = None) -> None:
        known = reference or calibrate.load_reference()
        self._cpu_reference = float(known["cpu_seconds"])
        self._work = calibrate.cpu_workload()
        self._work()  # warm, as the calibration does
        self._parallel = ParallelPacer(known)

    def speed(self) -> tuple[float, float]:
        started = time.perf_counter()
        self._work()
        return self._cpu_reference / (time.perf_counter() - started), self._parallel.speed()

    @staticmethod
    def factor(speeds: tuple[float, ...], cores: float) -> float:
        """``speeds`` as ``speed`` returns them, or as ``interleaved.faster_each`` keeps them."""
        cpu, parallel = speeds
        blended = calibrate.mixed_factor(cpu, parallel, cores, os.cpu_count() or 1)
        assert blended is not None  # both factors measured
        return blended

    def close(self) -> None:
        self._parallel.close()

    def __enter__(self) -> MixedPacer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
