"""Pod-level stats: the cost of /v1/stats/fairness and /v1/stats/fallback figures, and of keeping
the pod lifecycle current (issue #15).

Targets: the fairness and fallback figures over 24 h of at least 1,000,000 decisions with p95
≤ 500 ms each. A simulated day of the default scenario gives the pods; its pods are repeated
(renamed, same times) until their decisions reach a million, and the reports the endpoints return
are timed on that lifecycle for the day's window. Keeping the lifecycle current costs nothing on
the writer's path (the store folds new events when a stats query comes); what it costs is the
fold, reported per event and as the first and a repeated query after a day was ingested.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

from audit.metrics import Window, fairness_report, fallback_report, fold_lifecycle
from audit.metrics.lifecycle import Lifecycle
from audit.metrics.ranks import nearest_rank
from ingest.simulate.loop import simulate
from ingest.simulate.scenario import load_scenario_text

SCENARIO = Path(__file__).resolve().parents[1] / "ingest" / "simulate" / "scenarios" / "cluster-day.yaml"
DECISIONS = 1_000_000
RUNS = 3


def _row(name: str, value: float, unit: str, target: str = "", note: str = "") -> dict[str, Any]:
    return {"issue": "#15", "name": name, "value": value, "unit": unit, "target": target, "note": note}


def _p95_ms(fn: Any) -> float:
    times = []
    for _ in range(RUNS):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return nearest_rank(sorted(times), 0.95)


def _scaled(life: Lifecycle, copies: int) -> Lifecycle:
    pods = [dataclasses.replace(p, pod=f"{p.pod}-{k}") for k in range(copies) for p in life.pods]
    return dataclasses.replace(life, pods=pods)


def _store_fold(events: list[Any], cluster: str) -> tuple[float, float]:
    from audit.store.queries import AuditStore

    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as root:
        store = AuditStore.open(f"chdb://{root}/db")
        try:
            body = "".join(json.dumps(e.to_dict()) + "\n" for e in events).encode()
            store.ingest_jsonl(body, "events", "bench")
            started = time.perf_counter()
            store.pod_lifecycle(cluster)
            first = time.perf_counter() - started
            started = time.perf_counter()
            store.pod_lifecycle(cluster)
            again = time.perf_counter() - started
        finally:
            store.close()
    return first, again


def run() -> list[dict[str, Any]]:
    sc = load_scenario_text(SCENARIO.read_text(), SCENARIO.name)
    result = simulate(sc, seed=1)
    events, cluster = result.events, result.world.cluster
    started = time.perf_counter()
    life = fold_lifecycle(events, cluster)
    fold_s = time.perf_counter() - started
    copies = math.ceil(DECISIONS / len(result.records))
    big = _scaled(life, copies)
    window = Window(result.start_ms, result.end_ms)
    decisions = copies * len(result.records)
    fair_ms = _p95_ms(lambda: fairness_report(big, window))
    fallback_ms = _p95_ms(lambda: fallback_report(big, window))
    first_s, again_s = _store_fold(events, cluster)
    return [
        _row(f"fairness figures over 24 h, {decisions:,} decisions ({len(big.pods):,} pods): p95", round(fair_ms, 1), "ms",
             "<= 500 ms"),
        _row(f"fallback figures over 24 h, {decisions:,} decisions ({len(big.pods):,} pods): p95", round(fallback_ms, 1),
             "ms", "<= 500 ms"),
        _row("pod lifecycle fold (world fold + regret judgement), simulated day", round(len(events) / fold_s),
             "events/s", "", f"{len(events):,} events in {fold_s:.2f} s"),
        _row("pod lifecycle on the writer's path", 0.0, "s per batch", "writer with it >= 0.9 x without",
             "folded when a stats query comes, not while writing: writer throughput is unchanged"),
        _row("first stats query after a day's events were ingested (store fold)", round(first_s, 2), "s"),
        _row("next stats query, nothing new ingested", round(again_s * 1000, 1), "ms"),
    ]


if __name__ == "__main__":
    for r in run():
        print(r)
