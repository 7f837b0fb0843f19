"""``claimtrail simulate``: run the seeded cluster simulator and write events and decision records.

Without ``--scenario`` or ``--trace`` the built-in "cluster day" runs (64 nodes, four tenants, a
flood, health flaps, node loss, driver upgrades, a policy change). ``--out`` takes a ``.jsonl``
file, an API server URL or a ``chdb://`` DSN; ``--events`` writes the world event log as JSONL.
A progress bar goes to stderr and a summary table to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from typing import Any

from audit.cli.policyfile import policy_document
from audit.errors import UserError
from audit.records import DecisionRecord

DEFAULT_SCENARIO = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "ingest", "simulate", "scenarios", "cluster-day.yaml")
BATCH = 2000


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("simulate", help="run the seeded cluster simulator",
                              description="Simulate a GPU cluster and record every allocation decision.")
    p.add_argument("--scenario", metavar="FILE", help="scenario YAML (Kubernetes objects + Policy + Workload)")
    p.add_argument("--trace", metavar="NAME", help="trace-driven run: openb-2023 or spot-2026")
    p.add_argument("--trace-dir", metavar="DIR", help="folder with the traces (default: CLAIMTRAIL_TRACE_DIR, .claimtrail/traces, then ../shared/traces; `make traces` downloads them)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--hours", type=float, help="simulated hours (default: the scenario's)")
    p.add_argument("--policy", metavar="FILE", help="replace the scenario's initial policy")
    p.add_argument("--out", metavar="TARGET", help="decision records: FILE.jsonl, http(s)://server or chdb:///dir")
    p.add_argument("--events", metavar="FILE.jsonl", help="write the world event log here")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--otel", action="store_true",
                   help="also export every decision as an OpenTelemetry trace, from a child process "
                        "(endpoint from OTEL_EXPORTER_OTLP_*)")
    p.set_defaults(func=run)


def _load_scenario(args: argparse.Namespace) -> Any:
    from ingest.simulate.scenario import ScenarioError, load_scenario_text
    from ingest.simulate.traces import TraceError, trace_scenario

    if args.trace and args.scenario:
        raise UserError("--trace and --scenario: choose one")
    if args.hours is not None and args.hours <= 0:
        raise UserError(f"--hours {args.hours}: must be > 0")
    try:
        if args.trace:
            sc = trace_scenario(args.trace, args.trace_dir, args.seed, args.hours or 24.0)
        else:
            path = args.scenario or DEFAULT_SCENARIO
            try:
                with open(path, encoding="utf-8") as fh:
                    text = fh.read()
            except OSError as exc:
                raise UserError(f"--scenario {path}: {exc.strerror}") from None
            sc = load_scenario_text(text, os.path.basename(path))
    except (ScenarioError, TraceError) as exc:
        raise UserError(str(exc)) from None
    if args.policy:
        sc.policy = policy_document(args.policy)
    return sc




class _Progress:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.last = -1

    def __call__(self, fraction: float, decisions: int) -> None:
        if not self.enabled:
            return
        pct = int(fraction * 100)
        if pct == self.last and fraction < 1.0:
            return
        self.last = pct
        bar = "#" * (pct // 4) + "." * (25 - pct // 4)
        end = "\n" if fraction >= 1.0 else ""
        print(f"\rsimulating [{bar}] {pct:3d}% {decisions:,} decisions", end=end, file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    from ingest.simulate.loop import Simulator
    from ingest.simulate.output import OutputError, jsonl_output, open_output

    sc = _load_scenario(args)
    out = None
    events_to_out = False  # the sink keeps the event log too (a store, or its .events.jsonl companion)
    try:
        if args.out:
            out, events_to_out = open_output(args.out, args.events)
        own_events_file = args.events and not (events_to_out and args.out.endswith(".jsonl"))
        events_out = jsonl_output(args.events) if own_events_file else None
    except OutputError as exc:
        raise UserError(str(exc)) from None
    pending_records: list[DecisionRecord] = []
    pending_events: list[Any] = []
    telemetry = _telemetry() if args.otel else None

    def on_record(rec: DecisionRecord) -> None:
        if telemetry is not None:
            telemetry.export(rec)
        if out is not None:
            pending_records.append(rec)
            if len(pending_records) >= BATCH:
                out.write_records(pending_records)
                pending_records.clear()

    def on_events(evs: list[Any]) -> None:
        pending_events.extend(evs)
        if len(pending_events) >= BATCH:
            flush_events()

    def flush_events() -> None:
        if events_out is not None:
            events_out.write_events(pending_events)
        if out is not None and events_to_out:
            out.write_events(pending_events)
        pending_events.clear()

    sim = Simulator(sc, args.seed, args.hours, keep_events=True,
                    on_events=on_events if (events_out is not None or events_to_out) else None,
                    on_record=on_record, progress=_Progress(not args.quiet))
    result = sim.run()
    if pending_events:
        flush_events()
    if out is not None:
        if pending_records:
            out.write_records(pending_records)
        out.close()
    if events_out is not None:
        events_out.close()
    report = telemetry.close() if telemetry is not None else None
    print(summary_table(result))
    if report is not None and report.errors:
        raise UserError(f"--otel: {len(report.errors)} decisions were not exported; the first: {report.errors[0]}")
    return 0


def _telemetry() -> Any:
    """Export runs in a child process: in the engine's process, building and encoding a decision's
    spans would cost more than half of the engine's own time per decision (see docs/otlp.md)."""
    from audit.telemetry import ExporterProcess, TelemetryConfigError

    try:
        return ExporterProcess()
    except TelemetryConfigError as exc:
        raise UserError(f"--otel: {exc}") from None


