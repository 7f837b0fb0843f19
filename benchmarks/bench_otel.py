"""OpenTelemetry export CPU per decision against the engine's, and OTLP receiver throughput.

Headline (target ≤ 10 %): the total CPU that exporting every decision costs, caller plus any
helper, against the engine's CPU per decision in the same run. Export runs the way
``claimtrail simulate --otel`` runs it: ``DecisionExporter`` keeps each record and a sender thread
in the engine's process encodes OTLP protobuf from the records and POSTs the batches, so the
engine process's CPU (all its threads, ``time.process_time``) holds all of it. A seeded slice of ``bench_engine``'s day
scenario (each decision 4 spans, root and three tiers, plus its verdicts as log records) runs in
pairs, bare and exporting back to back (the order alternates), several pairs in each of a few
fresh processes after warm-up slices of both: what a long-running engine pays. Each pair
simulates a seed of its own (``engine_plan``), which no earlier run of its process exported: the
encoder keeps the encoding of what recurs (a root's stable fields, a tier, a verdict's device and
node, device sets, reason counts, parsed times) and a long-running engine's decisions are all new
(new pods, claims and times) while its nodes, models, tenants and policies recur; a pair that
re-ran the seed before it would find exactly its own decisions' pieces kept, which no engine does
(such pairs cost the encoder about a fifth fewer instructions per decision). The warm-up slice
(another seed) warms the code and what recurs, as a running engine has it warm; bare and
exporting runs of a pair simulate the same seed, so their difference is the export's alone. The
median pair is the headline, every pair's figure in its note; flushing is inside the timed part,
the bench's own count of what was sent (for the delivery check) outside it, and every decision
and verdict sent must have arrived ("all delivered").

For comparison, in the same run: the export child of before (``ExporterProcess``: the engine's
side plus the child's own CPU, reported by the child) and the SDK in the engine's process
(``DecisionTelemetry``). Export goes to a counting OTLP/HTTP backend in a process of its own
(protobuf-decodes each request, counts decision root spans and verdict log records; lower
priority, as a backend would be on other machines; its CPU is not export's). A synthetic loop of
fixed decisions adds the caller-thread and process CPU per decision. Receiver: pre-encoded OTLP
protobuf batches POSTed to ClaimTrail's receiver (``/v1/traces``, its own process), decisions
stored per second, plus decoding alone.
"""

from __future__ import annotations

import gc
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.interleaved import Interleaved, interleaved
from benchmarks.lifetime import ending_with_this_process

BENCH_RUNS = 3  # short latencies and tails: make bench reports the median of three runs
REPO = Path(__file__).resolve().parents[1]
TARGET_SHARE = 0.10
TARGET = f"<= {TARGET_SHARE * 100:.0f} %"
EXPORT_DECISIONS = 2000
WARM_UP = 50
RECEIVER_DECISIONS = 3000
BATCH = 100
DECODE_ROUNDS = 6  # RECEIVER_DECISIONS / BATCH requests split evenly
ENGINE_HOURS = 0.25
ENGINE_PROCESSES = 4
ENGINE_ROUNDS = 10  # bare/exporting pairs per engine process: one pair varies by ~3 points, 40 pairs bring the median to ~0.6
ENGINE_PAIRS = ENGINE_PROCESSES * ENGINE_ROUNDS
CONTEXT_RUNS = 2
WARM_UP_SEED = 1  # bench_engine's seed: every engine process warms up with this slice, timed on none
PAIR_VARIANTS = ("bare", "direct")
HEADLINE = "OTel export CPU vs engine CPU per decision (direct OTLP, caller + helpers)"


