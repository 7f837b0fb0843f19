"""``claimtrail ingest kube``: watch a live cluster and send the world event log and observed
decisions to the audit API (``--server http(s)://…``) or straight to a ClickHouse DSN.

Kubernetes access comes from ``--kubeconfig``/``--context``, else the in-cluster service account,
else the default kubeconfig. Unless ``--no-leader-election``, replicas elect one leader through
a Lease (``--lease-namespace``/``--lease-name``); the others wait. A leader that loses its Lease
exits with status 1 so its Deployment restarts it clean.

A watcher that becomes leader first reads back what the sink holds of the cluster (its world at
the end of the stored event log, and the decisions stored about the pods in it) and goes on from
there: objects unchanged since then log nothing, objects deleted meanwhile get their delete, and
decisions already stored are not derived again. A sink that cannot be asked (an API that does not
answer) is logged, and the watcher starts from an empty world, logging every object as new.

Sequence numbers: the stored log's last ``seq`` for the cluster + 1 when the sink can tell,
otherwise ``start-time-in-ms × 2^20`` so a restarted watcher never reuses a number an earlier run
wrote (1 048 576 events per millisecond of uptime would be needed to collide).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import threading
import time
from typing import Any

from audit.errors import UserError

log = logging.getLogger(__name__)

IN_CLUSTER_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def register(sub: Any) -> None:
    p = sub.add_parser("ingest", help="ingest from a source into the audit store")
    isub = p.add_subparsers(dest="ingest_source", metavar="SOURCE")
    k = isub.add_parser("kube", help="watch a Kubernetes cluster (DRA objects, pods, scheduler events)")
    k.add_argument("--server", required=True, help="audit API URL, or a ClickHouse DSN in server mode")
    k.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then ~/.kube/config)")
    k.add_argument("--context", help="kubeconfig context")
    k.add_argument("--namespace", action="extend", nargs="+", default=[], metavar="N",
                   help="watch namespaced objects only in these namespaces (default all namespaces)")
    k.add_argument("--cluster", default="", help="cluster name in events and records (default: the kubeconfig "
                   "context, --context or the current one; 'default' in-cluster)")
    k.add_argument("--lease-namespace", help="namespace of the election Lease (default: own namespace or 'claimtrail')")
    k.add_argument("--lease-name", help="Lease name (default claimtrail-watcher-<cluster>, made a valid name "
                   "when the cluster's is not one)")
    k.add_argument("--identity", default=os.environ.get("POD_NAME") or socket.gethostname(), help="this replica's name")
    k.add_argument("--no-leader-election", action="store_true", help="ingest without a Lease (single replica only)")
    k.add_argument("--no-allocator-check", action="store_true", help="do not re-run observed allocations")
    k.add_argument("--seq-start", type=int,
                   help="first sequence number (default: the last seq --server holds for the cluster + 1, "
                        "else the start time in ms * 2^20)")
    k.add_argument("--page-size", type=int, default=500, help="list page size")
    k.set_defaults(func=run_kube)
    p.set_defaults(func=lambda _a: (p.print_help(), 2)[1])


def _api_client(args: argparse.Namespace) -> tuple[Any, str]:
    """The API client, and the kubeconfig context it uses ('' in-cluster)."""
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    cfg = client.Configuration()
    try:
        if not (args.kubeconfig or args.context):
            try:
                config.load_incluster_config(client_configuration=cfg)
                return client.ApiClient(cfg), ""
            except ConfigException:
                pass
        config.load_kube_config(config_file=args.kubeconfig, context=args.context, client_configuration=cfg)
        context = args.context or config.list_kube_config_contexts(config_file=args.kubeconfig)[1].get("name", "")
    except (ConfigException, OSError) as exc:
        where = args.kubeconfig or "~/.kube/config"
        raise UserError(f"--kubeconfig {where}: cannot load Kubernetes access: {exc}") from None
    return client.ApiClient(cfg), str(context or "")


def _open_sink(target: str) -> Any:
    try:
        from ingest.sinks import open_sink
    except ImportError as exc:
        raise UserError(f"--server {target}: no sink available in this installation ({exc})") from None
    try:
        return open_sink(target)
    except ValueError as exc:
        raise UserError(f"--server {target}: {exc}") from None


def _first_seq(stored: Any, given: int | None) -> int:
    if given is not None:
        return given
    if stored is not None and stored.last_seq is not None:
        return int(stored.last_seq) + 1
    return int(time.time() * 1000) << 20


def _stored_world(sink: Any, cluster: str) -> Any:
    """What the sink holds of ``cluster`` (None when it cannot be asked), with how long reading it took."""
    started = time.monotonic()
    stored = sink.stored_world(cluster)
    if stored is not None:
        log.info("read the stored world", extra={
            "checkpoint": stored.checkpoint, "events": stored.events, "last_seq": stored.last_seq,
            "objects": sum(len(v) for v in stored.objects.values()), "decisions": len(stored.decisions),
            "seconds": round(time.monotonic() - started, 3)})
    else:
        log.warning("starting from an empty world: every object is logged as new")
    return stored


def _meter_provider() -> Any:
    """OTLP metric export when the standard OpenTelemetry endpoint variables are set; otherwise
    the global (no-op unless configured) provider."""
    if not (os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT")):
        return None
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource

    from audit.telemetry.pipeline import otlp_exporters

    exporter = otlp_exporters(os.environ)[2]
    resource = Resource.create({SERVICE_NAME: os.environ.get("OTEL_SERVICE_NAME", "claimtrail-watcher")})
    return MeterProvider(resource=resource, metric_readers=[PeriodicExportingMetricReader(exporter)])


def _lease_namespace(args: argparse.Namespace) -> str:
    if args.lease_namespace:
        return str(args.lease_namespace)
    try:
        with open(IN_CLUSTER_NAMESPACE) as fh:
            return fh.read().strip()
    except OSError:
        return "claimtrail"


def run_kube(args: argparse.Namespace) -> int:
    from audit.records import cluster_name_problem
    from ingest.kube.agreement import AgreementMetrics
    from ingest.kube.lease import LeaseElector, default_lease_name, lease_name_problem
    from ingest.kube.observe import DecisionObserver
    from ingest.kube.watcher import Watcher, utc_now

    problem = cluster_name_problem(args.cluster) if args.cluster else ""
    if problem:  # every event and record would be refused by the store
        raise UserError(f"--cluster: {problem}")
    problem = lease_name_problem(args.lease_name) if args.lease_name else ""
    if problem:
        raise UserError(f"--lease-name {problem}")
    if args.seq_start is not None and args.seq_start < 0:
        raise UserError("--seq-start: must be >= 0")
    api, context = _api_client(args)
    # the kubeconfig's context names the cluster unless --cluster does: two clusters watched
    # from one kubeconfig must not write one event log under one name
    cluster = args.cluster or context or "default"
    problem = cluster_name_problem(cluster)
    if problem:
        where = "--context" if args.context else "the kubeconfig's current context"
        raise UserError(f"{where} {problem}; name the cluster with --cluster")
    lease_name = args.lease_name or default_lease_name(cluster)
    sink = _open_sink(args.server)
    meters = _meter_provider()
    agreement_metrics = AgreementMetrics(meters)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())

    def lead(stop_leading: threading.Event) -> None:
        stored = _stored_world(sink, cluster)
        watcher = Watcher(
            api, cluster, sink,
            namespaces=args.namespace,
            observer=DecisionObserver(
                cluster, utc_now, check_allocations=not args.no_allocator_check, metrics=agreement_metrics
            ),
            next_seq=_first_seq(stored, args.seq_start),
            page_size=args.page_size,
        )
        if stored is not None:
            watcher.resume(stored)
        watcher.run(stop_leading)

    try:
        if args.no_leader_election:
            lead(stop)
            return 0
        elector = LeaseElector(api, _lease_namespace(args), lease_name, args.identity)
        lost = elector.run(stop, lead)
        return 1 if lost else 0
    finally:
        sink.close()
        if meters is not None:
            meters.shutdown()
