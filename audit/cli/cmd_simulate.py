"""``claimtrail simulate``: run the seeded cluster simulator and write events and decision records.

Without ``--scenario`` or ``--trace`` the built-in "cluster day" runs (66 nodes, four tenants, a
flood, health flaps, node loss, driver upgrades, a policy change). ``--out`` takes a ``.jsonl``
file, an API server URL or a ``chdb://`` DSN; ``--events`` writes the world event log as JSONL.
JSONL files of an earlier run are replaced, not appended to.
``--trace`` replays a public GPU trace instead; ``--load`` sets how hard it presses on the cluster
(``ingest/simulate/load.py``). The summary also says how many GPUs were busy at the peak.
A progress bar goes to stderr and a summary table to stdout. ``--start`` moves the simulated
window (``now`` ends it at the current time, so trace explorers' "last hours" views show it).
With ``--otel`` the summary says what the OTLP endpoints accepted, and the command exits 1
when no decision reached one. A ``--out`` or ``--events`` in a directory that does not exist is
refused, not made: a typo would otherwise leave a new tree of folders holding the run.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from audit.cli.policyfile import policy_document
from audit.errors import UserError
from audit.records import DecisionRecord
from audit.timestamps import format_time_ms

DEFAULT_SCENARIO = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "ingest", "simulate", "scenarios", "cluster-day.yaml")
BATCH = 2000


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("simulate", help="run the seeded cluster simulator",
                              description="Simulate a GPU cluster and record every allocation decision.")
    p.add_argument("--scenario", metavar="FILE", help="scenario YAML (Kubernetes objects + Policy + Workload)")
    p.add_argument("--trace", metavar="NAME", help="trace-driven run: openb-2023 or spot-2026")
    p.add_argument("--trace-dir", metavar="DIR", help="folder with the traces (default: CLAIMTRAIL_TRACE_DIR, $CLAIMTRAIL_DATA_DIR/traces (.claimtrail/traces), then ../shared/traces; `make traces` downloads them)")
    p.add_argument("--load", type=_load_value, metavar="L|recorded",
                   help="with --trace: share of the GPUs the arrivals keep busy by the window's end if all "
                        "were placed at once (default 1.2, contended); openb-2023 compresses arrival times, "
                        "spot-2026 scales arrival rates; 'recorded' replays openb-2023's own arrival times")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--hours", type=float, help="simulated hours (default: the scenario's); a shorter run is the "
                   "first part of a longer one with the same seed and start")
    p.add_argument("--start", metavar="now|TIME",
                   help="when the simulated window starts (RFC 3339); 'now' ends it at the current time")
    p.add_argument("--policy", metavar="FILE", help="replace the scenario's initial policy")
    p.add_argument("--out", metavar="TARGET", help="decision records: FILE.jsonl, http(s)://server or chdb:///dir")
    p.add_argument("--events", metavar="FILE.jsonl", help="write the world event log here")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--otel", action="store_true",
                   help="also export every decision as an OpenTelemetry trace "
                        "(endpoint from OTEL_EXPORTER_OTLP_*; exits 1 when none is delivered)")
    p.set_defaults(func=run)


RECORDED = "recorded"


def _load_value(text: str) -> float | str:
    if text == RECORDED:
        return RECORDED
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a number such as 1.2, or 'recorded'") from None


def _load_scenario(args: argparse.Namespace) -> Any:
    from audit.dra.loader import LoadError, read_text
    from ingest.simulate.load import DEFAULT_LOAD
    from ingest.simulate.scenario import ScenarioError, load_scenario_text
    from ingest.simulate.traces import DEFAULT_START as TRACE_START
    from ingest.simulate.traces import TraceError, trace_scenario

    if args.trace and args.scenario:
        raise UserError("--trace and --scenario: choose one")
    if args.hours is not None and not (math.isfinite(args.hours) and args.hours > 0):
        raise UserError(f"--hours {args.hours}: must be a finite number > 0")
    if args.load is not None and not args.trace:
        raise UserError(f"--load {args.load}: only for trace-driven runs (--trace); a scenario sets its own arrival rates")
    try:
        if args.trace:
            hours = args.hours or 24.0
            load = DEFAULT_LOAD if args.load is None else None if args.load == RECORDED else args.load
            start = _start(args.start, hours)
            _check_window(start or TRACE_START, hours, args)
            sc = trace_scenario(args.trace, args.trace_dir, args.seed, hours, start, load)
        else:
            path = args.scenario or DEFAULT_SCENARIO
            try:
                text = read_text(path)
            except LoadError as exc:
                raise UserError(f"--scenario {exc}") from None
            sc = load_scenario_text(text, os.path.basename(path))
            if not (sc.pools or sc.objects or sc.tenants or sc.explicit_jobs):
                raise UserError(f"--scenario {path}: no Workload with nodePools or tenants, no cluster objects: "
                                "nothing to simulate (see ingest/simulate/scenarios/cluster-day.yaml)")
            if args.start:
                sc.start = _start(args.start, args.hours or sc.hours)
            _check_window(sc.start, args.hours or sc.hours, args)
    except (ScenarioError, TraceError) as exc:
        raise UserError(str(exc)) from None
    if args.policy:
        sc.policy = policy_document(args.policy)
    return sc


def _check_window(start: str, hours: float, args: argparse.Namespace) -> None:
    """The window ``--start`` and ``--hours`` (or the scenario's) give must have times a record can carry."""
    from audit.timestamps import parse_time_ms, window_problem

    problem = window_problem(parse_time_ms(start), hours)
    if problem:
        given = " ".join(([f"--start {args.start}"] if args.start else [])
                         + ([f"--hours {args.hours:g}"] if args.hours is not None else []))
        raise UserError(f"{given or '--scenario'}: {hours:g} h from {start}: {problem}")


def _start(value: str | None, hours: float) -> str:
    """``--start``: an RFC 3339 time as given, or for ``now`` the time that ends the run now."""
    from datetime import UTC, datetime, timedelta

    from audit.timestamps import HOUR_MS, format_time_ms, format_utc, parse_zoned_ms, window_problem

    if not value:
        return ""
    if value == "now":
        problem = window_problem(int(datetime.now(UTC).timestamp() * 1000) - hours * HOUR_MS, 0)
        if problem:
            raise UserError(f"--start now --hours {hours:g}: {problem}")
        # whole seconds, so that the records' times read cleanly
        start = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=hours)
        return format_utc(start, digits=0)
    try:
        return format_time_ms(parse_zoned_ms(value))
    except ValueError as exc:
        raise UserError(f"--start {value!r}: {exc}, or 'now'") from None


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


