"""Store throughput, footprint and query latency on embedded chDB.

(a) Decision records per second through the full writer (check, canonical JSON, spool with
fsync, the JSON lines inserted with a deduplication token, decision and tier rows extracted by
the engine's views, rollup views) against the same rows as prepared columns inserted raw with
``client.insert`` into an identical schema in the same run. (b) Bytes
on disk per decision (decisions + tier rows + rollups) after ``OPTIMIZE … FINAL``. (c) Latency of
the API's main queries on a store of 1,000,000 decisions built with ``INSERT … SELECT FROM
numbers()`` from a real record template (cached under ``.claimtrail/bench-store``).
"""

from __future__ import annotations

import functools
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from audit.records import record_text
from audit.store import connection, migrations, rows
from audit.store.queries import AuditStore, DecisionFilter
from audit.store.writer import RecordWriter
from benchmarks.interleaved import (
    Interleaved,
    best_of,
    faster_each,
    nearest_rank_of,
    of_samples,
    paced,
    paced_with,
)
from benchmarks.pacers import ParallelPacer, ScanPacer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the factory lives with the tests
from tests.store.factory import make_record, make_records  # noqa: E402 - the shared record factory

BENCH_RUNS = 3  # short latencies and tails: make bench reports the median of three runs
ISSUE = "#5"
# Ten batches, so the rate is the writer's sustained one: encoding of batch n+1 overlaps the
# insert of batch n, and only the first batch's encoding and the last insert run alone (with
# three batches those two were a third of the run).
N_WRITE = 100_000
BATCH = 10_000
FALLBACK_RUNS = 100
LOOKUPS = 200
QUERY_ROUND = 20  # queries between two passes of the cpu workload
ROUNDS = 5  # the writer takes the best of five (other work only ever slows a run down), the raw insert the median
N_STORE = 1_000_000
REPO = Path(__file__).resolve().parents[1]
CACHE = Path(".claimtrail/bench-store")
BUILD_MARK = "claimtrail bench-store v1"  # bump when the builder changes so caches are rebuilt
TENANTS = ("acme", "globex", "initech", "umbrella")


def _row(name: str, value: float, unit: str, target: str, note: str = "", scale: str = "scan") -> dict[str, Any]:
    # every figure here depends on the embedded engine's speed: normalise by the calibration of its
    # own work (``benchmarks.calibrate``: ``scan``), by the all-cores one where the work keeps both
    # cores busy, or by the core's where it is mostly one Python thread's
    return {"issue": ISSUE, "name": name, "value": value, "unit": unit, "target": target, "note": note,
            "scale": scale}


def _writer_seconds(target: connection.Target, records: list[Any], spool: Path) -> float:
    writer = RecordWriter(lambda: connection.connect(target), str(spool), batch_size=BATCH)
    started = time.perf_counter()
    writer.write_records(records)
    assert writer.flush(timeout=600), writer.last_error
    seconds = time.perf_counter() - started
    writer.close()
    return seconds


def raw_insert_seconds(client: Any, database: str, records: list[Any]) -> float:
    texts = [record_text(r) for r in records]
    batches = [rows.decision_batch(records[i:i + BATCH], texts[i:i + BATCH]) for i in range(0, len(records), BATCH)]
    started = time.perf_counter()
    for batch in batches:
        for table, columns in (("decisions", batch.decisions), ("decision_tiers", batch.tiers)):
            client.insert(f"{database}.{table}", list(columns.values()), column_names=list(columns),
                          column_oriented=True)
    return time.perf_counter() - started