def serve_receiver(port: int) -> None:
    """Entry point of the receiver process: ClaimTrail's OTLP/HTTP receiver + a count endpoint."""
    import uvicorn
    from fastapi import FastAPI

    from ingest.otlp import MemorySink, make_router

    sink = MemorySink()
    app = FastAPI()
    app.include_router(make_router(sink))

    @app.get("/count")
    def count() -> dict[str, int]:
        return {"decisions": len(sink.records), "verdicts": 0}

    @app.post("/v1/metrics")
    def metrics() -> dict[str, str]:
        return {}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def serve_backend(port: int) -> None:
    """Entry point of the backend process export is measured against: it decodes each OTLP
    request and counts decision root spans and verdict log records, no more. A trace backend runs
    on other machines; here it shares the engine's two cores, so it does as little as delivery
    checking needs and runs at a lower CPU priority (the full receiver, with pydantic validation
    of every record, would bill its own contention to the engine)."""
    os.nice(10)
    import uvicorn
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest,
        ExportLogsServiceResponse,
    )
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
        ExportTraceServiceResponse,
    )
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from audit.telemetry import schema as s

    counts = {"decisions": 0, "verdicts": 0}
    protobuf = "application/x-protobuf"

    async def count(request: Request) -> Response:
        return JSONResponse(counts)

    async def traces(request: Request) -> Response:
        message = ExportTraceServiceRequest.FromString(await request.body())
        spans = [sp for rs in message.resource_spans for ss in rs.scope_spans for sp in ss.spans]
        counts["decisions"] += sum(1 for sp in spans if sp.name == s.ROOT_SPAN)
        return Response(ExportTraceServiceResponse().SerializeToString(), media_type=protobuf)

    async def logs(request: Request) -> Response:
        message = ExportLogsServiceRequest.FromString(await request.body())
        records = [lr for rl in message.resource_logs for sl in rl.scope_logs for lr in sl.log_records]
        counts["verdicts"] += sum(1 for lr in records if lr.event_name == s.VERDICT_EVENT)
        return Response(ExportLogsServiceResponse().SerializeToString(), media_type=protobuf)

    async def metrics(request: Request) -> Response:
        await request.body()
        return Response(b"", media_type=protobuf)

    app = Starlette(routes=[
        Route("/count", count),
        Route("/v1/traces", traces, methods=["POST"]),
        Route("/v1/logs", logs, methods=["POST"]),
        Route("/v1/metrics", metrics, methods=["POST"]),
    ])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Server:
    """``serve_receiver`` or ``serve_backend`` in a process of its own, on a free loopback port."""

    def __init__(self, entry: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        code = f"from benchmarks.bench_otel import {entry}; {entry}({self.port})"
        self.proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, preexec_fn=ending_with_this_process())
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"{entry} process did not start") from None
                time.sleep(0.05)

    def counts(self) -> tuple[int, int]:
        """(decisions, verdict log records) received so far."""
        import httpx

        body = httpx.get(self.url + "/count", timeout=10).json()
        return int(body["decisions"]), int(body["verdicts"])

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


def _configure(backend: _Server, max_verdicts: int) -> None:
    os.environ.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": backend.url,
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            # large queues: a dropped span would make the overhead look smaller than it is
            "OTEL_BSP_MAX_QUEUE_SIZE": "100000",
            "OTEL_BLRP_MAX_QUEUE_SIZE": "100000",
            "OTEL_METRIC_EXPORT_INTERVAL": "3600000",
            "CLAIMTRAIL_OTEL_MAX_VERDICTS": str(max_verdicts),
        }
    )


def _records(n: int) -> list[Any]:
    from tests.telemetry.records_factory import make_record

    return [make_record(i) for i in range(n)]


def _verdicts_sent(records: list[Any], max_verdicts: int) -> int:
    """Verdict log records the exporter sends for these records (exemplars, bounded per decision)."""
    return sum(min(sum(len(t.exemplars) for t in r.tiers), max_verdicts) for r in records)


@dataclass
class Delivery:
    decisions_missing: int = 0  # sent but not received (negative: received twice)
    verdicts_missing: int = 0
    decisions_sent: int = 0
    verdicts_sent: int = 0

    def add(self, sent: tuple[int, int], received: tuple[int, int]) -> None:
        self.decisions_missing += sent[0] - received[0]
        self.verdicts_missing += sent[1] - received[1]
        self.decisions_sent += sent[0]
        self.verdicts_sent += sent[1]

    @property
    def verdicts_per_decision(self) -> float:
        return self.verdicts_sent / self.decisions_sent if self.decisions_sent else 0.0

    def __str__(self) -> str:
        if self.decisions_missing == self.verdicts_missing == 0:
            return "all delivered"
        return f"NOT all delivered: {self.decisions_missing} decisions, {self.verdicts_missing} verdict logs missing"