def _earlier_files(out: str | None, events: str | None) -> list[Path]:
    """The JSONL files a run writes, whose earlier contents it replaces."""
    paths = [Path(events)] if events else []
    if out and out.endswith(".jsonl"):
        records = Path(out)
        paths += [records] + ([] if events else [records.with_name(records.stem + ".events.jsonl")])
    return paths


def _replace_earlier_files(paths: list[Path]) -> None:
    """A simulation writes a whole new history, so JSONL files of an earlier run are emptied.

    The JSONL sink appends, as a long-running producer's must; running the same command twice
    would otherwise leave every decision and seq twice, and the files would no longer replay.
    This runs only once every output is open: opening for appending leaves a file as it was, so
    a target that cannot be written refuses the run before an earlier file loses a line."""
    for path in paths:
        try:
            os.truncate(path, 0)
        except OSError as exc:
            raise UserError(f"{path}: cannot replace the file of an earlier run: {exc.strerror}") from None


def _refuse_missing_directories(out: str | None, events: str | None) -> None:
    """Refuse a file, or a ``chdb://`` store directory, whose directory is not there, before the
    scenario or trace is read. The store directory itself may be new (a simulation may start a
    store); what must exist is where it goes."""
    from audit.store.connection import StoreError, resolve_dsn

    targets: list[tuple[str, str, Path]] = []
    if out and out.endswith(".jsonl"):
        targets.append(("--out", out, Path(out)))
    elif out and out.startswith("chdb://"):
        try:
            embedded = resolve_dsn(out).embedded_path
        except StoreError:
            embedded = None  # opening the output names what is wrong with the DSN
        if embedded:
            targets.append(("--out", out, Path(embedded)))
    if events:
        targets.append(("--events", events, Path(events)))
    for option, given, path in targets:
        if not path.parent.exists():
            raise UserError(f"{option} {given}: directory {path.parent} does not exist")