def _throughput(work: Path) -> list[dict[str, Any]]:
    """Writer and raw runs alternate, each into its own fresh database; the best measured run of each
    makes their ratio, so load from other processes on a shared machine disturbs it as little as
    possible."""
    records = make_records(N_WRITE, seconds_apart=5)
    base = connection.resolve_dsn(f"chdb://{work}/db")
    client = connection.connect(base)
    for round_ in range(ROUNDS):
        for prefix in ("w", "r"):
            client.command(f"CREATE DATABASE IF NOT EXISTS {prefix}{round_}")
            migrations.migrate(client, f"{prefix}{round_}")  # identical schema, rollup views included
    # Each run between two passes of the all-cores workload (the writer's encoding overlaps its
    # delivery thread's inserts) and of the store-scan one (the raw insert is the engine's work),
    # normalised by the faster of each around it (``benchmarks.interleaved``): normalised by the
    # run's median factors instead, the raw insert moved 22 % between a quiet make bench and one
    # beside --noise.
    runs: list[Callable[[], float]] = []
    for round_ in range(ROUNDS):
        runs.append(functools.partial(_writer_seconds, replace(base, database=f"w{round_}"), records,
                                      work / f"spool{round_}"))
        runs.append(functools.partial(raw_insert_seconds, client, f"r{round_}", records))
    with ParallelPacer() as parallel, ScanPacer() as scan:
        timed = paced_with(runs, lambda: (parallel.speed(), scan.speed()), faster_each)
    writer_times = [seconds for seconds, _ in timed[0::2]]
    raw_times = [seconds for seconds, _ in timed[1::2]]
    writer_best = best_of([(N_WRITE / seconds, all_cores) for seconds, (all_cores, _) in timed[0::2]], "rec/s")
    # The raw insert takes the median of its runs each normalised, not the best measured one: its
    # best run is the one that least shared the machine, but the scan pass read around it (or
    # between it and its neighbours) need not have caught that, and over seven quiet/--noise pairs
    # that pick moved from -4 % to +21 % while the insert's measured best slowed 0.88-1.00x. In
    # seven paced runs each way on one machine the median normalised moved 0.2 % where the best
    # measured one moved 7 %.
    raw = of_samples([(N_WRITE / seconds, scans) for seconds, (_, scans) in timed[1::2]], "rec/s")

    for table in ("decisions", "decision_tiers", "fallback_1h"):
        client.command(f"OPTIMIZE TABLE w0.{table} FINAL")
    parts = dict(client.query(
        "SELECT table, sum(bytes_on_disk) FROM system.parts WHERE active AND database = 'w0' GROUP BY table"
    ).result_rows)
    stored = client.query("SELECT count() FROM w0.decisions").result_rows[0][0]
    client.close()
    total = sum(parts.get(t, 0) for t in ("decisions", "decision_tiers", "fallback_1h"))
    tiers = sum(len(r.tiers) for r in records)
    # the ratio within the run needs no normalising: the best of each as measured
    writer_rate, raw_rate = writer_best.measured, max(N_WRITE / seconds for seconds in raw_times)
    spread = (f"the best measured of {ROUNDS} alternating runs, normalised by the speed around it; writer runs "
              f"{', '.join(f'{N_WRITE / t:,.0f}' for t in writer_times)}")
    return [
        {**_row("store: records/s through the full writer (spool+fsync, tiers, rollups)", 0, "rec/s", ">= 50,000",
                f"{N_WRITE} records + {tiers} tier rows, batches of {BATCH}; {spread}"), **writer_best.row("rec/s", 0)},
        {**_row("store: records/s raw client.insert of prepared columns", 0, "rec/s", "baseline",
                "same rows and schema; JSON and columns built before timing; the median of the runs each normalised by the speed "
                "around it; raw runs " + ", ".join(f"{N_WRITE / t:,.0f}" for t in raw_times)), **raw.row("rec/s", 0)},
        _row("store: writer / raw throughput", round(writer_rate / raw_rate, 3), "ratio", ">= 0.7"),
        _row("store: bytes on disk per decision after OPTIMIZE FINAL", round(total / stored, 1), "B", "<= 300",
             f"decisions {parts.get('decisions', 0) / stored:.0f} B + tiers {parts.get('decision_tiers', 0) / stored:.0f} B"
             f" + rollups; {stored} decisions"),
    ]


