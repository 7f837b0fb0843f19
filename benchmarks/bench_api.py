"""Audit API latency and throughput on a store of ≥ 1,000,000 decisions.

A real ``claimtrail serve`` process owns an embedded store holding ≥ 1M decisions (the store
benchmark's bulk builder when it offers one, else this module's own writer-based builder, cached
under ``.claimtrail/bench-api``) plus a world of 1,000 nodes × 8 NVIDIA-like GPUs and decisions
of pods in it. Measured over HTTP on loopback:

- "why was H100 skipped?" summary (from the stored evidence) on random decisions: p95 (≤ 50 ms);
- the same with ``detail=devices`` (world rebuilt at the decision's seq, exact per-device
  reasons over 8,000 GPUs): p95 (≤ 300 ms);
- decision by id under concurrent clients (one process each): requests/s and p99.

Every figure is timed in rounds between passes of the calibration of its kind of work
(``benchmarks.pacers``) and normalised by the faster pass around it: the why requests by the
``mixed`` blend for the cores they keep busy, the clients' bursts too.
"""

from __future__ import annotations

import functools
import importlib
import json
import random
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from benchmarks.interleaved import (
    Interleaved,
    faster_each,
    nearest_rank_of,
    of_samples,
    of_work,
    paced,
    paced_with,
)
from benchmarks.pacers import MixedPacer
from benchmarks.serving import start_serve, wait_ready

# short latencies and tails: make bench reports the median of five runs (a run takes ~30 s)
BENCH_RUNS = 5
REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".claimtrail" / "bench-api"
MIN_DECISIONS = 1_000_000
WORLD_CLUSTER = "bench-world"
NODES, GPUS = 1000, 8
PROBE_PODS = 12
DETAIL_ROUNDS = 5
# The summary's p95 sits where its tail begins: 1.7-4.7 % of the requests took 2-7 ms against a
# median of 1.1 ms, in bursts over a few rounds in a row (three runs beside --noise). Over 600
# requests, a burst or two more took a run's p95 from 1.0 to 2.9 ms; over 1,500 the rounds span
# 2.5 times as long, so a run holds more bursts and their share of it moves less.
SUMMARY_REQUESTS = 1500
SUMMARY_ROUND = 30  # summaries between two passes of the calibrations
SUMMARY_WARMUP = 10  # untimed first: the server's first summaries measured 47, 13, 12, 17 ms against ~6 after
CLIENTS, REQUESTS_PER_CLIENT = 8, 300
CLIENT_IDS = 600  # the decisions the clients ask for, in turn
CLIENT_ROUNDS = 3  # bursts of the clients, each between two passes of the calibrations
# The cores a why request keeps busy, client and server process together (``calibrate``'s ``mixed``
# blend), read off how much it slowed against the single-core speed beside a burned core, as the
# dashboards' are (``bench_dashboards.CORES``: ``c = 2 * slowdown - 1``). Over four quiet/``--noise``
# pairs the summary p95 as measured slowed 1.31x, 0.78x, 1.00x and 1.43x (median 1.16), the detail
# p95 1.42x, 0.77x, 1.02x and 1.25x (median 1.14): 1.3 cores each. Set from the first pair alone
# (1.6 and 1.8), the blend took the summary 24-33 % and the detail 12-40 % lower beside ``--noise``
# in the next two; one core alone took the summary 42 % higher beside it in the fourth. The rows'
# runs agree within a run and not between runs, so no fixed blend holds them within 20 % in every pair.
SUMMARY_CORES, DETAIL_CORES = 1.3, 1.3
# The cores the clients' bursts of reads by id keep busy, read off the same way. Both cores, while
# the server handed every read to a worker thread; once reads the id index holds were answered on
# the event loop, the all-cores workload took the rate 29 % higher beside --noise than without it,
# where the rate as measured had slowed 1.15x: 1.3 cores (from that one pair).
CLIENT_CORES = 1.3


# ---- the 1M store --------------------------------------------------------------------------

