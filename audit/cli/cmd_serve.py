"""``claimtrail serve``: the audit API over HTTP, owning the store.

With the embedded store (``chdb://``, the default) this process owns the data directory and
every producer sends data to its ingest endpoints. An explicit ``--dsn`` must name an existing
store unless ``--create`` is given. Auth comes from ``--tokens FILE`` (see
``audit.api.auth``; it is reloaded on SIGHUP and when it changes); ``--insecure-local`` makes every caller an admin and is refused unless the
server binds a loopback address. ``--hash-token TOKEN`` prints the digest to put in the file.
``--checkpoint-every N`` (default 10,000; 0: off) has the server checkpoint each cluster's world
event log itself, in the background, as ``claimtrail replay --write-checkpoints N`` would (see
``audit.store.checkpoint_keeper``), so resumed watchers and replays fold at most N events.
"""

from __future__ import annotations

import argparse
import gc
import ipaddress
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import Any

from audit.errors import UserError
from audit.replay.checkpoints import DEFAULT_INTERVAL

# How long a thread may keep the interpreter while another waits for it (Python's default: 5 ms).
# A read hands the interpreter back at every call into the store engine, and must win it back to
# go on: while another request's thread runs Python (a page of records being decoded), each such
# return waited up to the whole interval, so a 2 ms lookup took about 10 ms beside one busy thread;
# at 1 ms it took about 5 ms, and nothing changed for a server with one request at a time.
SWITCH_INTERVAL = 0.001

log = logging.getLogger("claimtrail.serve")


def register(sub: Any) -> None:
    p = sub.add_parser("serve", help="serve the audit API (owns the store)")
    p.add_argument("--dsn", default=None, help="store DSN (default: CLAIMTRAIL_DSN or the embedded store)")
    p.add_argument("--create", action="store_true",
                   help="start an empty embedded store when --dsn (or CLAIMTRAIL_DSN) names none yet")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--tokens", metavar="FILE", help="YAML file mapping token digests to tenants or admin")
    p.add_argument("--insecure-local", action="store_true",
                   help="no authentication, every caller is admin (only when binding loopback)")
    p.add_argument("--max-body-mb", type=float, default=64.0, help="body size limit of ingest and OTLP requests, in MiB (default 64; 413 beyond)")
    p.add_argument("--replay-sync-limit", type=int, default=200,
                   help="decisions replayed within a request; more start a background job")
    p.add_argument("--replay-job-step", type=int, default=1000,
                   help="decisions a replay job replays between two progress updates (and stop checks)")
    p.add_argument("--migration-thresholds", metavar="FILE",
                   help="verdict thresholds for /v1/stats/migration (the YAML of `claimtrail migration report`); "
                        "default: the shipped deploy/migration/thresholds.yaml, as for `claimtrail migration report`")
    p.add_argument("--rate-limit", type=float, default=1000.0, metavar="N",
                   help="requests per second per tenant (and for admins, and per unauthenticated address); 429 beyond")
    p.add_argument("--burst", type=int, default=2000, help="requests a caller may make at once after a quiet spell")
    p.add_argument("--max-in-flight", type=int, default=16,
                   help="requests per caller running at the same time, so no tenant holds every worker; 429 beyond")
    p.add_argument("--tokens-poll-seconds", type=float, default=2.0,
                   help="how often the tokens file is checked for changes (SIGHUP reloads it at once)")
    p.add_argument("--no-id-index", action="store_true",
                   help="read decisions by id from the store engine only, without the index file kept beside an "
                        "embedded store (ids.sqlite: about 0.9 KB per decision of 1.3 KB)")
    p.add_argument("--checkpoint-every", type=int, default=DEFAULT_INTERVAL, metavar="N",
                   help="checkpoint each cluster's world event log every N events, in the background as its events "
                        "are stored (the checkpoints `claimtrail replay --write-checkpoints N` writes), so a resumed "
                        f"watcher or a replay folds at most N events; 0: write none (default {DEFAULT_INTERVAL:,})")
    p.add_argument("--hash-token", metavar="TOKEN", help="print the sha256 digest of TOKEN for the tokens file, then exit")
    p.set_defaults(func=run)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _thresholds(path: str) -> Any:
    """The migration verdict thresholds in ``path``; every problem names the file and the field."""
    from audit.migration import MigrationError
    from audit.thresholds_file import load

    try:
        return load(path)
    except MigrationError as exc:  # already names the file
        raise UserError(f"--migration-thresholds {exc}") from None