def _build_large_store(path: Path) -> None:
    """1M decisions from one real record template, varied per row by SQL (ids, pods, tenants, times)."""
    template = make_record(1)  # an A100 fallback record with two tiers
    text = record_text(template)
    for field in ("decision_id", "pod", "tenant", "namespace", "time", "pod_uid"):
        text = text.replace(f'"{field}":"{getattr(template, field)}"', f'"{field}":"@{field}@"')
    store = AuditStore.open(f"chdb://{path}/db")
    client = store.client
    client.command(
        """
        INSERT INTO decisions (time, decision_id, cluster, seq, attempt, tenant, namespace, pod, pod_uid, policy_version,
            policy_digest, outcome, node, n_devices, tier_index, preferred_model, allocated_model, fallback, retry_class,
            backoff_ms, wait_ms, steps, duration_us, track, template_version, engine_version, schema_version, record)
        SELECT t, id, 'bench', number, 0, tenant, ns, pod, pod_uid, 'v1', repeat('d', 64),
               if(number % 7 = 6, 'unschedulable', 'allocated'), if(number % 7 = 6, '', concat('node-', toString(number % 500))),
               if(number % 7 = 6, 0, 1), if(number % 7 = 6, -1, toInt16(number % 3 = 1)), 'H100',
               multiIf(number % 7 = 6, '', number % 3 = 1, 'A100', 'H100'), number % 7 != 6 AND number % 3 = 1,
               if(number % 7 = 6, 'unschedulable', ''), 0, (number * 37) % 5000, 3, 100 + number % 900, 'dra', 't1',
               '0.1.0', 1,
               replaceOne(replaceOne(replaceOne(replaceOne(replaceOne(replaceOne({template:String},
                   '@decision_id@', id), '@pod@', pod), '@tenant@', tenant), '@namespace@', ns),
                   '@time@', formatDateTime(t, '%Y-%m-%dT%H:%i:%S.000Z', 'UTC')), '@pod_uid@', pod_uid)
        FROM (
            SELECT number,
                   toDateTime64('2026-11-01 00:00:00', 3, 'UTC') + toIntervalMillisecond(number * 604) AS t,
                   lower(concat(substring(hex(MD5(toString(number))), 1, 8), '-', substring(hex(MD5(toString(number))), 9, 4),
                         '-', substring(hex(MD5(toString(number))), 13, 4), '-', substring(hex(MD5(toString(number))), 17, 4),
                         '-', substring(hex(MD5(toString(number))), 21, 12))) AS id,
                   arrayElement({tenants:Array(String)}, number % 4 + 1) AS tenant, concat(tenant, '-ml') AS ns,
                   concat('train-', toString(intDiv(number, 4) % 200000)) AS pod,
                   concat('pod-uid-', toString(number)) AS pod_uid
            FROM numbers({n:UInt64}))
        """,
        parameters={"template": text, "tenants": list(TENANTS), "n": N_STORE},
        settings={"max_insert_threads": 2},
    )
    client.command(
        """
        INSERT INTO decision_tiers (time, tenant, decision_id, tier, request, model, considered, nodes_evaluated, reasons)
        SELECT time, tenant, decision_id, tier, if(tier = 0, 'gpu/h100', 'gpu/a100'), if(tier = 0, 'H100', 'A100'),
               if(tier = 0, 8, 4), if(tier = 0, 3, 2),
               if(tier = 0, map('in_use', 6, 'unhealthy', 2), map('selected', 1, 'in_use', 3))
        FROM decisions ARRAY JOIN range(toUInt8(if(fallback OR outcome = 'unschedulable', 2, 1))) AS tier
        """
    )
    store.close()


def build_million_store() -> tuple[Path, int]:
    """The cached store of ``N_STORE`` decisions (built on first use); returns its chDB directory and
    size. Other benchmarks use it too; they must copy it before adding rows."""
    path = REPO / CACHE
    mark = path / "READY"
    if mark.exists() and mark.read_text().startswith(BUILD_MARK):
        return path / "db", N_STORE
    shutil.rmtree(path, ignore_errors=True)
    started = time.perf_counter()
    _build_large_store(path)
    mark.write_text(f"{BUILD_MARK}: {N_STORE} decisions, built in {time.perf_counter() - started:.0f} s\n")
    return path / "db", N_STORE


