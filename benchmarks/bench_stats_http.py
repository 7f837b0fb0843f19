"""The pod-level stats endpoints over HTTP on a store of ≥ 1,000,000 decisions and their events.

A simulated day of the default scenario is the unit: its decision records go through the store's
writer and its world events, its fold's pod tables and their ``pod_folds`` mark are written as
the background fold writes them. The day is then repeated in the engine (``INSERT … SELECT``)
until the decisions reach a million: every copy in the same day and cluster, its pods, claims,
uids and decision ids renamed, its Pod and ResourceClaim events interleaved with the original's
(seqs renumbered densely, in time order), its decisions and tier rows, and its pod rows. The copies
share the day's nodes and devices, so the pod rows are the one day's fold repeated, not what a
fold of the repeated log would judge (it would see each device held by every copy). The store is
cached under ``.claimtrail/bench-stats-http`` (``BUILD_MARK`` names the builder's version).

A real ``claimtrail serve`` is started on it and timed from its start to the first fairness
answer (migrations, the pod lifecycle read back from the pod tables, the first figures), then
``/v1/stats/fairness`` and ``/v1/stats/fallback`` are asked ``REQUESTS`` times each for the day's
window, by an admin and by a tenant (its own row and ``(others)``), after ``WARMUP`` untimed
requests of each, each request with a new
window so that none is answered from the figures the server keeps for a repeated question: the
window starts one more hour before the day each time (nothing happened there, so each covers the
same pods and decisions; p95, targets ≤ 500 ms). The repeated question is reported in the note,
and so are the cores the server and the client kept busy and the threads they had ready to run
during each row's requests (``benchmarks.cores``).

The first request of a kind and caller reads columns and runs code paths the server's start did
not (only the admin's fairness figures are asked then), so it is left out of the timing; and
the p95 is a tail: of 20 requests it was the second slowest, which one busy moment on the
shared machine sets, and a single run of the module moved it by a quarter or more between two
``make bench`` runs (admin fallback -37 %, tenant fairness +27 %, quiet against ``--noise``).
Of ``REQUESTS`` it is the third slowest, and the module runs ``BENCH_RUNS`` times, the median
taken, as the other modules of tails do.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import httpx

from audit.metrics.ranks import nearest_rank
from benchmarks.cores import Busy
from benchmarks.interleaved import faster_each, nearest_rank_of, of_samples, paced_with
from benchmarks.pacers import MixedPacer
from benchmarks.serving import start_serve, wait_id_index

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".claimtrail" / "bench-stats-http"
BUILD_MARK = "claimtrail bench-stats-http v1"  # bump when the builder changes so caches are rebuilt
DECISIONS = 1_000_000
REQUESTS = 40  # p95 is then the 38th of 40: three slow requests, not two, are needed to move it
WARMUP = 1  # untimed requests of each kind and caller first, each with a window of its own
AGAIN = 20  # the repeated question, for the note
BENCH_RUNS = 3  # a tail of a few dozen requests: make bench reports the median of three runs
TENANT = "team-a"  # the tenant caller: its own row and the others folded
RENAMED = "((?:job|foreign)-[0-9]+)"  # the simulator's pod names, which its claims' names start with


# The cores each row's work keeps busy on a machine with cores to spare (``calibrate``'s ``mixed``
# scale), the server's threads and the waiting client together. Measured as the cores
# the server and client got times how much the single-core workload was slowed in the same
# run (the cores the work would have had, had every thread of it been served as that workload
# was), on a busy machine: requests 0.8-1.3 in five runs (fallback for a tenant 0.8-1.1), serve
# start 1.1-1.5; the figures are the medians of the first three (one of them beside ``--noise``,
# all beside other programs' load). Beside a
# burned core alone the requests' raw times did not move (98.4 vs 97.9 ms for the admin's
# fallback figures) while the all-cores workload slowed by 1.38x: one core's work, not all cores'.
# Later, on a quiet machine (commit 5efb193), the fairness figures got 1.28 cores (admin) and
# 1.32 (tenant), ready to run on 1.42, against 1.04 and 0.99 for the fallback figures; beside the
# burner their raw p95 rose 1.26x and 1.35x, the fallback figures' 1.10x and 1.01x. A quiet
# machine's figure is the one the declaration asks for, so the fairness rows take it.
CORES: dict[str | tuple[str, str], float] = {"serve": 1.4, ("admin", "fairness"): 1.3, ("admin", "fallback"): 1.1,
         (TENANT, "fairness"): 1.3, (TENANT, "fallback"): 1.0}


def _row(name: str, value: float, unit: str, busy: Busy, cores: float, target: str = "",
         note: str = "") -> dict[str, Any]:
    return {"issue": "#15", "name": name, "value": value, "unit": unit, "target": target,
            "note": f"{note}; {busy.describe('server and client')}", "scale": "mixed", "cores": cores,
            **busy.fields()}


def _iso(ms: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ms // 1000)) + f".{ms % 1000:03d}Z"


# ---- the store ------------------------------------------------------------------------------------

def _copies_sql(k: str) -> dict[str, str]:
    """SQL expressions renaming one copy ``k`` (an SQL expression, 1…) of a row's names."""
    return {
        "names": f"replaceRegexpAll({{text}}, '\"{RENAMED}', concat('\"\\\\1-c', toString({k})))",
        "uids": f"replaceRegexpAll({{text}}, '\"uid\":\"([^\"]+)\"', concat('\"uid\":\"\\\\1-c', toString({k}), '\"'))",
    }


