"""``claimtrail replay``: verify recorded decisions by re-executing them, or replay under another policy.

History comes from JSONL or YAML files, gzip-compressed or not (``--records`` and ``--events``: no
store needed; each item is admitted as the API's ingest admits it, and a record or event given
twice is taken once, as the store absorbs a re-send, while two different ones under one decision
id or one cluster and seq are refused), a store
(``--dsn``; results are written to ``replay_runs``) or the audit API (``--server``, default
``CLAIMTRAIL_API``; the server selects, replays as one job in history order and records, and the
progress bar follows the job). Select with ``--since/--until``,
``--cluster``, ``--decision``, ``--sample`` and ``--shard i/N``; ``--workers K`` replays contiguous runs of the
history in K processes (files or ``--dsn``). A progress bar goes to stderr, the summary (verified, matched, mismatched
by cause) and the first diffs to stdout. Exit code 1 when any decision does not match; a selection
that matches no decision is refused (exit 2), while an empty shard of it only says so on stderr.
``--policy FILE`` re-runs the window of one cluster (``--cluster``, needed when the history holds several)
under that policy instead and prints the deltas per tenant and model side by side with the
recorded history (a window outside the cluster's event log, which holds nothing recorded, is
refused with the log's time span); with ``--server`` the API does it (admin token).
``--dsn DSN --write-checkpoints N`` checkpoints a store's event log every N events (resuming after
the latest stored checkpoint), so later replays fold at most N events each: every cluster's, or with
``--cluster`` that cluster's only. An option given where it does nothing is refused with one line
naming it, never ignored: ``--workers`` or ``--checkpoint-every`` with ``--server``,
``--checkpoint-every`` when verifying a store (it has its own checkpoints), ``--workers``,
``--segment`` or ``--show`` with ``--policy``, ``--segment`` without ``--shard``, ``--token``
without ``--server``, a selection, ``--policy``, ``--workers``, ``--checkpoint-every``, ``--show``
or ``--json`` with ``--write-checkpoints``, and a second history there too.
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from typing import Any

from audit.cli.apiurl import api_url, auth_headers
from audit.cli.policyfile import policy_document
from audit.errors import UserError
from audit.records import DecisionRecord
from audit.replay.batch import materialize
from audit.replay.checkpoints import DEFAULT_INTERVAL
from audit.replay.report import Summary
from audit.replay.selection import Selection, SelectionError, Shard, split_contiguous
from audit.replay.service import verify_chunks
from audit.replay.verify import ReplayResult
from audit.timestamps import format_utc

CHUNK = 1000  # decisions per unit of work: one checkpoint load at most per chunk
SERVER_BATCH = 20_000  # decision ids per POST /v1/replay (the API's limit per request)
SERVER_WINDOW = 100_000  # decisions of a window the API replays in one job (a larger one takes several)
POLL_S = 0.25  # between two looks at a server's replay job
SHOW = 20  # mismatches printed with their diff unless --show says otherwise


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("replay", help="verify decisions by replay, or replay a window under another policy",
                              description="Re-execute recorded decisions and compare their digests.")
    h = p.add_argument_group("history (one of)")
    h.add_argument("--records", metavar="FILE.jsonl", help="decision records (offline, with --events)")
    h.add_argument("--events", metavar="FILE.jsonl", help="the world event log (offline, with --records)")
    h.add_argument("--dsn", help="store DSN: chdb:///dir or http(s)://user:pass@host:8123/db")
    h.add_argument("--server", help="audit API URL (default CLAIMTRAIL_API)")
    h.add_argument("--token", help="bearer token for --server (default CLAIMTRAIL_TOKEN)")
    s = p.add_argument_group("selection")
    s.add_argument("--since", help="decisions at or after this RFC 3339 time")
    s.add_argument("--until", help="decisions before this RFC 3339 time")
    s.add_argument("--cluster", help="decisions of this cluster only; with --policy: the cluster whose window to "
                   "replay (default: the history's only cluster; with --server, the only cluster of the window's "
                   "decisions); with --write-checkpoints: the cluster whose event log to checkpoint (default: all)")
    s.add_argument("--decision", nargs="+", action="extend", default=[], metavar="ID", help="decision ids")
    # options left unset are None, so one given where it does nothing is refused (``_refuse_unused``)
    s.add_argument("--sample", type=float, metavar="P", help="replay a stable fraction P in (0, 1] (default 1)")
    s.add_argument("--shard", metavar="i/N", help="replay shard i of N (segments of --segment seqs)")
    s.add_argument("--segment", type=int, metavar="N",
                   help=f"with --shard: sequence numbers per shard segment (default {DEFAULT_INTERVAL})")
    p.add_argument("--checkpoint-every", type=int, metavar="N",
                   help="with --records/--events, or --dsn and --policy: checkpoint the event log in memory every "
                        f"N events before replaying (default {DEFAULT_INTERVAL}; a store's replay uses its stored "
                        "checkpoints, the API its own)")
    p.add_argument("--write-checkpoints", type=int, metavar="N",
                   help="with --dsn: fold the stored event log of every cluster (of --cluster only, if given) and "
                        "write a checkpoint every N events (from the latest one already stored), then exit")
    p.add_argument("--workers", type=int, metavar="K",
                   help="verifying --records/--events or --dsn: processes (default 1)")
    p.add_argument("--policy", metavar="FILE", help="counterfactual: re-run the window (--since/--until, which must "
                   "overlap the cluster's event log) under this policy")
    p.add_argument("--show", type=int, metavar="N",
                   help=f"verifying: mismatches to print with their diff (default {SHOW})")
    p.add_argument("--json", action="store_true",
                   help="print the summary and mismatches as JSON (with --policy: the deltas)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


# ---- progress ------------------------------------------------------------------------------------


class _Progress:
    def __init__(self, total: int, enabled: bool, label: str = "replaying") -> None:
        self.total, self.enabled, self.label = total, enabled, label
        self.done = 0
        self.last = -1

    def advance(self, n: int) -> None:
        self.done += n
        if not self.enabled or (n == 0 and self.last >= 0):
            return
        pct = 100 if not self.total else int(self.done * 100 / self.total)
        if pct == self.last and self.done < self.total:
            return
        self.last = pct
        bar = "#" * (pct // 4) + "." * (25 - pct // 4)
        end = "\n" if self.done >= self.total else ""
        print(f"\r{self.label} [{bar}] {pct:3d}% {self.done:,}/{self.total:,} decisions", end=end,
              file=sys.stderr, flush=True)


# ---- loading -------------------------------------------------------------------------------------


def _selection(args: argparse.Namespace) -> Selection:
    try:
        shard = Shard.parse(args.shard) if args.shard else None
        return Selection(args.since, args.until, tuple(args.decision), args.sample, shard, args.segment,
                         args.cluster or None)
    except SelectionError as exc:
        raise UserError(str(exc)) from None


def _offline(args: argparse.Namespace) -> tuple[list[DecisionRecord], Any]:
    from audit.replay.source import MemorySource
    from ingest.files import admitted, one_event_per_seq, one_record_per_decision

    if not (args.records and args.events):
        raise UserError("--records and --events: give both for an offline replay")
    if args.checkpoint_every < 1:
        raise UserError(f"--checkpoint-every {args.checkpoint_every}: must be >= 1")
    try:
        records = one_record_per_decision(admitted(args.records, "records", "--records"))
    except ValueError as exc:
        raise UserError(f"--records {exc}") from None
    imported = admitted(args.events, "events", "--events")
    try:
        events = one_event_per_seq(imported)
    except ValueError as exc:
        raise UserError(f"--events {exc}") from None
    source = MemorySource(events)
    source.add_checkpoints(args.checkpoint_every)
    _settle()
    return records, source


def _settle() -> None:
    """The loaded history lives until exit: keep full garbage collections from walking it."""
    gc.collect()
    gc.freeze()


def _store_records(store: Any, sel: Selection) -> list[DecisionRecord]:
    from audit.store.filters import DecisionFilter

    if sel.decision_ids:
        found = [store.get_decision(d, None) for d in sel.decision_ids]
        missing = [d for d, r in zip(sel.decision_ids, found, strict=True) if r is None]
        if missing:
            raise UserError(f"--decision {missing[0]}: not found in the store")
        return [r for r in found if r is not None]
    records: list[DecisionRecord] = store.all_decisions(DecisionFilter(since=sel.since, until=sel.until,
                                                                       cluster=sel.cluster))
    return records


# ---- verifying -----------------------------------------------------------------------------------

_WORKER_SOURCE: Any = None


def _verify_chunk(records: list[DecisionRecord]) -> list[ReplayResult]:
    return next(verify_chunks(_WORKER_SOURCE, [records]))


def verify(source: Any, records: list[DecisionRecord], workers: int,
           progress: _Progress) -> Iterator[ReplayResult]:
    """Results in history order; chunks of contiguous history go to ``workers`` processes."""
    global _WORKER_SOURCE
    chunks = split_contiguous(records, max(1, -(-len(records) // CHUNK)))
    _WORKER_SOURCE = source
    if workers <= 1 or len(chunks) <= 1:
        for results in verify_chunks(source, chunks):
            progress.advance(len(results))
            yield from results
        return
    ctx = multiprocessing.get_context("fork")  # workers inherit the loaded history
    with ctx.Pool(workers) as pool:
        for results in pool.imap(_verify_chunk, chunks):
            progress.advance(len(results))
            yield from results


# ---- server mode ---------------------------------------------------------------------------------


def _server(args: argparse.Namespace) -> tuple[str, dict[str, str]]:
    return api_url(args.server, default=""), auth_headers(args.token)


def _http(call: Callable[[], Any], what: str) -> Any:
    import httpx

    try:
        resp = call()
    except httpx.HTTPError as exc:
        raise UserError(f"{what}: cannot reach the audit API: {exc}") from None
    if resp.status_code >= 400:
        try:
            detail = resp.json().get("detail") or resp.text
        except ValueError:
            detail = resp.text
        raise UserError(f"{what}: the audit API answered {resp.status_code}: {str(detail)[:300]}")
    return resp.json()


def _server_run(args: argparse.Namespace, sel: Selection) -> tuple[Summary, list[ReplayResult]]:
    """One request per ``SERVER_BATCH`` decision ids, or per ``SERVER_WINDOW`` decisions of a window:
    the server selects (sample, shard), replays in history order as one job, and the bar follows."""
    import httpx

    url, headers = _server(args)
    if sel.decision_ids:
        ids = list(dict.fromkeys(sel.decision_ids))
        bodies: list[dict[str, Any]] = [{"decision_ids": ids[i:i + SERVER_BATCH]}
                                        for i in range(0, len(ids), SERVER_BATCH)]
        if sel.sample < 1.0 or sel.shard is not None or sel.cluster is not None or sel.since or sel.until:
            raise UserError("--decision with --server: --since, --until, --cluster, --sample and --shard select "
                            "from a window, not from ids")
    else:
        window = {k: v for k, v in {"since": sel.since, "until": sel.until, "cluster": sel.cluster}.items()
                  if v is not None}
        bodies = [{**window, "all": not window, "sample": sel.sample, "segment": sel.segment, "limit": SERVER_WINDOW,
                   **({"shard": f"{sel.shard.index}/{sel.shard.count}"} if sel.shard is not None else {})}]
    summary, shown = Summary(), []
    progress = _Progress(0, not args.quiet)
    with httpx.Client(base_url=url, headers=headers, timeout=600.0) as client:
        while bodies:
            body = bodies.pop(0)
            answer = _http(partial(client.post, "/v1/replay", json=body), "POST /v1/replay")
            progress.total += int(answer.get("total", len(answer.get("runs", []))))
            runs = _runs(client, answer, progress)
            if "decision_ids" not in body and len(runs) >= SERVER_WINDOW:
                # a window larger than one job: go on with its next part, in history order
                bodies.append({**body, "offset": body.get("offset", 0) + len(runs)})
            for run in runs:
                result = ReplayResult(run["decision_id"], run.get("engine_version", ""), run.get("policy_digest", ""),
                                      bool(run["match"]), run.get("cause", ""), list(run.get("diff", [])),
                                      bool(run.get("observed", False)))
                summary.add(result)
                if not result.match:
                    shown.append(result)
    return summary, shown


def _runs(client: Any, answer: dict[str, Any], progress: _Progress) -> list[dict[str, Any]]:
    """The runs of a replay answer; a larger request became a job on the server: follow it,
    moving the progress bar as the job stores its runs."""
    import time

    reported = 0
    while "runs" not in answer:
        job = answer.get("job")
        if not job or answer.get("state") not in ("running", "done"):
            so_far = f" after {answer.get('done', 0):,} of {answer.get('total', 0):,} decisions" if job else ""
            raise UserError(f"POST /v1/replay: replay job {job} ended {answer.get('state')}{so_far}: "
                            f"{answer.get('error', 'no runs returned')}")
        done = int(answer.get("done", 0))
        if done > reported:
            progress.advance(done - reported)
            reported = done
        time.sleep(POLL_S)
        path = f"/v1/replay/{job}"
        answer = _http(partial(client.get, path), f"GET {path}")
    runs: list[dict[str, Any]] = answer["runs"]
    progress.advance(len(runs) - reported)
    return runs


# ---- output --------------------------------------------------------------------------------------


def _print(summary: Summary, mismatches: list[ReplayResult], args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps({"summary": summary.to_dict(), "mismatches": [m.to_dict() for m in mismatches[:args.show]]},
                         indent=2, sort_keys=True))
        return
    for line in summary.lines():
        print(line)
    for m in mismatches[:args.show]:
        print(f"\n{m.decision_id}: {m.cause}")
        for line in m.diff[:12]:
            print(f"  {line}")
        if len(m.diff) > 12:
            print(f"  ... {len(m.diff) - 12} more")


def _nothing_verified(sel: Selection, where: str) -> None:
    """A run that verified nothing must not pass for one that verified everything: a selection
    matching no decision is refused. A shard of it is not, since a history shorter than N
    segments leaves some shards of an N-way sharded job (deploy/replay) empty; it is told."""
    chosen = " ".join(f"--{k} {v}" for k, v in (("cluster", sel.cluster), ("since", sel.since),
                                                 ("until", sel.until),
                                                 ("sample", sel.sample if sel.sample < 1.0 else None)) if v is not None)
    if sel.shard is not None:
        print(f"claimtrail replay: --shard {sel.shard.index}/{sel.shard.count}: no decision "
              f"{'of ' + chosen + ' ' if chosen else ''}in {where} falls in this shard; nothing verified",
              file=sys.stderr)
        return
    raise UserError(f"no decision matched {chosen} in {where}: nothing verified" if chosen
                    else f"no decision in {where}: nothing verified")


def _now() -> str:
    return format_utc(datetime.now(UTC))


def _given(args: argparse.Namespace, option: str) -> bool:
    """Whether the user gave ``option`` (the options checked default to None, [] or False)."""
    value = getattr(args, option.removeprefix("--").replace("-", "_"))
    return value is not None and value is not False and value != []


def _unused(args: argparse.Namespace) -> Iterator[tuple[str, str]]:
    """(option, the line refusing it) for every option this run would not use, were it given."""
    files, store = bool(args.records or args.events), bool(args.dsn)
    server = ("--server" if args.server else "CLAIMTRAIL_API" if os.environ.get("CLAIMTRAIL_API") else "")
    remote = not (files or store) and bool(server)
    if files or store:
        yield "--token", f"--token with {'--records/--events' if files else '--dsn'}: it authenticates to --server"
    if args.write_checkpoints is not None:
        for option in ("--since", "--until", "--decision", "--sample", "--shard", "--segment"):
            yield option, f"{option} with --write-checkpoints: it checkpoints whole event logs; {option} selects " \
                          "decisions to replay"
        yield "--policy", "--policy with --write-checkpoints: it only writes checkpoints; run the what-if on its own"
        yield "--workers", "--workers with --write-checkpoints: it folds each event log in one process"
        yield "--checkpoint-every", ("--checkpoint-every with --write-checkpoints: its own N is the interval of the "
                                     "checkpoints it writes")
        for option in ("--show", "--json"):
            yield option, f"{option} with --write-checkpoints: it prints one line per cluster, no summary or mismatches"
        return
    if args.policy:
        for option in ("--decision", "--shard", "--sample"):
            yield option, "--policy: replays a whole window; --decision, --shard and --sample do not apply"
        yield "--workers", "--workers with --policy: a what-if decides its window again in one process"
        yield "--segment", "--segment with --policy: a what-if replays its whole window, not the segments of --shard"
        yield "--show", "--show with --policy: a what-if prints deltas, not mismatches"
    else:
        if remote:
            yield "--workers", f"--workers with {server}: the audit API replays the selection as one job"
        if not args.shard:
            yield "--segment", "--segment without --shard: it sizes the segments --shard deals out"
        if store:
            yield "--checkpoint-every", ("--checkpoint-every with --dsn: a store's replay starts from the checkpoints "
                                         "stored in it (write them with --write-checkpoints)")
    if remote:
        yield "--checkpoint-every", f"--checkpoint-every with {server}: the audit API replays from its store's checkpoints"


def _refuse_unused(args: argparse.Namespace) -> None:
    """An option given where it does nothing is refused, naming it and why, never ignored."""
    for option, line in _unused(args):
        if _given(args, option):
            raise UserError(line)


def _defaults(args: argparse.Namespace) -> None:
    """The values of the options left unset, once none was given where it does nothing."""
    for name, value in (("sample", 1.0), ("segment", DEFAULT_INTERVAL), ("checkpoint_every", DEFAULT_INTERVAL),
                        ("workers", 1), ("show", SHOW)):
        if getattr(args, name) is None:
            setattr(args, name, value)


def run(args: argparse.Namespace) -> int:
    offline = bool(args.records or args.events)
    if sum([offline, bool(args.dsn), bool(args.server)]) > 1:
        raise UserError("--records/--events, --dsn and --server: choose one history")
    _refuse_unused(args)
    _defaults(args)
    sel = _selection(args)
    if args.workers < 1:
        raise UserError(f"--workers {args.workers}: must be >= 1")
    if args.show < 0:
        raise UserError(f"--show {args.show}: must be >= 0")
    if args.write_checkpoints is not None:
        return write_checkpoints(args)
    if args.policy:
        return run_counterfactual(args, sel)
    if not offline and not args.dsn:
        if not (args.server or os.environ.get("CLAIMTRAIL_API")):
            raise UserError("no history: give --records and --events, --dsn, or --server (or set CLAIMTRAIL_API)")
        summary, shown = _server_run(args, sel)
        if not summary.verified:
            _nothing_verified(sel, _server(args)[0])
        _print(summary, shown, args)
        return 1 if summary.mismatches else 0
    store = None
    if offline:
        records, source = _offline(args)
    else:
        from audit.replay.source import StoreHistory
        from audit.store.queries import AuditStore

        store = AuditStore.open(args.dsn, create=False)
        source = StoreHistory(store)
    try:
        if store is not None:
            records = _store_records(store, sel)
        chosen = sel.apply(records)
        unknown = sorted(set(sel.decision_ids) - {r.decision_id for r in records})
        if unknown:
            raise UserError(f"--decision {unknown[0]}: not found in {args.records or 'the store'}")
        if not chosen:
            _nothing_verified(sel, args.records or "the store")
        if store is not None and args.workers > 1:
            source = materialize(source, chosen)  # workers must not share the store's connection
        progress = _Progress(len(chosen), not args.quiet)
        summary, mismatches, runs = Summary(), [], []
        for result in verify(source, chosen, args.workers, progress):
            summary.add(result)
            if not result.match:
                mismatches.append(result)
            runs.append(result)
        if store is not None:
            from audit.store.queries import ReplayRun

            now = _now()
            store.write_replay_runs([ReplayRun.of(r, now) for r in runs])
    finally:
        if store is not None:
            store.close()
    _print(summary, mismatches, args)
    return 1 if summary.mismatches else 0


# ---- checkpoints ---------------------------------------------------------------------------------


def write_checkpoints(args: argparse.Namespace) -> int:
    """Checkpoint a store's event log every N events, resuming after the latest stored checkpoint:
    every cluster's, or only that of ``--cluster``."""
    from audit.replay.checkpoints import CheckpointCorrupt, CheckpointGap, extend_checkpoints
    from audit.store.queries import AuditStore

    if not args.dsn:
        raise UserError("--write-checkpoints: needs the store as --dsn")
    if args.write_checkpoints < 1:
        raise UserError(f"--write-checkpoints {args.write_checkpoints}: must be >= 1")
    with AuditStore.open(args.dsn, create=False) as store:
        clusters = store.event_clusters()  # every cluster with a log, whether its decisions are stored yet or not
        if args.cluster:
            clusters = [_held_cluster(args.cluster, clusters, "the store")]
        if not clusters:
            raise UserError(f"--write-checkpoints: no world events in the store at {args.dsn}: nothing to checkpoint")
        for cluster in clusters:
            top = store.max_seq(cluster)
            if top is None:
                continue
            try:
                written, _ = extend_checkpoints(store, store.write_checkpoint, cluster, args.write_checkpoints, top)
            except CheckpointCorrupt as exc:
                raise UserError(f"{exc}; remove it before writing new checkpoints after it") from None
            except CheckpointGap as exc:
                raise UserError(str(exc)) from None
            print(f"{cluster}: {len(written):,} checkpoint(s) written, every {args.write_checkpoints:,} events "
                  f"up to seq {top:,}")
    return 0