def _timed_ms(query: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    if not query():
        raise RuntimeError("the store answered a benchmark query with nothing")
    return (time.perf_counter() - t0) * 1000


def _times_ms(warm: Callable[[], object], queries: list[Callable[[], object]]) -> list[float]:
    warm()
    return [_timed_ms(query) for query in queries]


def _paced_tail(queries: list[Callable[[], object]], per_round: int,
                warm: list[Callable[[], object]] | None = None) -> Interleaved:
    """The p95 of the queries' times in ms, taken in rounds of ``per_round`` between two passes of
    the ``cpu`` workload, each time normalised by the faster (``benchmarks.interleaved.paced``).
    Normalised by the run's median factor instead, the decision-by-id p95 moved 27 % between a
    quiet ``make bench`` and one beside ``--noise``, its runs in each spreading wider than that.
    Each round starts with an untimed query (``warm``: the k-th for round k; else the round's first
    query once more): the first request after a calibration pass, whose workload has just taken
    the caches, was the slowest of its round in 15 of 20 rounds of the API's why summaries."""
    starts = range(0, len(queries), per_round)
    warm = warm or [queries[k] for k in starts]
    rounds = paced([functools.partial(_times_ms, warm[n], queries[k:k + per_round]) for n, k in enumerate(starts)])
    return of_samples([(ms, speed) for times, speed in rounds for ms in times], "ms", nearest_rank_of(0.95))


def _latency() -> list[dict[str, Any]]:
    db, _ = build_million_store()
    store = AuditStore.open(f"chdb://{db}")
    try:
        count = store.client.query("SELECT count() FROM decisions").result_rows[0][0]
        rng = random.Random(5)
        sample = [r[0:3] for r in store.client.query(
            "SELECT decision_id, namespace, pod FROM decisions WHERE cityHash64(decision_id) % 2500 = 0 LIMIT 400"
        ).result_rows]
        rng.shuffle(sample)
        # the rounds' untimed first lookups ask for decisions the timed ones never ask for
        lookups, spare = sample[:LOOKUPS], sample[LOOKUPS:LOOKUPS + LOOKUPS // QUERY_ROUND]
        by_id = _paced_tail([functools.partial(_by_id, store, *row) for row in lookups], QUERY_ROUND,
                            [functools.partial(_by_id, store, *row) for row in spare])
        by_pod = _paced_tail([functools.partial(_by_pod, store, *row) for row in lookups], QUERY_ROUND,
                             [functools.partial(_by_pod, store, *row) for row in spare])
        # p95s of 20 runs (their second slowest) moved by up to 1.9x between runs of one commit
        tenants = (None, *TENANTS) * 20
        pages = _paced_tail([functools.partial(_newest_page, store, tenant) for tenant in tenants], QUERY_ROUND)
        day = DecisionFilter(since="2026-11-03T00:00:00Z", until="2026-11-04T00:00:00Z")
        fallback = _paced_tail([functools.partial(store.fallback_stats, day, ["tenant", "model"])] * FALLBACK_RUNS,
                               QUERY_ROUND // 2)
    finally:
        store.close()
    note = f"store of {count:,} decisions, {len(lookups)} lookups"
    paced_note = f"in rounds of {QUERY_ROUND}, each normalised by the cpu workload around it"
    # short keyed reads, mostly one thread's work: the core's calibration (``cpu``), timed between
    # the rounds: ``benchmarks.calibrate`` says why not the scans' (``scan``)
    return [
        _paced_row("store: decision by id p95 (tenant-scoped)", by_id, "<= 20", f"{note}; {paced_note}"),
        _paced_row("store: latest decision by pod p95 (tenant-scoped)", by_pod, "<= 20", f"{note}; {paced_note}"),
        _paced_row("store: fallback rate by tenant x model over 24 h, p95", fallback, "<= 500",
                   f"hourly duplicate-tolerant rollup, {FALLBACK_RUNS} runs in rounds of {QUERY_ROUND // 2}, each "
                   "normalised by the cpu workload around it"),
        _paced_row("store: newest page of 50 decisions (admin or tenant), p95", pages, "",
                   f"store of {count:,} decisions, no time filter, {len(tenants)} pages ({len(tenants) // 5} of them "
                   f"every tenant's); {paced_note}"),
    ]


def _by_id(store: AuditStore, decision_id: str, namespace: str, pod: str) -> object:
    return store.get_decision(decision_id, namespace[: -len("-ml")])


def _by_pod(store: AuditStore, decision_id: str, namespace: str, pod: str) -> object:
    return store.latest_for_pod(namespace, pod, namespace[: -len("-ml")])


def _newest_page(store: AuditStore, tenant: str | None) -> bool:
    page, _ = store.list_decisions(DecisionFilter(tenant=tenant), None, 50)
    return len(page) == 50


def _paced_row(name: str, figure: Interleaved, target: str, note: str) -> dict[str, Any]:
    return {**_row(name, 0, "ms", target, note), **figure.row("ms", 2)}


def run() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="bench-store-") as work:
        out = _throughput(Path(work))
    out.extend(_latency())
    return out


if __name__ == "__main__":
    for row in run():
        print(row)