def _open_outputs(out_target: str | None, events: str | None) -> tuple[Any, bool, Any]:
    """The records sink, whether it also keeps the event log, and the event log's own file."""
    from ingest.simulate.output import OutputError, jsonl_output, open_output

    paths = _earlier_files(out_target, events)
    existed = {path for path in paths if path.exists()}
    out = None
    events_to_out = False  # the sink keeps the event log too (a store, or its .events.jsonl companion)
    try:
        if out_target:
            out, events_to_out = open_output(out_target, events)
        sink_keeps_events = events_to_out and (out_target or "").endswith(".jsonl")
        events_out = jsonl_output(events) if events and not sink_keeps_events else None
    except OutputError as exc:
        if out is not None:
            out.close()
        # a refused run leaves no empty file of its own behind either
        for path in set(paths) - existed:
            if path.exists():
                path.unlink()
        raise UserError(str(exc)) from None
    _replace_earlier_files(paths)
    return out, events_to_out, events_out


def run(args: argparse.Namespace) -> int:
    from ingest.simulate.loop import Simulator

    _refuse_missing_directories(args.out, args.events)
    sc = _load_scenario(args)
    out, events_to_out, events_out = _open_outputs(args.out, args.events)
    pending_records: list[DecisionRecord] = []
    pending_events: list[Any] = []
    api = args.out if args.out and args.out.startswith(("http://", "https://")) else ""
    telemetry = _telemetry(api) if args.otel else None

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
    if report is not None:
        print("\nOpenTelemetry export:\n" + "\n".join(f"  {line}" for line in report.lines()))
    _check_delivered(args.out, out)
    if report is not None:
        if report.errors:
            raise UserError(f"--otel: {len(report.errors)} decisions were not exported; the first: {report.errors[0]}")
        if report.nothing_delivered:
            failed = report.traces if report.traces.enabled else report.logs
            why = failed.errors[0] if failed.errors else "no endpoint accepted them"
            raise UserError(f"--otel: none of the {report.decisions:,} decisions was delivered: {why}", exit_code=1)
    return 0


def _check_delivered(target: str | None, out: Any) -> None:
    """A run whose records or events the API did not take must not end as a success: they wait in
    the sink's spool, and the next run sending there delivers them first; or the API, or the store
    written directly, quarantined them (most often a second run into one store under the same
    cluster name, whose seqs and decisions conflict with the history already stored; or times a
    store's columns cannot hold, outside 1970..2299), and history does not hold them."""
    left = getattr(out, "undelivered", 0)
    if left:
        raise UserError(f"--out {target}: {left:,} batch(es) of records or events were not delivered "
                        f"({out.last_error[:300]}); they stay in the spool {out.spool_dir} and go to the "
                        "server with the next run that sends there", exit_code=1)
    quarantined = getattr(out, "quarantined", 0)
    if quarantined:
        hint = (" (the store already holds this cluster's history: give each simulated run into one store a "
                "cluster name of its own, spec.cluster of the scenario's Workload)"
                if "conflicts with the stored one" in out.first_quarantined else "")
        taker = "API" if (target or "").startswith(("http://", "https://")) else "store"
        raise UserError(f"--out {target}: the {taker} quarantined {quarantined:,} of the records and events sent, "
                        f"so history does not hold them; the first: {out.first_quarantined[:300]}{hint}",
                        exit_code=1)


def _telemetry(api_url: str) -> Any:
    """OTLP protobuf is encoded from each record in this process and sent in batches by a
    sender thread (see docs/otlp.md for what it costs); ``api_url`` makes each trace link to
    the audit API's why answer when ``CLAIMTRAIL_API`` does not say where the API is."""
    from audit.telemetry import DecisionExporter, TelemetryConfigError

    try:
        return DecisionExporter(api_url=api_url)
    except TelemetryConfigError as exc:
        raise UserError(f"--otel: {exc}") from None