@dataclass
class LoopFigures:
    """Per decision, from the synthetic loop."""

    thread_cpu_us: float  # caller's thread inside export()
    process_cpu_us: float  # caller's process (sender thread and flush included)
    rate: float  # decisions/s end to end, flush included
    delivery: Delivery


def _direct_loop(backend: _Server) -> LoopFigures:
    """The synthetic loop through ``DecisionExporter``: fixed decisions of 4 spans (root, wait, two
    tiers) + 3 verdict logs."""
    from audit.telemetry import DecisionExporter

    _configure(backend, 64)
    records = _records(EXPORT_DECISIONS)
    with DecisionExporter() as exporter:
        for record in records[:WARM_UP]:  # warm up caches and the connection
            exporter.export(record)
        exporter.flush()
        before = backend.counts()
        cpu_started, thread_started, started = time.process_time(), time.thread_time(), time.perf_counter()
        for record in records[WARM_UP:]:
            exporter.export(record)
        exporter.flush()  # encodes what is still pending on this thread, then waits for the sender
        thread_cpu = time.thread_time() - thread_started
        total, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    timed = records[WARM_UP:]
    n = len(timed)
    after = backend.counts()
    delivery = Delivery()
    delivery.add((n, _verdicts_sent(timed, 64)), (after[0] - before[0], after[1] - before[1]))
    return LoopFigures(thread_cpu / n * 1e6, cpu / n * 1e6, n / total, delivery)


@dataclass
class EngineRun:
    variant: str  # "bare", "direct", "child" or "sdk"
    seed: int  # the slice simulated (see engine_plan)
    cpu_s: float  # the engine's process, all threads, flush included
    wall_s: float
    decisions: int
    helper_cpu_s: float = 0.0  # the export child's, start-up excluded ("child" only)


def engine_plan(process: int, variants: tuple[str, ...], rounds: int) -> list[tuple[str, int]]:
    """The timed runs of engine process number ``process``, in order: (variant, seed). Round r
    runs each of ``variants`` on one seed (the order reversed in odd rounds), a seed that no other
    round of any process and not the warm-up takes, so each round exports decisions its process
    has not exported before while the runs within a round make the same decisions."""
    if not 0 < rounds <= ENGINE_ROUNDS:
        raise ValueError(f"rounds: 1 to {ENGINE_ROUNDS}, got {rounds}")
    plan = []
    for r in range(rounds):
        seed = WARM_UP_SEED + 1 + process * ENGINE_ROUNDS + r
        plan += [(variant, seed) for variant in (variants if r % 2 == 0 else variants[::-1])]
    return plan