def _own_store(path: Path) -> None:
    """1M decisions through the store's writer: five templates with fresh ids and times."""
    from audit.records import decision_id
    from audit.store.queries import AuditStore
    from tests.api import factory

    path.mkdir(parents=True)
    store = AuditStore.open(f"chdb://{path}/db")
    writer = store.writer(name="bench-build")
    batch = []
    for i in range(MIN_DECISIONS):
        rec = _copy(factory.RECORDS[i % len(factory.RECORDS)])
        rec.decision_id = decision_id("bench", f"claim-{i}", 1)
        rec.time = f"2026-04-{1 + (i // 86_400) % 28:02d}T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}.000Z"
        rec.pod = f"job-{i}"
        batch.append(rec)
        if len(batch) == 20_000:
            writer.write_records(batch)
            batch = []
    writer.write_records(batch)
    writer.flush(timeout=1200)
    store.close()


def _copy(record: Any) -> Any:
    import copy

    return copy.copy(record)


def _store() -> tuple[Path, str]:
    """A directory with ``db`` inside holding ≥ 1M decisions, and how it was built.

    Built once into this benchmark's own cache (other benchmarks may rebuild theirs at the same
    time), with the store benchmark's bulk builder when it has one, else through the writer. The
    world and probe decisions added later have fixed ids and seqs, so re-adding them changes nothing.
    """
    path = CACHE / "store"
    if (path / "READY").exists():
        return path, (path / "READY").read_text().strip()
    shutil.rmtree(path, ignore_errors=True)
    try:
        builder = getattr(importlib.import_module("benchmarks.bench_store"), "_build_large_store", None)
    except ImportError:
        builder = None
    if builder is not None:
        builder(path)
        how = "built with the store benchmark's bulk builder"
    else:
        _own_store(path)
        how = "built through the store writer"
    (path / "READY").write_text(how + "\n")
    return path, how


# ---- the world for detail=devices ------------------------------------------------------------

def _world() -> tuple[list[Any], list[Any]]:
    """World events (1,000 nodes × 8 GPUs, a third of them held) and decisions of pods in it."""
    from audit.events import WorldEvent
    from audit.records import DecisionRecord, TierSummary, decision_id
    from tests.explain.builders import GPU_CLASS, claim, gpu, node, pod, slice_, sub

    models = ("H100", "A100", "L40S")
    objects: list[dict[str, Any]] = [GPU_CLASS]
    held: list[tuple[str, str]] = []
    for i in range(NODES):
        name = f"gpu-node-{i:04d}"
        objects.append(node(name, zone="a" if i % 5 else "b"))
        devices = []
        for j in range(GPUS):
            taint = [{"key": "gpu.nvidia.com/unhealthy", "effect": "NoSchedule"}] if (i * GPUS + j) % 17 == 0 else None
            devices.append(gpu(f"gpu-{j}", models[i % 3], taints=taint))
            if (i + j) % 3 == 0:
                held.append((name, f"gpu-{j}"))
        objects.append(slice_(name, devices))
    objects += [claim(f"holder-{k}", "team-b", allocated=held[k:k + GPUS]) for k in range(0, len(held), GPUS)]
    for p in range(PROBE_PODS):
        objects.append(claim(f"train-{p}-gpu", subs=[sub("h100", "H100"), sub("a100", "A100")]))
        objects.append(pod(f"train-{p}", f"train-{p}-gpu", nodeSelector={"zone": "a"}))
    events = []
    for seq, obj in enumerate(objects, start=1):
        meta = obj["metadata"]
        events.append(WorldEvent(cluster=WORLD_CLUSTER, seq=seq, time="2026-04-30T00:00:00.000Z", type="upsert",
                                 object_kind=obj["kind"], namespace=meta.get("namespace", ""), name=meta["name"],
                                 payload=obj))
    records = []
    for p in range(PROBE_PODS):
        tiers = [TierSummary(index=0, request="gpu/h100", model="H100", considered=2672, reasons={"in_use": 2672}),
                 TierSummary(index=1, request="gpu/a100", model="A100", considered=2664,
                             reasons={"in_use": 888, "selected": 1, "not_reached": 1775})]
        records.append(DecisionRecord(
            decision_id=decision_id(WORLD_CLUSTER, f"train-{p}", 1), cluster=WORLD_CLUSTER, seq=len(objects),
            time="2026-04-30T00:00:01.000Z", attempt=1, tenant="team-a", namespace="team-a", pod=f"train-{p}",
            pod_uid=f"uid-train-{p}", claims=[f"train-{p}-gpu"], claim_uids=[f"uid-team-a-train-{p}-gpu"],
            preference=["H100", "A100"], policy_version="1", policy_digest="", outcome="allocated",
            node="gpu-node-0001", tier_index=1, preferred_model="H100", allocated_model="A100", fallback=True,
            tiers=tiers).seal())
    return events, records