# ---- counterfactual ------------------------------------------------------------------------------


def _held_cluster(cluster: str, clusters: list[str], where: str) -> str:
    """``cluster`` (``--cluster``) if it is one of the ``clusters`` with events in ``where``."""
    if cluster not in clusters:
        held = f" (it holds {', '.join(clusters)})" if clusters else ""
        raise UserError(f"--cluster {cluster}: no world events of this cluster in {where}{held}")
    return cluster


def _whatif_cluster(args: argparse.Namespace, clusters: list[str], where: str) -> str:
    """The cluster whose window a what-if decides again: ``--cluster``, else the history's only one."""
    if args.cluster:
        return _held_cluster(str(args.cluster), clusters, where)
    if not clusters:
        raise UserError(f"--policy: no world events in {where}: nothing to replay")
    if len(clusters) > 1:
        raise UserError(f"--policy: {where} holds {len(clusters)} clusters ({', '.join(clusters)}); "
                        "name the one to replay with --cluster")
    return clusters[0]


def _history(args: argparse.Namespace) -> tuple[str, list[DecisionRecord], Any]:
    """The cluster, its records and the history of a counterfactual run: files, or a store held in memory."""
    from audit.replay.source import MemorySource, StoreHistory

    if args.records or args.events:
        records, source = _offline(args)
        return _whatif_cluster(args, source.clusters(), args.events), records, source
    if not args.dsn:
        raise UserError("--policy: give the history as --records and --events, --dsn, or --server")
    from audit.store.filters import DecisionFilter
    from audit.store.queries import AuditStore

    with AuditStore.open(args.dsn, create=False) as store:
        cluster = _whatif_cluster(args, store.event_clusters(), "the store")
        records = store.all_decisions(DecisionFilter(cluster=cluster, until=args.until))
        history = StoreHistory(store)
        top = store.max_seq(cluster)
        events: list[Any] = [] if top is None else list(history.events(cluster, -1, top))
    source = MemorySource(events)
    source.add_checkpoints(args.checkpoint_every)
    return cluster, records, source