def engine_process_main(plan: str, process: int) -> None:
    """One fresh engine process (number ``process`` of the run); prints its runs and what it sent
    as JSON.

    ``pairs``: untimed warm-up slices bare and exporting, then ENGINE_ROUNDS pairs of timed slices,
    bare and exporting back to back (the order alternating), one ``DecisionExporter`` kept
    between them and flushed inside each timed run. ``child`` and ``sdk``: a warm-up slice, then
    CONTEXT_RUNS timed slices through ``ExporterProcess`` or ``DecisionTelemetry``. Seeds and
    order as ``engine_plan`` gives them.
    """
    import json

    from audit.telemetry import DecisionExporter, DecisionTelemetry, ExporterProcess
    from benchmarks.bench_engine import _day_scenario
    from ingest.simulate.loop import Simulator

    max_verdicts = int(os.environ.get("CLAIMTRAIL_OTEL_MAX_VERDICTS", "64"))
    sent = [0, 0]

    def simulate(seed: int, on_record: Any = None) -> list[Any]:
        sim = Simulator(_day_scenario(), seed=seed, hours=ENGINE_HOURS, keep_events=False, on_record=on_record)
        return list(sim.run().records)

    def count_sent(records: list[Any]) -> None:
        # the bench's own tally for the delivery check, not part of exporting (the exporter counts
        # nothing of the kind), so it runs outside the timed part
        sent[0] += len(records)
        sent[1] += _verdicts_sent(records, max_verdicts)

    def warm_up(export: Any, flush: Callable[[], float]) -> None:
        count_sent(simulate(WARM_UP_SEED, export))
        flush()

    def timed(variant: str, seed: int, export: Any = None, flush: Callable[[], float] = lambda: 0.0) -> EngineRun:
        gc.collect()
        before = flush()
        started, wall = time.process_time(), time.perf_counter()
        records = simulate(seed, export)
        helper = flush() - before
        spent, wall = time.process_time() - started, time.perf_counter() - wall
        if export is not None:
            count_sent(records)
        return EngineRun(variant, seed, spent, wall, len(records), helper)

    runs: list[EngineRun] = []
    simulate(WARM_UP_SEED)
    if plan == "pairs":
        with DecisionExporter() as exporter:
            def flush_direct() -> float:
                report = exporter.flush()
                if report.traces.items_failed or report.logs.items_failed:
                    raise RuntimeError(f"export failed: {report.lines()}")
                return 0.0

            warm_up(exporter.export, flush_direct)
            for variant, seed in engine_plan(process, PAIR_VARIANTS, ENGINE_ROUNDS):
                runs.append(timed(variant, seed, exporter.export, flush_direct) if variant == "direct"
                            else timed(variant, seed))
    elif plan == "child":
        with ExporterProcess() as child:
            def flush_child() -> float:
                return child.flush().cpu_seconds

            warm_up(child.export, flush_child)
            for variant, seed in engine_plan(process, ("child",), CONTEXT_RUNS):
                runs.append(timed(variant, seed, child.export, flush_child))
    else:
        telemetry = DecisionTelemetry.from_env()

        def flush_sdk() -> float:
            telemetry.force_flush()
            return 0.0

        warm_up(telemetry.export, flush_sdk)
        for variant, seed in engine_plan(process, ("sdk",), CONTEXT_RUNS):
            runs.append(timed(variant, seed, telemetry.export, flush_sdk))
        telemetry.shutdown()
    print(json.dumps({"runs": [vars(run) for run in runs], "sent": sent}))


