"""Counting the cores a benchmark row keeps busy: its own CPU and its servers'."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from benchmarks.cores import Busy, process_cpu

# waits for a line, burns BURN CPU seconds, says so, then waits for its input to close
BURNER = """
import sys, time
sys.stdin.readline()
start = time.process_time()
while time.process_time() - start < float(sys.argv[1]):
    pass
print("burnt", flush=True)
sys.stdin.read()
"""
BURN = 0.3


def test_a_span_counts_the_cpu_a_server_process_spent_in_it() -> None:
    proc = subprocess.Popen([sys.executable, "-c", BURNER, str(BURN)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        busy = Busy(proc.pid)
        assert proc.stdin is not None and proc.stdout is not None
        with busy.span():
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert proc.stdout.readline() == "burnt\n"
        # the server burnt BURN seconds inside the span (counted in clock ticks: one tick of slack)
        assert busy.cpu >= BURN - 1 / os.sysconf("SC_CLK_TCK")
        assert busy.cores() == pytest.approx(busy.cpu / busy.wall)
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait()


def test_a_span_counts_this_process_own_cpu() -> None:
    busy = Busy()
    with busy.span():
        start = time.process_time()
        while time.process_time() - start < 0.05:
            pass
    assert busy.cpu >= 0.05
    assert Busy().cores() == 0.0  # no span timed yet


def test_process_cpu_reads_the_same_clock_as_process_time() -> None:
    # /proc/self/stat and the process clock count the same CPU, the first in whole ticks
    before = time.process_time()
    read = process_cpu(os.getpid())
    after = time.process_time()
    assert before - 2 / os.sysconf("SC_CLK_TCK") <= read <= after + 1 / os.sysconf("SC_CLK_TCK")


def test_threads_waiting_for_a_core_count_as_ready_but_not_as_busy() -> None:
    # three burners pinned to one core: each gets a third of it, but all three are ready all along
    procs = [subprocess.Popen([sys.executable, "-c", BURNER, str(BURN)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True) for _ in range(3)]
    try:
        core = min(os.sched_getaffinity(0))
        for p in procs:
            os.sched_setaffinity(p.pid, {core})
        busy = Busy(*(p.pid for p in procs))
        with busy.span():
            for p in procs:
                assert p.stdin is not None
                p.stdin.write("go\n")
                p.stdin.flush()
            for p in procs:
                assert p.stdout is not None and p.stdout.readline() == "burnt\n"
        # one core's worth of CPU at most, but about three threads ready to run throughout
        assert busy.cores() <= 1.0 + 3 / os.sysconf("SC_CLK_TCK") / busy.wall
        assert busy.ready >= 3 * BURN
        assert busy.wanted() > 2.0
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
            p.wait()