def _renamed(expr: str, k: str) -> str:
    sql = _copies_sql(k)
    return sql["uids"].replace("{text}", sql["names"].replace("{text}", expr))


def _new_id(k: str) -> str:
    h = f"hex(MD5(concat(decision_id, '-', toString({k}))))"
    return (f"lower(concat(substring({h}, 1, 8), '-', substring({h}, 9, 4), '-', substring({h}, 13, 4), '-', "
            f"substring({h}, 17, 4), '-', substring({h}, 21, 12)))")


def _build(path: Path) -> tuple[int, int, int, int, int]:
    """Build the store; returns (decisions, events, pods, day start ms, day end ms)."""
    from audit.metrics.lifecycle import LifecycleFold
    from audit.store import rows, schema
    from audit.store.podschema import PODS
    from audit.store.podtable import PodTable
    from audit.store.queries import AuditStore
    from benchmarks.cluster_day import cluster_day
    from ingest.simulate.loop import simulate

    day = simulate(cluster_day(), seed=1)
    records, events, cluster = day.records, day.events, day.world.cluster
    copies = math.ceil(DECISIONS / len(records))
    # dense seqs: each Pod or ResourceClaim event is followed by its copies (same time)
    copied = [e.object_kind in ("Pod", "ResourceClaim") for e in events]
    base, at = [], 0
    for c in copied:
        base.append(at)
        at += copies if c else 1
    total_events = at
    path.mkdir(parents=True)
    store = AuditStore.open(f"chdb://{path}/db")
    try:
        client = store.client
        writer = store.writer(name="bench-build", keep_pods=False)
        # the original's decisions at their event's new place; each copy's k places later
        writer.write_records([dataclasses.replace(r, seq=base[r.seq]) for r in records])
        assert writer.flush(timeout=600), writer.last_error
        moved = [dataclasses.replace(e, seq=base[i]) for i, e in enumerate(events)]
        columns = rows.event_columns(moved)
        client.insert("events", list(columns.values()), column_names=list(columns), column_oriented=True)
        # every copy of the original's Pod and ResourceClaim events, right after it
        event_cols = [c.split()[0] for c in schema.EVENTS.columns]
        body = _renamed("replaceRegexpOne(body, '\"seq\":[0-9]+,\"time\"', "
                        "concat('\"seq\":', toString(seq + k), ',\"time\"'))", "k")
        picked = {"seq": "seq + k", "name": f"replaceRegexpOne(name, '^{RENAMED}', concat('\\\\1-c', toString(k)))",
                  "body": body}
        client.command(
            f"INSERT INTO events ({', '.join(event_cols)}) SELECT {', '.join(picked.get(c, c) for c in event_cols)} "
            f"FROM events CROSS JOIN (SELECT number + 1 AS k FROM numbers({copies - 1})) AS copies "
            "WHERE cluster = {c:String} AND object_kind IN ('Pod', 'ResourceClaim')",
            parameters={"c": cluster}, settings={"max_insert_threads": 2})
        # decisions and their tier rows, renamed
        dec_cols = [c.split()[0] for c in schema.DECISIONS.columns if " ALIAS " not in c and " MATERIALIZED " not in c]
        new_id = _new_id("k")
        record = _renamed("replaceOne(replaceRegexpOne(record, '\"seq\":[0-9]+', concat('\"seq\":', "
                          f"toString(seq + k))), decision_id, {new_id})", "k")
        picked = {"decision_id": new_id, "pod": "concat(pod, '-c', toString(k))",
                  "pod_uid": "concat(pod_uid, '-c', toString(k))", "seq": "seq + k", "record": record}
        client.command(
            f"INSERT INTO decisions ({', '.join(dec_cols)}) SELECT {', '.join(picked.get(c, c) for c in dec_cols)} "
            f"FROM decisions CROSS JOIN (SELECT number + 1 AS k FROM numbers({copies - 1})) AS copies",
            settings={"max_insert_threads": 2})
        tier_cols = [c.split()[0] for c in schema.DECISION_TIERS.columns if " ALIAS " not in c]
        client.command(
            f"INSERT INTO decision_tiers ({', '.join(tier_cols)}) SELECT "
            f"{', '.join(new_id if c == 'decision_id' else c for c in tier_cols)} "
            f"FROM decision_tiers CROSS JOIN (SELECT number + 1 AS k FROM numbers({copies - 1})) AS copies",
            settings={"max_insert_threads": 2})
        # the pod tables as the background fold writes them, for one day, then its pods repeated
        fold = LifecycleFold(cluster).apply_all(events)
        life = fold.lifecycle()
        PodTable(store._insert_columns).write(fold, life)
        n = len(life.pods)
        pod_cols = [c.split()[0] for c in PODS.columns]
        picked = {"row": f"row + {n} * k", "pod": "concat(pod, '-c', toString(k))", "uid": "concat(uid, '-c', toString(k))"}
        client.command(f"INSERT INTO pods ({', '.join(pod_cols)}) SELECT {', '.join(picked.get(c, c) for c in pod_cols)} "
                       f"FROM pods FINAL CROSS JOIN (SELECT number + 1 AS k FROM numbers({copies - 1})) AS copies")
        client.command("OPTIMIZE TABLE pods FINAL")
        # the mark the fold writes after its rows, for the whole repeated log
        client.insert("pod_folds", [[cluster], [total_events], [total_events - 1], [life.end_ms], [n * copies]],
                      column_names=["cluster", "version", "seq", "end_ms", "pods"], column_oriented=True)
        decisions = int(client.query("SELECT count() FROM decisions").result_rows[0][0])
        stored = int(client.query("SELECT count(), max(seq) FROM events").result_rows[0][0])
        assert stored == total_events, (stored, total_events)
        return decisions, total_events, n * copies, day.start_ms, day.end_ms
    finally:
        store.close()


