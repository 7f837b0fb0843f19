"""``claimtrail migration report|plan``: judge the device plugin → DRA canary and say what to do.

``report`` reads decision records (``--records FILE``, JSON lines or YAML read and admitted as
``claimtrail replay`` reads them, or ``--server URL`` the audit API), groups them into cohorts by track and claim-template version, compares the candidate with
the baseline declared in ``--thresholds FILE`` (default: the shipped
``deploy/migration/thresholds.yaml``, the canary's own) and prints the verdict (promote, hold, rollback)
with every metric's interval. World events add allocation lifetimes for GPU utilisation and the
model each device-plugin pod asked for (its nodeSelector and node affinity against the
device-plugin nodes): ``--events FILE`` (read the same way), else, with ``--server``, the event log
of every cluster the records belong to, from ``GET /v1/events`` (which needs an admin token), as
``GET /v1/stats/migration`` reads the same store's events. With ``--records`` and no ``--events``,
device-plugin pods match no DRA pod.
``plan`` prints the ordered steps for a verdict, given with ``--verdict`` or computed like
``report``; its watch and verify steps run ``report`` on the same input as the plan (the same
files, or the same server) with the same thresholds and filters.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import sys
from functools import partial
from typing import Any

from audit import thresholds_file
from audit.cli.apiurl import DEFAULT_API, api_url, auth_headers
from audit.errors import UserError
from audit.events import EventError, WorldEvent, validate_event
from audit.metrics import fold_lifecycle
from audit.migration import (
    STRATIFIED_BY,
    MigrationError,
    Report,
    Rollout,
    Thresholds,
    Verdict,
    asked_from_lifecycle,
    human_difference,
    human_value,
    plan,
    releases_from_events,
    report,
)
from audit.records import DecisionRecord, RecordError, validate_record

# the thresholds the canary in deploy/ is judged by; the default of both report and plan
SHIPPED_THRESHOLDS = thresholds_file.SHIPPED


def register(sub: Any) -> None:
    p = sub.add_parser("migration", help="device plugin -> DRA canary: report, verdict and plan")
    msub = p.add_subparsers(dest="migration_command", metavar="ACTION")
    rep = msub.add_parser("report", help="compare cohorts and give a promote/hold/rollback verdict")
    _inputs(rep)
    rep.add_argument("-o", "--output", choices=("text", "json"), default="text")
    rep.add_argument("--exit-code", action="store_true",
                     help="exit 0 for promote, 3 for hold, 4 for rollback (for pipelines that gate on it)")
    rep.set_defaults(func=run_report)
    pl = msub.add_parser("plan", help="the ordered steps for a verdict")
    _inputs(pl)
    pl.add_argument("--verdict", choices=[v.value for v in Verdict], help="plan for this verdict instead of computing it")
    pl.add_argument("--canary", default="", help="comma-separated canary namespaces")
    pl.add_argument("--expand", default="", help="comma-separated namespaces of the next stage")
    pl.add_argument("--template", default="gpu-h100-first", help="ResourceClaimTemplate name without version")
    pl.add_argument("--template-version", default="", help="default: the candidate's version in --thresholds, else v2")
    pl.add_argument("-o", "--output", choices=("text", "json"), default="text")
    pl.set_defaults(func=run_plan)
    p.set_defaults(func=lambda _args: _usage(p))



def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _inputs(p: argparse.ArgumentParser) -> None:
    p.add_argument("--thresholds", metavar="FILE",
                   help="verdict thresholds (YAML; default the shipped deploy/migration/thresholds.yaml)")
    p.add_argument("--records", metavar="FILE", help="decision records, JSON lines")
    p.add_argument("--server", help="audit API URL to read records from, and, unless --events is given, the world "
                   "events of their clusters (needs an admin token; default CLAIMTRAIL_API)")
    p.add_argument("--token", help="bearer token (default CLAIMTRAIL_TOKEN)")
    p.add_argument("--cluster", help="only records of this cluster")
    p.add_argument("--since", help="only records at or after this RFC 3339 time")
    p.add_argument("--until", help="only records before this RFC 3339 time")
    p.add_argument("--events", metavar="FILE",
                   help="world events, JSON lines (allocation lifetimes, the models device-plugin pods asked for); "
                        "taken instead of the server's with --server")
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap resampling (when thresholds ask for it)")
    p.add_argument("--min-pods", type=int, help="override the thresholds' min_pods")
    p.add_argument("--confidence", type=float, help="override the thresholds' confidence, e.g. 0.9")
    p.add_argument("--candidate", metavar="TRACK[/VERSION]", help="override the candidate cohort, e.g. dra/v3")
    p.add_argument("--baseline", metavar="TRACK[/VERSION]", help="override the baseline cohort, e.g. dra/v1")


def thresholds_path(args: argparse.Namespace) -> str:
    """``--thresholds``, else the shipped file (refused by name when this install lacks it)."""
    if args.thresholds:
        return str(args.thresholds)
    path = os.path.normpath(SHIPPED_THRESHOLDS)
    if not os.path.exists(path):
        raise UserError(f"--thresholds: not given, and the shipped thresholds file {path} is not there "
                        "(installed without the repository's deploy/ folder); give --thresholds FILE")
    return path


def _read_thresholds(path: str, args: argparse.Namespace | None = None) -> Thresholds:
    # flags override the file, then the whole document is validated as one
    overrides: dict[str, Any] = {}
    if args is not None:
        for flag in ("min_pods", "confidence"):
            if getattr(args, flag, None) is not None:
                overrides[flag] = getattr(args, flag)
        for flag in ("candidate", "baseline"):
            value = getattr(args, flag, None)
            if value:
                track, slash, version = value.partition("/")
                if slash and not version:
                    raise UserError(f"--{flag} {value!r}: no template version after '/' (give TRACK for every "
                                    "version, or TRACK/VERSION)")
                overrides[flag] = {"track": track, "template_version": version}
    try:
        return thresholds_file.load(path, overrides)
    except MigrationError as exc:  # already names the file
        if overrides and _loads(path):  # the file alone is sound: the flags made it wrong
            flags = ", ".join(f"--{flag.replace('_', '-')}" for flag in sorted(overrides))
            raise UserError(f"{flags} (over {path}): {str(exc).removeprefix(f'{path}: ')}") from None
        raise UserError(f"--thresholds {exc}") from None


def _loads(path: str) -> bool:
    try:
        thresholds_file.load(path)
    except MigrationError:
        return False
    return True


def _records_from_api(args: argparse.Namespace) -> list[DecisionRecord]:
    import httpx

    server, headers = api_url(args.server), auth_headers(args.token)
    params: dict[str, Any] = {"limit": 1000}
    if args.cluster:
        params["cluster"] = args.cluster
    for bound in ("since", "until"):
        if getattr(args, bound):
            params[bound] = getattr(args, bound)
    records: list[DecisionRecord] = []
    with httpx.Client(base_url=server, headers=headers, timeout=60) as http:
        while True:
            try:
                response = http.get("/v1/decisions", params=params)
            except httpx.HTTPError as exc:
                raise UserError(f"--server {server}: cannot reach the audit API: {exc}") from None
            if response.status_code != 200:
                detail = response.text[:200]
                raise UserError(f"--server {server}: GET /v1/decisions answered {response.status_code}: {detail}")
            page = response.json()
            for data in page.get("items", []):
                try:
                    records.append(validate_record(data))
                except RecordError as exc:
                    raise UserError(f"--server {server}: decision {data.get('decision_id', '?')}: {exc}") from None
            if not page.get("next"):
                return records
            params["cursor"] = page["next"]


EVENTS_PAGE = 10_000  # the most GET /v1/events answers at once


def _events_from_api(args: argparse.Namespace, clusters: set[str]) -> list[WorldEvent]:
    """The world events of ``clusters`` as the API's store holds them, page by page."""
    import httpx

    server, headers = api_url(args.server), auth_headers(args.token)
    where = f"--server {server}: GET /v1/events"
    events: list[WorldEvent] = []
    with httpx.Client(base_url=server, headers=headers, timeout=60) as http:
        for cluster in sorted(clusters):
            after: int = -1
            while True:
                try:
                    response = http.get("/v1/events", params={"cluster": cluster, "after_seq": after,
                                                              "limit": EVENTS_PAGE})
                except httpx.HTTPError as exc:
                    raise UserError(f"--server {server}: cannot reach the audit API: {exc}") from None
                if response.status_code == 403:
                    raise UserError(f"{where} answered 403: the world events carry every tenant's pods and need an "
                                    "admin token (--token or CLAIMTRAIL_TOKEN); or give the run's world events "
                                    "with --events FILE")
                if response.status_code == 404:
                    raise UserError(f"{where} answered 404: this server does not serve the event log; give the "
                                    "run's world events with --events FILE")
                if response.status_code != 200:
                    detail = " ".join(response.text[:200].split())
                    raise UserError(f"{where} answered {response.status_code}: {detail}")
                try:
                    page = response.json()
                    items, following = page["items"], page["next_after_seq"]
                except (ValueError, KeyError, TypeError):
                    raise UserError(f"{where} answered 200 without an event page") from None
                for data in items:
                    try:
                        events.append(validate_event(data))
                    except EventError as exc:
                        seq = data.get("seq", "?") if isinstance(data, dict) else "?"
                        raise UserError(f"{where}: cluster {cluster} event {seq}: {exc}") from None
                if following is None:
                    break
                if not isinstance(following, int) or following <= after:
                    raise UserError(f"{where}: next_after_seq {following!r} does not follow {after}")
                after = following
    return events