def run_counterfactual(args: argparse.Namespace, sel: Selection) -> int:
    from audit.replay.service import WindowOutsideLog, cluster_events, counterfactual
    from audit.replay.whatif import delta_lines, deltas
    from audit.timestamps import parse_time_ms

    if not (sel.since and sel.until):
        raise UserError("--policy: give the window as --since and --until")
    doc = policy_document(args.policy)
    since, until = parse_time_ms(sel.since), parse_time_ms(sel.until)
    if until <= since:
        raise UserError(f"--until {sel.until}: must be after --since {sel.since}")
    if not (args.records or args.events or args.dsn) and (args.server or os.environ.get("CLAIMTRAIL_API")):
        return _server_counterfactual(args, sel, doc)
    cluster, records, source = _history(args)
    if not args.quiet:
        print(f"replaying {sel.since} .. {sel.until} of cluster {cluster} under {args.policy}", file=sys.stderr)
    try:
        result = counterfactual(source, cluster, cluster_events(source, cluster), records, doc, since, until)
    except WindowOutsideLog as exc:
        raise UserError(f"--since {sel.since} --until {sel.until}: {exc}") from None
    d = deltas(result)
    if args.json:
        print(json.dumps(d, indent=2, sort_keys=True))
    else:
        print("\n".join(delta_lines(d)))
    return 1 if d["quota_violations"][1] else 0