def _explain_in_process(events: list[Any], record: Any, rounds: int = 5) -> list[tuple[float, float]]:
    """The explanation alone (no HTTP, no store): view from the world's objects, then ``explain``;
    each run's seconds with the speed of the ``cpu`` workload around it (``benchmarks.interleaved``).

    The first run parses every object and evaluates every selector; later runs over the same
    objects reuse what the process has parsed (``audit.explain.parsed``, ``.inventories``).
    """
    from audit.explain import ClusterView, explain

    objects = [{**e.payload, "kind": e.object_kind} for e in events]

    def once() -> float:
        started = time.perf_counter()
        explain(ClusterView.from_objects(objects), (record.namespace, record.pod), "H100", record=record, detail=True)
        return time.perf_counter() - started

    # each run is a fifth of a second: normalised by the run's factor instead, the median's three
    # runs within one make bench spread 2.0x
    return paced([once] * rounds)


def _post(base: str, kind: str, lines: list[str]) -> None:
    for start in range(0, len(lines), 500):
        r = httpx.post(f"{base}/v1/ingest/{kind}", content="".join(lines[start:start + 500]).encode(), timeout=300)
        r.raise_for_status()


# ---- measurements ----------------------------------------------------------------------------

def _timed_get(client: httpx.Client, path: str, params: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    r = client.get(path, params=params)
    elapsed = time.perf_counter() - started
    if r.status_code != 200:
        raise RuntimeError(f"GET {path}: HTTP {r.status_code}: {r.text[:300]}")
    return elapsed


def _sample_ids(base: str, n: int) -> list[str]:
    ids: list[str] = []
    with httpx.Client(base_url=base, timeout=120) as client:
        cursor = None
        while len(ids) < n * 3:
            page = client.get("/v1/decisions", params={"limit": 1000, **({"cursor": cursor} if cursor else {})}).json()
            ids += [item["decision_id"] for item in page["items"] if item["cluster"] != WORLD_CLUSTER]
            cursor = page["next"]
            if not cursor:
                break
    if not ids:
        raise RuntimeError("the store served no decisions to sample")
    random.Random(7).shuffle(ids)
    return ids[:n]


def _client_process(base: str, ids: list[str], start: Any, results: Any) -> None:
    """One client: its own process and connection, as a real caller has, timing each request."""
    with httpx.Client(base_url=base, timeout=120) as client:
        _timed_get(client, f"/v1/decisions/{ids[0]}")  # connect before the clock starts
        start.wait()
        results.put([_timed_get(client, f"/v1/decisions/{i}") for i in ids])


def _burst(base: str, ids: list[str], per_client: int) -> tuple[float, list[float]]:
    """One burst of ``CLIENTS`` client processes asking at once: its wall seconds and every
    request's latency.

    The clients are processes, not threads of this one: threads of one interpreter take turns on
    its lock, so their own hand-offs would be measured with the server, and those grow cheaper,
    not dearer, when another program takes a core away.
    """
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    start, results = context.Barrier(CLIENTS + 1), context.Queue()
    shares = [[ids[(c * 37 + k) % len(ids)] for k in range(per_client)] for c in range(CLIENTS)]
    clients = [context.Process(target=_client_process, args=(base, share, start, results)) for share in shares]
    for c in clients:
        c.start()
    start.wait()
    started = time.perf_counter()
    latencies = [seconds for _ in clients for seconds in results.get()]
    wall = time.perf_counter() - started
    for c in clients:
        c.join()
    return wall, latencies


def _throughput(base: str, ids: list[str]) -> tuple[Interleaved, Interleaved]:
    """Requests per second and p99 (ms) of ``CLIENTS`` client processes asking at once, in
    ``CLIENT_ROUNDS`` bursts, each between two passes of the calibrations and normalised by the
    ``mixed`` blend for ``CLIENT_CORES`` of the faster. Normalised by the run's median ``cpu``
    factor instead, the rate moved 36 % between a quiet ``make bench`` and one beside ``--noise``."""
    per_client = REQUESTS_PER_CLIENT // CLIENT_ROUNDS
    with MixedPacer() as pacer:
        bursts = paced_with([functools.partial(_burst, base, ids, per_client)] * CLIENT_ROUNDS, pacer.speed,
                            faster_each)
        factors = [((wall, latencies), pacer.factor(speeds, CLIENT_CORES)) for (wall, latencies), speeds in bursts]
    rate = of_work([(float(len(latencies)), wall, speed) for (wall, latencies), speed in factors], "req/s")
    p99 = of_samples([(seconds * 1000, speed) for (_, latencies), speed in factors for seconds in latencies], "ms",
                     nearest_rank_of(0.99))
    return rate, p99


# Each round below starts with an untimed request: the first request after a calibration pass,
# whose workloads have just taken the caches and the cores, was the slowest of its round in 15 of
# 20 rounds of summaries (p95 6.6 ms against 4.7 ms for the same requests unpaced).

def _summaries(client: httpx.Client, warm: str, ids: list[str]) -> list[float]:
    _timed_get(client, f"/v1/decisions/{warm}/why", {"model": "H100"})
    return [_timed_get(client, f"/v1/decisions/{i}/why", {"model": "H100"}) for i in ids]


def _details(client: httpx.Client, warm: Any, records: list[Any]) -> list[float]:
    return [_timed_get(client, f"/v1/decisions/{r.decision_id}/why", {"model": "H100", "detail": "devices"})
            for r in [warm, *records]][1:]


def run() -> list[dict[str, Any]]:
    sys.path.insert(0, str(REPO))
    from audit.records import to_jsonl
    from tests.api.conftest import free_port, stop

    store_dir, source = _store()
    log = store_dir / "bench-api-serve.log"
    port = free_port()
    proc = start_serve(["--create", "--dsn", f"chdb://{store_dir}/db", "--port", str(port), "--insecure-local"], log)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, base, log, 300)
        stats = httpx.get(f"{base}/v1/stats/fallback", params={"group_by": "cluster"}, timeout=300).json()
        decisions = sum(int(r["decisions"]) for r in stats["rows"])
        events, probe_records = _world()
        _post(base, "events", [json.dumps(e.to_dict()) + "\n" for e in events])
        _post(base, "records", [to_jsonl(probe_records)])
        # the warm-up's decisions follow the timed ones in the same shuffle, so the timed sample is
        # the one it always was
        starts = range(0, SUMMARY_REQUESTS, SUMMARY_ROUND)
        sampled = _sample_ids(base, SUMMARY_REQUESTS + SUMMARY_WARMUP + len(starts))
        ids, warmup = sampled[:SUMMARY_REQUESTS], sampled[SUMMARY_REQUESTS:SUMMARY_REQUESTS + SUMMARY_WARMUP]
        round_warm = sampled[SUMMARY_REQUESTS + SUMMARY_WARMUP:]  # a summary not yet cached for each round
        with httpx.Client(base_url=base, timeout=300) as client, MixedPacer() as pacer:
            for i in warmup:
                _timed_get(client, f"/v1/decisions/{i}/why", {"model": "H100"})
            # in rounds between two passes of the calibrations, each request normalised by the
            # mixed blend of the faster (``benchmarks.interleaved``): normalised by the run's median
            # factor instead, this p95 moved 21 % between a quiet make bench and one beside --noise
            rounds = paced_with([functools.partial(_summaries, client, round_warm[n], ids[k:k + SUMMARY_ROUND])
                                 for n, k in enumerate(starts)], pacer.speed, faster_each)
            samples = [(seconds * 1000, pacer.factor(speeds, SUMMARY_CORES)) for times, speeds in rounds
                       for seconds in times]
            summary = [seconds for times, _ in rounds for seconds in times]
            _timed_get(client, f"/v1/decisions/{probe_records[0].decision_id}/why",
                       {"model": "H100", "detail": "devices"})  # warm imports and caches of the process
            # rounds over the probe decisions, so the p95 is not simply the slowest of 11; normalised
            # by the run's median factor, it moved 42 % between a quiet run and one beside --noise
            detail_round = functools.partial(_details, client, probe_records[0], probe_records[1:])
            detail_rounds = paced_with([detail_round] * DETAIL_ROUNDS, pacer.speed, faster_each)
            detail_samples = [(seconds * 1000, pacer.factor(speeds, DETAIL_CORES)) for times, speeds in detail_rounds
                              for seconds in times]
            detail = [seconds for times, _ in detail_rounds for seconds in times]
        rate, p99 = _throughput(base, ids[:CLIENT_IDS])
    finally:
        stop(proc)
    core = _explain_in_process(events, probe_records[0])
    note = f"{decisions:,} decisions ({source}); loopback HTTP, 2-core machine shared with other work"
    return [
        {"issue": "#7", "name": "why H100 skipped, summary: p95",
         **of_samples(samples, "ms", nearest_rank_of(0.95)).row("ms", 2), "cores": SUMMARY_CORES,
         "target": "<= 50 ms",  # one request in flight: one process runs at a time
         "note": f"{len(summary)} random decisions after {len(warmup)} untimed, in rounds of {SUMMARY_ROUND} "
                 f"each normalised by the mixed blend for {SUMMARY_CORES:g} cores of the passes around it; "
                 f"median {statistics.median(summary) * 1000:.1f} ms measured; {note}"},
        {"issue": "#7", "name": "why H100 skipped, detail=devices: p95",
         **of_samples(detail_samples, "ms", nearest_rank_of(0.95)).row("ms", 1), "cores": DETAIL_CORES,
         "target": "<= 300 ms",
         "note": f"{len(detail)} requests ({DETAIL_ROUNDS} rounds over {len(probe_records) - 1} decisions, each round "
                 f"normalised by the mixed blend for {DETAIL_CORES:g} cores of the passes around it), each "
                 f"rebuilding a {NODES} nodes x {GPUS} GPUs world from {len(events)} events; "
                 f"median {statistics.median(detail) * 1000:.0f} ms measured; {note}"},
        {"issue": "#7", "name": "explain core alone (1,000 nodes x 8 GPUs, detail): median",
         **of_samples([(seconds * 1000, speed) for seconds, speed in core], "ms").row("ms", 1), "target": "",
         "note": f"in-process, {len(core)} runs (the first, parsing every object, {core[0][0] * 1000:.0f} ms), each "
                 f"normalised by the speed around it; no HTTP "
                 f"or store; exact allocator verdicts for every H100"},
        {"issue": "#7", "name": f"decision by id, {CLIENTS} concurrent clients: throughput", **rate.row("req/s", 1),
         "target": "",  # the server's one event loop sets the rate; the clients mostly wait
         "cores": CLIENT_CORES,
         "note": f"{CLIENTS} client processes, {CLIENTS * REQUESTS_PER_CLIENT} requests in {CLIENT_ROUNDS} bursts, each "
                 f"normalised by the mixed blend for {CLIENT_CORES:g} cores of the passes around it (median "
                 f"{rate.speed:.3f}); {note}"},
        {"issue": "#7", "name": f"decision by id, {CLIENTS} concurrent clients: p99", **p99.row("ms", 2),
         "target": "", "cores": CLIENT_CORES,
         "note": f"{CLIENT_ROUNDS} bursts, each normalised by the mixed blend for {CLIENT_CORES:g} cores of the "
                 f"passes around it; {note}"},
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