def _shipped_thresholds() -> Any:
    """The thresholds `claimtrail migration report` defaults to, refused by name when missing."""
    from audit import thresholds_file
    from audit.migration import MigrationError

    try:
        return thresholds_file.shipped()
    except MigrationError as exc:
        raise UserError(f"--migration-thresholds: not given, and the shipped thresholds cannot be used: {exc}; "
                        "give --migration-thresholds FILE") from None


def run(args: argparse.Namespace) -> int:
    from audit.api.auth import AuthConfig, hash_token, load_tokens

    if args.hash_token is not None:
        print(hash_token(args.hash_token))
        return 0
    if args.insecure_local and args.tokens:
        raise UserError("--insecure-local and --tokens exclude each other")
    if args.insecure_local:
        if not is_loopback(args.host):
            raise UserError(f"--insecure-local is only allowed on a loopback address, not --host {args.host}")
        auth = AuthConfig(insecure_local=True)
    elif args.tokens:
        auth = load_tokens(args.tokens)
    else:
        raise UserError("no authentication configured: give --tokens FILE (or --insecure-local on loopback)")
    if not 0 < args.port < 65536:
        raise UserError(f"--port {args.port}: expected 1..65535")
    if args.max_body_mb <= 0:
        raise UserError(f"--max-body-mb {args.max_body_mb}: expected a positive number")
    if args.replay_sync_limit < 1:
        raise UserError(f"--replay-sync-limit {args.replay_sync_limit}: expected at least 1")
    if args.rate_limit <= 0 or args.burst < 1 or args.max_in_flight < 1:
        raise UserError(f"--rate-limit {args.rate_limit:g} / --burst {args.burst} / --max-in-flight "
                        f"{args.max_in_flight}: expected a positive rate and at least 1 of each")
    if args.tokens_poll_seconds <= 0:
        raise UserError(f"--tokens-poll-seconds {args.tokens_poll_seconds:g}: expected a positive number")
    if args.replay_job_step < 1:
        raise UserError(f"--replay-job-step {args.replay_job_step}: expected at least 1")
    if args.checkpoint_every < 0:
        raise UserError(f"--checkpoint-every {args.checkpoint_every}: expected a number of events, or 0 for no "
                        "checkpoints")
    thresholds = _thresholds(args.migration_thresholds) if args.migration_thresholds else _shipped_thresholds()

    import uvicorn
    from uvicorn.config import STARTUP_FAILURE

    from audit.api.app import create_app
    from audit.api.deps import Settings
    from audit.api.limits import CallerLimits
    from audit.store.queries import AuditStore

    # Bound before anything else starts, so that "listening" is only said of an address that is
    # held, and one that is taken is told in one line before the store is opened.
    listener = _bind(args.host, args.port)
    # A DSN someone typed must name an existing store (a typo would otherwise serve an empty one);
    # the default location under CLAIMTRAIL_DATA_DIR is created on first start.
    explicit = bool(args.dsn or os.environ.get("CLAIMTRAIL_DSN"))
    # From here a SIGTERM stops the server gracefully, whenever it comes (see ``ShutdownRequest``);
    # Python's default would end the process before the store closes (its writers acknowledged,
    # its parser child stopped, its pods tables caught up).
    stop = ShutdownRequest()
    signal.signal(signal.SIGTERM, stop.request)
    try:
        store = AuditStore.open(args.dsn, create=args.create or not explicit)
    except BaseException:
        listener.close()
        raise
    salt = ""
    if args.tokens:
        from audit.api.auth import with_default_salt
        from audit.store.connection import data_dir
        from audit.telemetry.redaction import stored_salt

        embedded = store.target.embedded_path  # the store's data directory keeps the key of pod hashes
        salt = stored_salt(Path(embedded).parent if embedded else data_dir())
        auth = with_default_salt(auth, salt)
    reloader: Any = None
    try:
        if not args.no_id_index:  # first: what the spool delivers next is indexed as it is stored
            store.keep_id_index()  # reads by id without an engine query, once the index has the store
        store.recover_ingest()
        store.keep_pod_tables()  # events stored while no server ran, or by another process
        if args.checkpoint_every:
            store.keep_checkpoints(args.checkpoint_every)  # also what the logs stored so far are due
        store.parse_in_child_process()  # reads must not wait for the interpreter while a body is parsed
        app = create_app(store, Settings(auth=auth, max_body_bytes=int(args.max_body_mb * 1024 * 1024),
                                         replay_sync_limit=args.replay_sync_limit,
                                         replay_job_step=args.replay_job_step,
                                         migration_thresholds=thresholds,
                                         limits=CallerLimits(rate=args.rate_limit, burst=args.burst,
                                                             in_flight=args.max_in_flight)),
                         receiver=_otlp_receiver)
        if args.tokens:
            from audit.api.tokens_reload import TokenReloader

            reloader = TokenReloader(app, args.tokens, interval=args.tokens_poll_seconds, default_salt=salt)
            reloader.start()
        sys.setswitchinterval(SWITCH_INTERVAL)
        # What exists now (modules, the app, the store's clients: about 100,000 objects) lives as
        # long as the process. A full collection walked all of it while holding the interpreter, 80
        # to 180 ms on a busy two-core machine, stalling every request at once; frozen, it is never
        # walked again and a collection visits only what requests left behind.
        gc.collect()
        gc.freeze()
        port = listener.getsockname()[1]
        print(f"claimtrail serve: listening on http://{args.host}:{port} (OpenAPI at /docs)",
              file=sys.stderr, flush=True)
        # the C parser and event loop (dependencies, so named here rather than left to uvicorn's
        # "auto", which would fall back to h11 and asyncio unseen): 0.15-0.35 ms less server CPU
        # per read, measured with benchmarks/read_cpu.py, where a by-id read costs about 3 ms
        config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", access_log=False,
                                loop="uvloop", http="httptools")
        if stop.serve(uvicorn.Server(config), listener):
            raise SystemExit(STARTUP_FAILURE)  # as uvicorn.run: the server could not start (logged above)
    except KeyboardInterrupt:
        pass  # Ctrl-C, raised again by uvicorn after its graceful shutdown (uvicorn.run ends quietly so
        # too) or come before it served: the store closes either way
    finally:
        if reloader is not None:
            reloader.stop()
        listener.close()
        store.close()
    return 0