def _engine_process(backend: _Server, plan: str, process: int, delivery: Delivery) -> list[EngineRun]:
    import json

    before = backend.counts()
    code = f"from benchmarks.bench_otel import engine_process_main; engine_process_main({plan!r}, {process})"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=900)
    if out.returncode != 0:
        raise RuntimeError(f"engine process {plan!r} failed: {out.stderr.strip().splitlines()[-1:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    after = backend.counts()
    delivery.add((result["sent"][0], result["sent"][1]), (after[0] - before[0], after[1] - before[1]))
    return [EngineRun(**run) for run in result["runs"]]


def paired(runs: list[EngineRun]) -> list[tuple[EngineRun, EngineRun]]:
    """The bare and the exporting run of each seed, in the order run. Both simulate the same
    seeded slice, so a different count of decisions means the engine did not repeat itself."""
    by_seed: dict[int, dict[str, EngineRun]] = {}
    for run in runs:
        if run.variant in PAIR_VARIANTS:
            by_seed.setdefault(run.seed, {})[run.variant] = run
    pairs = []
    for seed, pair in by_seed.items():
        if set(pair) != set(PAIR_VARIANTS):
            raise RuntimeError(f"seed {seed}: runs {sorted(pair)}, not a bare and an exporting one")
        bare, direct = pair["bare"], pair["direct"]
        if bare.decisions != direct.decisions:
            raise RuntimeError(f"seed {seed}: the bare run made {bare.decisions} decisions, the exporting one "
                               f"{direct.decisions}")
        pairs.append((bare, direct))
    return pairs


@dataclass
class EngineFigures:
    decisions: list[int]  # per pair
    bare_us: list[float]  # engine CPU per decision, one per pair
    direct_us: list[float]  # engine process CPU per decision exporting, same pairs
    bare_wall_us: list[float]
    direct_wall_us: list[float]
    child_us: list[float]  # engine side with the export child
    child_own_us: list[float]  # the export child's own CPU
    sdk_us: list[float]
    delivery: dict[str, Delivery]

    @property
    def engine_us(self) -> float:
        return statistics.median(self.bare_us)

    @property
    def direct_overhead_us(self) -> list[float]:
        return sorted(d - b for d, b in zip(self.direct_us, self.bare_us, strict=True))


def _engine_runs(backend: _Server) -> EngineFigures:
    """ENGINE_PROCESSES fresh processes of ENGINE_ROUNDS pairs each, and one process each of the
    export child and the SDK in process between them. The median pair speaks for the usual state
    of the shared machine, neither the quietest nor the busiest; separate processes keep one heap
    layout from speaking for all."""
    _configure(backend, 64)
    delivery = {plan: Delivery() for plan in ("pairs", "child", "sdk")}
    runs: list[EngineRun] = []
    # the context processes are numbered after the pairs' ones, so engine_plan gives them seeds of their own
    for index in range(ENGINE_PROCESSES):
        runs += _engine_process(backend, "pairs", index, delivery["pairs"])
        if index == 0:
            runs += _engine_process(backend, "child", ENGINE_PROCESSES, delivery["child"])
        if index == 1:
            runs += _engine_process(backend, "sdk", ENGINE_PROCESSES + 1, delivery["sdk"])
    pairs = paired(runs)

    def us(run: EngineRun, field: str = "cpu_s") -> float:
        return float(getattr(run, field)) / run.decisions * 1e6

    def context(variant: str, field: str = "cpu_s") -> list[float]:
        return [us(run, field) for run in runs if run.variant == variant]

    return EngineFigures([b.decisions for b, _ in pairs], [us(b) for b, _ in pairs], [us(d) for _, d in pairs],
                         [us(b, "wall_s") for b, _ in pairs], [us(d, "wall_s") for _, d in pairs],
                         context("child"), context("child", "helper_cpu_s"), context("sdk"), delivery)


def _engine_rows(backend: _Server) -> list[dict[str, Any]]:
    try:
        f = _engine_runs(backend)
    except (ImportError, AttributeError, RuntimeError) as exc:
        return [{"issue": "#22", "name": HEADLINE, "value": 0, "unit": "%", "target": TARGET,
                 "note": f"not measured: {exc}"}]
    engine_us = f.engine_us
    overheads = f.direct_overhead_us
    direct_us = statistics.median(overheads)
    pairs = ", ".join(f"{d:+.0f}" for d in overheads)
    wall_us = statistics.median(d - b for d, b in zip(f.direct_wall_us, f.bare_wall_us, strict=True))
    child_side = statistics.median(f.child_us) - engine_us
    child_own = statistics.median(f.child_own_us)
    sdk_us = statistics.median(f.sdk_us) - engine_us
    return [
        {"issue": "#22", "name": HEADLINE, "value": round(direct_us / engine_us * 100, 2), "unit": "%",
         "target": TARGET,
         "note": f"{direct_us:+.0f} µs CPU per decision (4 spans + {f.delivery['pairs'].verdicts_per_decision:.2f} "
                 f"verdict logs), caller and sender thread, flush included: the median of {ENGINE_PAIRS} "
                 f"back-to-back pairs of runs, {ENGINE_ROUNDS} in each of {ENGINE_PROCESSES} fresh processes after "
                 f"warm-up slices with and without export, each pair on a seed of its own, so on decisions its "
                 f"process had not exported (all pairs, µs: {pairs}); no helper process; the engine's "
                 f"wall time per decision {wall_us:+.0f} µs (median pair); {f.delivery['pairs']}"},
        {"issue": "#22", "name": "engine CPU per decision (bench_engine day slice, no export)",
         "value": round(engine_us, 1), "unit": "µs", "target": "",
         "note": f"median of {ENGINE_PAIRS} runs of {min(f.decisions):,} to {max(f.decisions):,} decisions "
                 f"({ENGINE_HOURS} h slices of {ENGINE_PAIRS} seeds after untimed warm-up slices, world setup "
                 "included)"},
        {"issue": "#22", "name": "OTel export CPU vs engine CPU, before: export child (engine side + child)",
         "value": round((child_side + child_own) / engine_us * 100, 2), "unit": "%", "target": "(context)",
         "note": f"{child_side:+.0f} µs in the engine's process and {child_own:.0f} µs in the child per decision, "
                 f"median of {CONTEXT_RUNS} runs in one process; {f.delivery['child']}"},
        {"issue": "#22", "name": "OTel export CPU vs engine CPU, before: SDK in process",
         "value": round(sdk_us / engine_us * 100, 2), "unit": "%", "target": "(context)",
         "note": f"{sdk_us:+.0f} µs CPU per decision (spans built directly, the SDK's OTLP encoders on its batch "
                 f"threads), flush included; median of {CONTEXT_RUNS} runs; {f.delivery['sdk']}"},
    ]


def _loop_rows(f: LoopFigures) -> list[dict[str, Any]]:
    label = "direct OTLP, 4 spans + 3 verdict logs"
    return [
        {"issue": "#22", "name": f"OTel export, caller thread CPU per decision ({label})",
         "value": round(f.thread_cpu_us, 3), "unit": "µs", "target": "",
         "note": f"export() and flush() on the caller's thread (keeping each record; the sender thread encodes "
                 f"and sends); the decision has a tier blocker and is written in one pass from its record; "
                 f"{f.delivery}"},
        {"issue": "#22", "name": f"OTel export, process CPU per decision ({label})",
         "value": round(f.process_cpu_us, 1), "unit": "µs", "target": "",
         "note": "caller and sender thread (the encoding and the sends), flush included; one pass from the "
                 "record (blocker included)"},
        {"issue": "#22", "name": f"OTel export end to end incl. flush ({label})", "value": round(f.rate),
         "unit": "dec/s", "target": "", "note": "to a counting OTLP backend in its own process on loopback"},
    ]


def _decode_rate(requests: list[Any]) -> Interleaved:
    """Decisions decoded per second, in ``DECODE_ROUNDS`` rounds of an equal share of ``requests``,
    each normalised by the speed around it (``benchmarks.interleaved``): one pass of a second
    followed the machine's speed of that moment, not the run's."""
    from ingest.otlp.decode import records_from_traces

    share = len(requests) // DECODE_ROUNDS
    groups = iter([requests[i * share:(i + 1) * share] for i in range(DECODE_ROUNDS)])

    def one_round() -> float:
        group = next(groups)
        started = time.perf_counter()
        decoded = sum(len(records_from_traces(r).records) for r in group)
        return decoded / (time.perf_counter() - started)

    return interleaved(one_round, DECODE_ROUNDS, "dec/s")


def _receiver_throughput(rx: _Server) -> tuple[float, Interleaved]:
    import httpx

    from tests.otlp.payloads import exported

    records = _records(RECEIVER_DECISIONS)
    bodies = []
    requests = []
    for i in range(0, len(records), BATCH):
        request, _ = exported(records[i : i + BATCH])
        requests.append(request)
        bodies.append(request.SerializeToString())
    decode_rate = _decode_rate(requests)

    before = rx.counts()[0]
    with httpx.Client(timeout=30) as client:
        started = time.perf_counter()
        for body in bodies:
            response = client.post(rx.url + "/v1/traces", content=body, headers={"content-type": "application/x-protobuf"})
            response.raise_for_status()
        elapsed = time.perf_counter() - started
    stored = rx.counts()[0] - before
    if stored != len(records):
        raise RuntimeError(f"receiver stored {stored} of {len(records)} decisions")
    return stored / elapsed, decode_rate


def run() -> list[dict[str, Any]]:
    sys.path.insert(0, str(REPO))
    backend = _Server("serve_backend")
    try:
        engine_rows = _engine_rows(backend)
        loop = _direct_loop(backend)
    finally:
        backend.stop()
    rx = _Server("serve_receiver")
    try:
        http_rate, decode_rate = _receiver_throughput(rx)
    finally:
        rx.stop()
    rows = engine_rows + _loop_rows(loop)
    rows += [
        {"issue": "#9", "name": "OTLP receiver throughput (HTTP protobuf, 100/request)", "value": round(http_rate),
         "unit": "dec/s", "target": "", "note": "receiver in its own process, records into a memory sink"},
        {"issue": "#9", "name": "OTLP decode throughput (spans -> DecisionRecords)", **decode_rate.row("dec/s", 0),
         "target": "", "note": f"in process, no HTTP; median of {DECODE_ROUNDS} rounds of "
                               f"{RECEIVER_DECISIONS // DECODE_ROUNDS} decisions, each normalised by the speed around it"},
    ]
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