def _window(since: str | None, until: str | None) -> Any:
    """``--since``/``--until`` as replay reads them: refused unless RFC 3339 times in order, and
    compared as times, not as text (``…00Z`` and ``…00.000Z`` are the same instant)."""
    from audit.replay.selection import Selection, SelectionError

    try:
        return Selection(since=since, until=until)
    except SelectionError as exc:
        raise UserError(str(exc)) from None


def _load_records(args: argparse.Namespace) -> list[DecisionRecord]:
    from ingest.files import admitted

    if args.records and args.server:
        raise UserError("give either --records FILE or --server URL, not both")
    window = _window(args.since, args.until) if args.since or args.until else None
    records = admitted(args.records, "records", "--records").records if args.records else _records_from_api(args)
    if args.cluster:
        records = [r for r in records if r.cluster == args.cluster]
    if window is not None:
        records = window.apply(records)
    return records


def _events(path: str) -> list[WorldEvent]:
    """The events of a file, one per cluster and seq as replay takes them (an identical one given
    twice counts once): the pod lifecycle folds each seq once."""
    from ingest.files import admitted, one_event_per_seq

    imported = admitted(path, "events", "--events")
    try:
        return one_event_per_seq(imported)
    except ValueError as exc:
        raise UserError(str(exc)) from None