def _store() -> tuple[Path, str, dict[str, int]]:
    path = CACHE / "store"
    mark = path / "READY"
    if mark.exists() and mark.read_text().startswith(BUILD_MARK):
        _, how, size_text = mark.read_text().split("\n", 2)
        return path, how, {k: int(v) for k, v in (x.split("=") for x in size_text.split())}
    shutil.rmtree(path, ignore_errors=True)
    started = time.perf_counter()
    decisions, events, pods, start, end = _build(path)
    how = f"built in {time.perf_counter() - started:.0f} s"
    sizes = {"decisions": decisions, "events": events, "pods": pods, "start": start, "end": end}
    mark.write_text(f"{BUILD_MARK}\n{how}\n{' '.join(f'{k}={v}' for k, v in sizes.items())}\n")
    return path, how, sizes


# ---- the server -----------------------------------------------------------------------------------

def _get(client: httpx.Client, path: str, params: dict[str, str],
         headers: dict[str, str]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    answer = client.get(path, params=params, headers=headers)
    elapsed = time.perf_counter() - started
    if answer.status_code != 200:
        raise RuntimeError(f"GET {path}: HTTP {answer.status_code}: {answer.text[:300]}")
    return elapsed, answer.json()


def _tokens(path: Path) -> dict[str, dict[str, str]]:
    """A tokens file with an admin and a tenant of the scenario; the request headers of each."""
    import yaml

    from audit.api.auth import hash_token

    tokens = {"admin": "bench-admin", TENANT: f"bench-{TENANT}"}
    path.write_text(yaml.safe_dump({"tokens": [{"token_sha256": hash_token(tokens["admin"]), "admin": True},
                                               {"token_sha256": hash_token(tokens[TENANT]), "tenant": TENANT}]}))
    return {who: {"Authorization": f"Bearer {token}"} for who, token in tokens.items()}


def run() -> list[dict[str, Any]]:
    sys.path.insert(0, str(REPO))
    from tests.api.conftest import free_port, stop

    store_dir, how, sizes = _store()
    port = free_port()
    log = store_dir / "serve.log"
    headers = _tokens(CACHE / "tokens.yaml")
    day = {"cluster": "demo", "since": _iso(sizes["start"]), "until": _iso(sizes["end"])}
    started = time.perf_counter()
    # one caller makes every request: lift the per-caller limits out of the way
    proc = start_serve(["--dsn", f"chdb://{store_dir}/db", "--host", "127.0.0.1", "--port", str(port),
                        "--tokens", str(CACHE / "tokens.yaml"), "--rate-limit", "1000000", "--burst", "1000000"], log)
    base = f"http://127.0.0.1:{port}"
    starting = Busy(proc.pid)
    busy = {(who, kind): Busy(proc.pid) for who in headers for kind in ("fairness", "fallback")}
    times: dict[tuple[str, str], list[tuple[float, float]]] = {
        (who, kind): [] for who in headers for kind in ("fairness", "fallback")}
    bodies: dict[tuple[str, str], dict[str, Any]] = {}
    try:
        with httpx.Client(base_url=base, timeout=900, headers=headers["admin"]) as client:
            with starting.span():
                while True:
                    try:
                        first = client.get("/v1/stats/fairness", params=day)
                        if first.status_code == 200:
                            break
                    except httpx.HTTPError:
                        pass
                    if proc.poll() is not None or time.perf_counter() - started > 900:
                        raise RuntimeError(f"serve did not answer: {log.read_text()[-2000:]}")
                    time.sleep(0.2)
            cold = time.perf_counter() - started
            wait_id_index(proc, base, log, 1800)
            def window(i: int) -> dict[str, str]:
                # from i hours before the day (no event there) to its end: the day's pods and
                # decisions, on whole hours as the pages ask, but a question the server has not
                # answered yet
                return {**day, "since": _iso(sizes["start"] - 3_600_000 * i)}

            def ask_each(i: int) -> dict[tuple[str, str], float]:
                elapsed: dict[tuple[str, str], float] = {}
                for who, kind in times:
                    with busy[who, kind].span():
                        elapsed[who, kind], bodies[who, kind] = _get(client, f"/v1/stats/{kind}", window(i), headers[who])
                return elapsed

            for i in range(1, WARMUP + 1):
                for who, kind in times:
                    _get(client, f"/v1/stats/{kind}", window(i), headers[who])
            # each window's requests between two passes of the cpu and all-cores workloads, each
            # request normalised by the blend for its row's cores of the faster of each around it
            # (``benchmarks.interleaved``): normalised by the run's median factors instead, two of
            # these p95s moved 22 % between a quiet make bench and one beside --noise
            with MixedPacer() as pacer:
                for elapsed, speeds in paced_with([functools.partial(ask_each, i)
                                                   for i in range(WARMUP + 1, WARMUP + REQUESTS + 1)],
                                                  pacer.speed, faster_each):
                    for key, seconds in elapsed.items():
                        times[key].append((seconds, MixedPacer.factor(speeds, CORES[key])))
            again = {kind: [_get(client, f"/v1/stats/{kind}", day, headers["admin"])[0] for _ in range(AGAIN)]
                     for kind in ("fairness", "fallback")}
    finally:
        stop(proc)
    tenants = len(first.json()["tenants"])
    pods = bodies["admin", "fallback"]["pods_with_preference"]
    size = (f"{sizes['decisions']:,} decisions, {sizes['events']:,} events, {sizes['pods']:,} pods in the day "
            f"(store {how})")
    out = [_row(f"serve start to first fairness answer, {sizes['decisions']:,} decisions", round(cold, 2), "s", starting,
                CORES["serve"], "",
                f"{size}; the lifecycle read back from the pod tables, nothing folded")]
    for (who, kind), samples in times.items():
        caller = "admin" if who == "admin" else "tenant caller"
        note = (f"{REQUESTS} requests after {WARMUP} untimed, each a window starting one more hour before the day "
                f"(computed, not remembered), each normalised by the mixed blend of the passes around its "
                f"window's requests; median {nearest_rank(sorted([s for s, _ in samples]), 0.5) * 1000:.0f} ms measured")
        if who == "admin":
            note += (f"; the same window asked again: p95 {nearest_rank(sorted(again[kind]), 0.95) * 1000:.0f} ms; {tenants} tenants, "
                     f"{pods:,} pods with a preference")
        else:
            note += f"; {TENANT}'s own row and (others)"
        figure = of_samples([(s * 1000, f) for s, f in samples], "ms", nearest_rank_of(0.95))
        out.append({**_row(f"GET /v1/stats/{kind} over HTTP ({caller}), 24 h of {sizes['decisions']:,} decisions: p95",
                           0.0, "ms", busy[who, kind], CORES[who, kind], "<= 500 ms", f"{note}; {size}"),
                    **figure.row("ms", 1)})
    return out


if __name__ == "__main__":
    for r in run():
        print(r)