def summary_table(result: Any) -> str:
    """The run's figures, from the same ``audit.metrics`` reports the API serves for the same window."""
    from audit.metrics import Window, fairness_report, fallback_report, fold_lifecycle
    from audit.metrics.busy import cluster_gpus, peak_busy

    records: list[DecisionRecord] = result.records
    outcomes = Counter(r.outcome for r in records)
    life = fold_lifecycle(result.events, result.world.cluster)
    window = Window(result.start_ms, result.end_ms)
    fair = fairness_report(life, window)
    fb = fallback_report(life, window)
    lines = [
        f"simulated {(result.end_ms - result.start_ms) / 3_600_000:g} h on cluster {result.world.cluster}: "
        f"{result.jobs:,} jobs, {len(records):,} decisions, {result.world.seq + 1:,} world events",
        "decision outcomes (attempts): " + ", ".join(f"{k} {v:,}" for k, v in sorted(outcomes.items())),
        f"window {format_time_ms(result.start_ms)} .. {format_time_ms(result.end_ms)} "
        "(figures per pod, as /v1/stats/fairness and /v1/stats/fallback give them; see docs/metrics.md)",
        busy_line(peak_busy(life.pods, window), cluster_gpus(result.world)),
        *figure_lines(fair, fb),
    ]
    return "\n".join(lines)


def busy_line(peak: Any, gpus: int) -> str:
    share = f" ({peak.devices / gpus:.1%})" if gpus else ""
    return f"peak busy GPUs: {peak.devices:,} of {gpus:,}{share}, first at {format_time_ms(peak.at_ms)}"


def figure_lines(fair: dict[str, Any], fb: dict[str, Any]) -> list[str]:
    """The pod-level figures as text, from ``audit.metrics.report`` dicts (or the API's same fields)."""
    lines = [
        f"first-choice rate: {_pct(fb['first_choice_rate'])} of {fb['pods_with_preference']:,} DRA pods with "
        f"alternatives; fallbacks {fb['fallbacks']:,}, regretted {fb['regretted']:,} "
        f"({_pct(fb['regret_rate'])}, first choice allocatable within {fb['regret_window_s']:g} s)",
        f"Jain's index: whole window {fair['jain_whole']:.3f} (H100-eq-hours / entitlement); under contention "
        + (f"{fair['jain_contention']:.3f} over {fair['contention_windows']} contended hours"
           if fair["jain_contention"] is not None else "- (no hour with two backlogged tenants)"),
        "",
        f"{'preferred -> allocated':<28} {'pods':>8}",
    ]
    for path in fb["paths"]:
        lines.append(f"{(path['preferred'] or '-') + ' -> ' + (path['allocated'] or '-'):<28} {path['pods']:>8,}")
    lines += ["", f"{'tenant':<14} {'started':>8} {'wait p50':>9} {'wait p95':>9} {'wait p99':>9} {'pending':>8} "
                  f"{'failed':>7} {'starving':>9} {'GPU-h':>9} {'H100eq-h':>9} {'entitled':>9}"]
    for t in fair["tenants"]:
        lines.append(f"{t['tenant']:<14} {t['pods_started']:>8,} {_dur(t['wait_p50_s']):>9} "
                     f"{_dur(t['wait_p95_s']):>9} {_dur(t['wait_p99_s']):>9} {t['pending_at_end']:>8,} "
                     f"{t['failed']:>7,} {t['starving_pods']:>9,} {t['device_hours']:>9.1f} {t['h100_eq_hours']:>9.1f} "
                     f"{t['entitlement_h100_eq_hours']:>9.1f}")
    return lines


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def _dur(s: float | None) -> str:
    if s is None:
        return "-"
    if s < 120:
        return f"{s:.0f}s"
    if s < 7200:
        return f"{s / 60:.0f}m"
    return f"{s / 3600:.1f}h"