def _bind(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (an IPv6 address when the host has a colon, as uvicorn
    binds); an address taken or not this machine's is a UserError naming it."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a restart may reuse it at once
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(f"--host {host} --port {port}: cannot listen there: {exc.strerror or exc}") from None
    return sock


class ShutdownRequest:
    """SIGTERM as a request the server honours, however early it comes.

    The handler only records the request, and tells the server once there is one: uvicorn then
    shuts down gracefully (it takes SIGTERM over while it serves, and raises it again under this
    handler when it is done). A handler that raised instead could lose the signal: Python runs it
    wherever the main thread is, and an exception raised inside a finalizer or a weak-reference
    callback is printed and dropped ("Exception ignored in ..."), which left a server that was
    told to stop during its startup serving on.
    """

    def __init__(self) -> None:
        self.requested = False
        self.server: Any = None

    def request(self, signum: int = signal.SIGTERM, frame: Any = None) -> None:
        self.requested = True
        if self.server is not None:
            self.server.should_exit = True

    def serve(self, server: Any, listener: socket.socket) -> bool:
        """Run ``server`` (a ``uvicorn.Server``) on the bound ``listener`` unless a stop came first;
        True when it failed to start."""
        self.server = server  # a request from here on reaches it, even before it starts serving
        if self.requested:
            return False
        server.run(sockets=[listener])
        return not server.started and not self.requested


def _otlp_receiver(sink: Any, max_body_bytes: int) -> tuple[Any, Any]:
    """The OTLP/HTTP receiver's routes (/v1/traces, /v1/logs) storing into ``sink``, and its counters."""
    from ingest.otlp import ReceiverCounters, make_router

    counters = ReceiverCounters()
    return make_router(sink, counters=counters, max_body_bytes=max_body_bytes), counters