def summary_table(result: Any) -> str:
    from audit.metrics import (
        fallback_rates,
        fallback_regret,
        first_choice_hit_rate,
        jain_index,
        tenant_shares,
        usage_intervals,
        wait_percentiles,
    )

    records: list[DecisionRecord] = result.records
    outcomes = Counter(r.outcome for r in records)
    lines = [
        f"simulated {(result.end_ms - result.start_ms) / 3_600_000:g} h on cluster {result.world.cluster}: "
        f"{result.jobs:,} jobs, {len(records):,} decisions, {result.world.seq + 1:,} world events",
        "outcomes: " + ", ".join(f"{k} {v:,}" for k, v in sorted(outcomes.items())),
        f"first-choice hit rate: {first_choice_hit_rate(records):.1%}; finished {result.finished:,}, "
        f"failed {result.failed:,}",
        "",
        f"{'preferred -> allocated':<28} {'share':>8}",
    ]
    for (pref, alloc), share in fallback_rates(records).items():
        lines.append(f"{(pref or '-') + ' -> ' + (alloc or '-'):<28} {share:>8.1%}")
    world = result.world
    capacity = sum(world.model_totals.values()) + sum(world.dp_capacity.values())
    intervals = usage_intervals(records, result.events, result.end_ms) if result.events else []
    per_tenant = Counter(r.tenant for r in records)
    shares = tenant_shares(intervals, world.policy, capacity, (result.start_ms, result.end_ms), per_tenant) \
        if intervals else {}
    regret, fallbacks = fallback_regret(records, intervals, world.model_totals) if intervals else (0, 0)
    if shares:
        lines += ["", f"Jain's index over shares of weighted entitlement (whole run, not capped by demand): "
                      f"{jain_index(s.normalized for s in shares.values()):.3f}; fallback regret "
                      f"(preferred model free within 10 min): {regret:,} of {fallbacks:,}"]
    lines += ["", f"{'tenant':<16} {'decisions':>10} {'allocated':>10} {'wait p50':>10} {'wait p95':>10} "
                  f"{'wait p99':>10} {'GPU-h':>9} {'H100eq-h':>9} {'share/ent':>9}"]
    waits = wait_percentiles(records)
    alloc_tenant = Counter(r.tenant for r in records if r.outcome == "allocated")
    for t in sorted(per_tenant):
        p50, p95, p99 = waits.get(t, (0.0, 0.0, 0.0))
        sh = shares.get(t)
        usage = f" {sh.device_hours:>9.1f} {sh.eq_hours:>9.1f} {sh.normalized:>9.2f}" if sh else ""
        lines.append(f"{t:<16} {per_tenant[t]:>10,} {alloc_tenant[t]:>10,} {_dur(p50):>10} {_dur(p95):>10} "
                     f"{_dur(p99):>10}{usage}")
    return "\n".join(lines)


def _dur(ms: float) -> str:
    s = ms / 1000
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"