def _window_decisions(client: Any, params: dict[str, Any]) -> int:
    """How many decisions the audit API holds under ``params`` (a window, a cluster)."""
    overview = _http(partial(client.get, "/v1/stats/overview", params=params), "GET /v1/stats/overview")
    return sum(int(row.get("decisions", 0)) for row in overview.get("rows", []))


def _server_counterfactual(args: argparse.Namespace, sel: Selection, doc: dict[str, Any]) -> int:
    """The window decided again under ``doc`` by the audit API (which owns the store): the same
    deltas an offline run prints. Needs an admin token: it re-decides every tenant's pods."""
    import httpx

    from audit.replay.whatif import delta_lines

    url, headers = _server(args)
    with httpx.Client(base_url=url, headers=headers, timeout=3600.0) as client:
        cluster = args.cluster
        if not cluster:
            page = _http(partial(client.get, "/v1/decisions", params={"since": sel.since, "until": sel.until,
                                                                      "limit": 1}), "GET /v1/decisions")
            if not page["items"]:
                raise UserError(f"--since {sel.since} --until {sel.until}: no decisions in this window on {url}")
            cluster = page["items"][0]["cluster"]
            window = {"since": sel.since, "until": sel.until}
            if _window_decisions(client, window) != _window_decisions(client, {**window, "cluster": cluster}):
                raise UserError(f"--since {sel.since} --until {sel.until}: the window holds decisions of more than "
                                f"one cluster on {url} ({cluster} among them); name the one to replay with --cluster")
        if not args.quiet:
            print(f"replaying {sel.since} .. {sel.until} of cluster {cluster} under {args.policy} on {url}",
                  file=sys.stderr)
        body = {"cluster": cluster, "since": sel.since, "until": sel.until, "counterfactual_policy_document": doc}
        answer = _http(partial(client.post, "/v1/replay", json=body), "POST /v1/replay")
    d = answer["deltas"]
    if args.json:
        print(json.dumps(d, indent=2, sort_keys=True))
    else:
        print("\n".join(delta_lines(d)))
    return 1 if d["quota_violations"][1] else 0