def _asked(events: list[WorldEvent]) -> dict[tuple[str, str, str], str]:
    """What each device-plugin pod asked for, from the pod lifecycle of each cluster's event log."""
    by_cluster: dict[str, list[WorldEvent]] = {}
    for ev in events:
        by_cluster.setdefault(ev.cluster, []).append(ev)
    out: dict[tuple[str, str, str], str] = {}
    for cluster, log in sorted(by_cluster.items()):
        out.update(asked_from_lifecycle(fold_lifecycle(sorted(log, key=lambda e: e.seq), cluster).pods))
    return out


def _compute(args: argparse.Namespace) -> tuple[Thresholds, Report]:
    thresholds = _read_thresholds(thresholds_path(args), args)
    records = _load_records(args)
    if args.events:
        events: list[WorldEvent] | None = _events(args.events)
    elif not args.records:  # read from the API: the events of the same store
        events = _events_from_api(args, {r.cluster for r in records})
    else:
        events = None
    releases = releases_from_events(e.to_dict() for e in events) if events is not None else None
    asked = _asked(events) if events is not None else None
    try:
        return thresholds, report(records, thresholds, releases=releases, asked=asked, rng=random.Random(args.seed))
    except MigrationError as exc:
        raise UserError(str(exc)) from None


def render_report(rep: Report) -> str:
    m = rep.matching
    lines = [
        f"verdict: {rep.verdict.value}",
        f"baseline {rep.baseline} ({rep.baseline_pods} pods) vs candidate {rep.candidate} ({rep.candidate_pods} pods)",
        f"compared within {m.strata} strata of {' × '.join(STRATIFIED_BY)}: matched pods baseline "
        f"{m.matched_baseline}, candidate {m.matched_candidate}; unmatched baseline {m.unmatched_baseline}, "
        f"candidate {m.unmatched_candidate}",
        "",
        f"{'metric':<24}{'baseline':>12}{'candidate':>12}  {'regression in strata (interval)':<34}"
        f"{'unstratified':>14}{'allowed':>10}  state",
    ]
    for c in rep.comparisons:
        diff = partial(human_difference, c.metric)
        interval = f"{diff(c.regression.estimate)} ({diff(c.regression.low)}..{diff(c.regression.high)})"
        lines.append(
            f"{c.metric:<24}{human_value(c.metric, c.baseline.estimate):>12}"
            f"{human_value(c.metric, c.candidate.estimate):>12}  "
            f"{interval:<34}{diff(c.crude.estimate):>14}{diff(c.max_regression):>10}  {c.state.value}"
        )
    if rep.reasons:
        lines += ["", "reasons:"] + [f"  - {r}" for r in rep.reasons]
    return "\n".join(lines)


