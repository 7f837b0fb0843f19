"""The ``memory`` rows' speed factor, measured on demand between the slices of one long run.

A simulated day or a replay is a rate per CPU-second of a process holding hundreds of megabytes,
normalised by a blend of the ``cputime`` and ``memory`` calibrations (``calibrate.memory_factor``).
Measured in fresh processes after the module, that blend missed how the shared machine's speed
moved during the module: in one quiet ``make bench`` the three runs of one simulated day spread
1.4-1.6x, and the same days moved 24-43 % (both ways) between a quiet run and a ``--noise`` one.
Timed between the slices of the run (``benchmarks.interleaved.paced_by``), the factor follows the
minutes it describes, as the short rows' ``cpu`` passes do.

The passes run in one helper process started once, not in the measured process: the memory
workload's heap (about 200 MB) and the collections before its rounds would otherwise change the
work being measured, and a fresh process per pass would bring back the 15-20 % spread between
fresh processes that ``calibrate`` describes. The helper builds both workloads once; each pass
times them as the calibrations do, in CPU time: the ``cpu`` workload best of
``calibrate.CPU_ROUNDS`` and one round of the memory workload after a collection. The measured
process waits for the answer and takes no CPU meanwhile.
"""

from __future__ import annotations

import gc
import multiprocessing
import time
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any

from benchmarks import calibrate


def _serve(conn: Connection) -> None:
    from benchmarks import memory_workload

    cpu = calibrate.cpu_workload()
    cpu()  # warm, as the calibration does
    memory = memory_workload.make()
    conn.send("ready")
    while conn.recv() is not None:
        cpu_rounds = []
        for _ in range(calibrate.CPU_ROUNDS):
            started = time.process_time()
            cpu()
            cpu_rounds.append(time.process_time() - started)
        gc.collect()  # each round starts with the collector in the same state (calibrate.memory_seconds)
        started = time.process_time()
        memory()
        conn.send((min(cpu_rounds), time.process_time() - started))


class MemoryPacer:
    """A helper process answering ``speed()``: the ``memory`` scale's factor of this moment."""

    def __init__(self, reference: dict[str, Any] | None = None) -> None:
        known = reference or calibrate.load_reference()
        self._cputime_reference = float(known["cputime_seconds"])
        self._memory_reference = float(known["memory_seconds"])
        context = multiprocessing.get_context("spawn")  # a clean interpreter, as the calibrations get
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child,), daemon=True)
        self._process.start()
        child.close()
        self._conn.recv()  # both workloads built and warmed
        self.last: tuple[float, float] = (0.0, 0.0)  # the latest pass's CPU seconds: cpu workload, memory workload

    def speed(self) -> float:
        """One pass of both workloads; their factors blended as a ``memory`` row's are."""
        self._conn.send("pass")
        cputime, memory = self.last = self._conn.recv()
        blended = calibrate.memory_factor(self._cputime_reference / cputime, self._memory_reference / memory)
        assert blended is not None  # both factors are known
        return blended

    def close(self) -> None:
        self._conn.send(None)
        self._process.join(timeout=60)
        self._conn.close()

    def __enter__(self) -> MemoryPacer:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()