VERDICT_EXIT_CODES = {Verdict.PROMOTE: 0, Verdict.HOLD: 3, Verdict.ROLLBACK: 4}


def without_events_note(args: argparse.Namespace, rep: Report) -> str:
    """What a report made from ``--records`` without ``--events`` leaves out, when it leaves anything
    out: the model a device-plugin pod asked for is read from the world events, so without them
    those pods match no DRA pod (read from the API, the report has the store's events)."""
    m = rep.matching
    if args.events or not args.records or not (m.unmatched_baseline or m.unmatched_candidate):
        return ""
    return (f"note: without --events the model each device-plugin pod asked for is unknown, so "
            f"{m.unmatched_baseline + m.unmatched_candidate:,} pods match no counterpart; give the run's world "
            "events (--events FILE) to compare them within strata")


def run_report(args: argparse.Namespace) -> int:
    _, rep = _compute(args)
    print(json.dumps(rep.to_dict(), indent=2, allow_nan=False, default=str) if args.output == "json" else render_report(rep))
    note = without_events_note(args, rep)
    if note:
        print(note, file=sys.stderr)
    return VERDICT_EXIT_CODES[rep.verdict] if args.exit_code else 0


def _split(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def report_command(args: argparse.Namespace) -> str:
    """The ``migration report`` a plan's steps run: the decisions read as the plan read them (or,
    with ``--verdict``, would have), judged by the same thresholds and cohorts.

    ``--until`` is left out, as the steps compare again once newer decisions are in, and
    ``--token`` too: a secret does not belong in printed text (the report reads
    CLAIMTRAIL_TOKEN)."""
    words = ["claimtrail", "migration", "report"]
    if args.thresholds and not _is_shipped(args.thresholds):
        words += ["--thresholds", shlex.quote(args.thresholds)]
    if args.records:
        words += ["--records", shlex.quote(args.records)]
    elif args.server:
        words += ["--server", shlex.quote(args.server)]
    elif os.environ.get("CLAIMTRAIL_API"):
        words += ["--server", "$CLAIMTRAIL_API"]
    else:
        words += ["--server", DEFAULT_API]
    for flag in ("events", "cluster", "since", "candidate", "baseline", "min_pods", "confidence"):
        value = getattr(args, flag, None)
        if value is not None and value != "":
            words += [f"--{flag.replace('_', '-')}", shlex.quote(str(value))]
    if args.seed:
        words += ["--seed", str(args.seed)]
    return " ".join(words)


def _is_shipped(path: str) -> bool:
    try:
        return os.path.samefile(path, SHIPPED_THRESHOLDS)
    except OSError:
        return False


def run_plan(args: argparse.Namespace) -> int:
    version = args.template_version
    if args.verdict:
        verdict = Verdict(args.verdict)
        if not version:
            version = _read_thresholds(thresholds_path(args), args).candidate.template_version
    else:
        thresholds, rep = _compute(args)
        verdict = rep.verdict
        version = version or thresholds.candidate.template_version
    rollout = Rollout(
        template=args.template,
        template_version=version or "v2",
        canary_namespaces=_split(args.canary),
        expand_namespaces=_split(args.expand),
    )
    steps = plan(verdict, rollout, report_command(args))
    if args.output == "json":
        print(json.dumps({"verdict": verdict.value, "steps": [s.__dict__ for s in steps]}, indent=2))
        return 0
    print(f"plan for verdict {verdict.value}:")
    for i, s in enumerate(steps, 1):
        print(f"{i}. [{s.action}] {s.detail}")
        if s.command:
            print(f"     $ {s.command}")
        if s.check:
            print(f"     until: {s.check}")
    return 0
