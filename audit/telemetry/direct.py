"""ClaimTrail's decision exporter: OTLP protobuf encoded from each record, batched, sent over HTTP.

``DecisionExporter.export()`` checks the record's time and keeps the decision; every
``ENCODE_BATCH`` decisions (and at flush) it hands the batch to a sender thread, which writes each
decision's spans and verdict log records as OTLP protobuf (``audit.telemetry.decision_wire``:
straight from the record for the usual decision, else through its trace shape,
``audit.telemetry.shape`` and ``audit.telemetry.otlpwire``), counts it in the decision metrics
(``audit.telemetry.metric_points``), wraps full batches in export requests and POSTs them
(``audit.telemetry.delivery``). The encoding takes the interpreter lock like any Python code, so
it costs the process as much CPU on either thread; on the sender's it runs apart from the
engine's work, its tables and output staying in its own core's caches instead of pushing the
engine's out, and the engine's thread pays only for keeping the record. Batches follow the SDK's
variables: ``OTEL_BSP_MAX_EXPORT_BATCH_SIZE`` / ``OTEL_BLRP_MAX_EXPORT_BATCH_SIZE`` items per
request (default 512), ``OTEL_BSP_SCHEDULE_DELAY`` / ``OTEL_BLRP_SCHEDULE_DELAY`` ms at most
between sends (default 5,000), ``OTEL_BSP_MAX_QUEUE_SIZE`` decisions waiting for the sender
(default 32,768; a full queue blocks the caller instead of dropping decisions) and
``OTEL_METRIC_EXPORT_INTERVAL`` (default 60,000 ms).

A decision is encoded after ``export()`` returns, on another thread, so a record must not change
once exported (the engine's records are sealed by their digest before anyone sees them). A
decision that cannot be encoded, whatever the error, is counted with its error in the report,
never sent half-built, and the decisions after it still go.

``flush()`` and ``close()`` return an ``ExportReport``: per signal, what was sent, delivered and
refused, with the first errors, so a caller can tell an export that reached nobody.
"""

from __future__ import annotations

import bisect
import os
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.resources import SERVICE_NAME, Resource

from audit.allocator.outcome import TierEvidence
from audit.records import DecisionRecord
from audit.telemetry import decision_wire, otlpwire
from audit.telemetry.delivery import HttpSignal, SignalReport
from audit.telemetry.errors import TelemetryConfigError, TelemetryError
from audit.telemetry.metric_points import DecisionCounts
from audit.telemetry.pipeline import (
    DEFAULT_QUEUE_ITEMS,
    DEFAULT_SERVICE_NAME,
    SIGNALS,
    TelemetrySettings,
    protocol_for,
)
from audit.telemetry.shape import AttemptLinks
from audit.telemetry.timefmt import time_ns

DEFAULT_BATCH_ITEMS = 512
DEFAULT_DELAY_MS = 5000
DEFAULT_METRIC_INTERVAL_MS = 60_000
ENCODE_BATCH = 512

Decision = tuple[DecisionRecord, Sequence[TierEvidence], Mapping[str, str] | None]


def _int_env(environ: Mapping[str, str], name: str, default: int) -> int:
    raw = environ.get(name, "")
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise TelemetryConfigError(f"{name}: {raw!r} is not an integer") from None
    if value <= 0:
        raise TelemetryConfigError(f"{name}: must be > 0, got {value}")
    return value


@dataclass(frozen=True)
class ExportReport:
    """What an export achieved. ``decisions_delivered`` counts decisions whose spans (or, with
    traces off, whose verdict logs) an endpoint accepted, less one for each item it refused in a
    partial success; ``errors`` name decisions that could not be encoded at all."""

    decisions: int
    decisions_delivered: int
    traces: SignalReport
    logs: SignalReport
    metrics: SignalReport
    errors: tuple[str, ...] = ()

    @property
    def nothing_delivered(self) -> bool:
        return self.decisions > 0 and self.decisions_delivered == 0

    def lines(self) -> list[str]:
        return [
            f"decisions: {self.decisions_delivered:,} of {self.decisions:,} delivered",
            self.traces.line("spans"),
            self.logs.line("verdict log records"),
            self.metrics.line("metric requests"),
        ]


class _Batch:
    """Encoded items of one signal waiting to be sent, and where each decision's items end (a
    decision counts as delivered with the request that holds its last item: a trace's root)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.items: list[bytes] = []
        self.ends: list[int] = []

    def add(self, items: list[bytes]) -> None:
        self.items += items
        self.ends.append(len(self.items))

    def take(self, count: int) -> tuple[list[bytes], int]:
        """The first ``count`` items and the number of decisions they complete."""
        items, self.items = self.items[:count], self.items[count:]
        done = bisect.bisect_right(self.ends, count)
        self.ends = [end - count for end in self.ends[done:]]
        return items, done


class DecisionExporter:
    """Exports decisions as OTLP traces, verdict logs and metrics over HTTP, from the caller's process."""

    def __init__(self, environ: Mapping[str, str] | None = None, *, api_url: str = "",
                 resource: Resource | None = None) -> None:
        env = dict(os.environ if environ is None else environ)
        if api_url and not env.get("CLAIMTRAIL_API"):
            env["CLAIMTRAIL_API"] = api_url
        self.settings = TelemetrySettings.from_env(env)
        enabled = {"traces": self.settings.traces, "logs": self.settings.logs, "metrics": self.settings.metrics}
        for signal in SIGNALS:
            if enabled[signal] and protocol_for(signal, env) != "http/protobuf":
                specific = f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL"
                name = specific if env.get(specific) else "OTEL_EXPORTER_OTLP_PROTOCOL"
                raise TelemetryConfigError(f"{name}: ClaimTrail exports over 'http/protobuf' only")
        self._options = self.settings.shape_options()
        self._links = AttemptLinks()
        self.resource = resource or _resource(env)
        self._envelope = otlpwire.Envelope(self.resource.attributes, schema_url=self.resource.schema_url)
        self._signals = {signal: HttpSignal(signal, env) for signal in SIGNALS if enabled[signal]}
        self._batches = {"traces": _Batch(_int_env(env, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE", DEFAULT_BATCH_ITEMS)),
                         "logs": _Batch(_int_env(env, "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE", DEFAULT_BATCH_ITEMS))}
        self._delay_s = min(_int_env(env, "OTEL_BSP_SCHEDULE_DELAY", DEFAULT_DELAY_MS),
                            _int_env(env, "OTEL_BLRP_SCHEDULE_DELAY", DEFAULT_DELAY_MS)) / 1000
        self._metric_interval_s = _int_env(env, "OTEL_METRIC_EXPORT_INTERVAL", DEFAULT_METRIC_INTERVAL_MS) / 1000
        queued = _int_env(env, "OTEL_BSP_MAX_QUEUE_SIZE", DEFAULT_QUEUE_ITEMS)
        self.metrics = DecisionCounts() if self.settings.metrics else None
        self._metrics_start = time.time_ns()
        self._metrics_sent_at = time.monotonic()
        self._pending: list[Decision] = []
        self._lock = threading.Lock()
        # the sender's jobs are batches of ENCODE_BATCH decisions: at most `queued` decisions wait
        self._queue: queue.Queue[tuple[str, Any, int, int] | None] = queue.Queue(
            maxsize=max(2, queued // ENCODE_BATCH))
        self._decisions = 0
        self._delivered = 0
        self._errors: list[str] = []
        self._closed = False
        self._sender = threading.Thread(target=self._send_loop, name="claimtrail-otlp-sender", daemon=True)
        self._sender.start()

    # ---- the caller's side ------------------------------------------------------------------------

    def export(self, record: DecisionRecord, verdicts: Sequence[TierEvidence] = (),
               labels: Mapping[str, str] | None = None) -> None:
        """Queue one decision; raises ``TelemetryError`` naming it when its time cannot be read."""
        if self._closed:
            raise TelemetryError("DecisionExporter: closed")
        time_ns(record)  # raises naming the decision; remembered for the encoding
        if record.duration_us < 0:
            raise TelemetryError(f"DecisionRecord {record.decision_id}: duration_us: must be >= 0, got {record.duration_us}")
        if record.wait_ms < 0:
            raise TelemetryError(f"DecisionRecord {record.decision_id}: wait_ms: must be >= 0, got {record.wait_ms}")
        self._pending.append((record, verdicts, labels))
        if len(self._pending) >= ENCODE_BATCH:
            self._encode_pending()

    def observe_health_transition(self, cluster: str, model: str, healthy: bool) -> None:
        if self.metrics is not None:
            with self._lock:
                self.metrics.observe_health_transition(cluster, model, healthy)

    def observe_replay(self, cluster: str, matched: bool) -> None:
        if self.metrics is not None:
            with self._lock:
                self.metrics.observe_replay(cluster, matched)

    def flush(self, timeout_s: float = 120.0) -> ExportReport:
        """Send everything exported so far, metrics included, and wait for the answers."""
        self._encode_pending()
        done = threading.Event()
        self._queue.put(("flush", done, 0, 0))
        done.wait(timeout_s)
        return self.report()

    def close(self) -> ExportReport:
        if self._closed:
            raise TelemetryError("DecisionExporter: already closed")
        report = self.flush()
        self._closed = True
        self._queue.put(None)
        self._sender.join(timeout=30)
        for signal in self._signals.values():
            signal.close()
        return report

    def report(self) -> ExportReport:
        with self._lock:
            def of(signal: str) -> SignalReport:
                sender = self._signals.get(signal)
                return _copy(sender.report) if sender else SignalReport(signal, enabled=False)

            return ExportReport(self._decisions, self._delivered, of("traces"), of("logs"), of("metrics"),
                                tuple(self._errors))

    def __enter__(self) -> DecisionExporter:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._closed:
            self.close()

    def _encode_pending(self) -> None:
        """Hand the decisions kept so far to the sender thread, which encodes them (see the module
        docstring for why there); waits while the queue is full."""
        pending, self._pending = self._pending, []
        if pending:
            self._queue.put(("encode", pending, len(pending), 0))

    def _cut_all(self) -> list[tuple[str, list[bytes], int]]:
        """Every partial batch as a request: (signal, items, decisions completed)."""
        with self._lock:
            return [(kind, *batch.take(len(batch.items))) for kind, batch in self._batches.items() if batch.items]

    # ---- the sender thread ------------------------------------------------------------------------

    def _send_loop(self) -> None:
        while True:
            try:
                job = self._queue.get(timeout=min(self._delay_s, self._metric_interval_s))
            except queue.Empty:
                # the schedule delay passed: send what has gathered
                for kind, items, decisions in self._cut_all():
                    self._send(kind, items, decisions)
                job = ("idle", None, 0, 0)
            if job is None:
                return
            kind, payload, _, decisions = job
            if kind == "encode":
                self._encode(payload)
            elif kind == "flush":
                for signal, items, done in self._cut_all():
                    self._send(signal, items, done)
                self._send_metrics()
                payload.set()
                continue
            if time.monotonic() - self._metrics_sent_at >= self._metric_interval_s:
                self._send_metrics()

    def _encode(self, pending: list[Decision]) -> None:
        """Encode a batch of decisions and send the requests it fills. Only this thread encodes,
        so the retry links and the encoder's caches see the decisions in the order exported."""
        options, links, counts = self._options, self._links, self.metrics
        want_spans, want_logs = "traces" in self._signals, "logs" in self._signals
        encoded: list[tuple[list[bytes], list[bytes]]] = []
        errors: list[str] = []
        sent = []
        for record, verdicts, labels in pending:
            try:
                decision_spans, decision_logs, record = decision_wire.fields(
                    record, verdicts, labels, options, links, want_spans, want_logs)
                encoded.append((decision_spans, decision_logs))
            except Exception as exc:  # escaping this thread, an error would stop every later send
                errors.append(str(exc) if isinstance(exc, TelemetryError)
                              else f"DecisionRecord {record.decision_id}: cannot be encoded for OTLP: {exc}")
                continue
            sent.append(record)
        requests = []
        with self._lock:
            self._decisions += len(pending)
            self._errors += errors
            if counts is not None:
                for record in sent:
                    counts.observe_decision(record)
            spans, logs = self._batches["traces"], self._batches["logs"]
            for decision_spans, decision_logs in encoded:
                if decision_spans:
                    spans.add(decision_spans)
                if decision_logs:
                    logs.add(decision_logs)
            for kind, batch in self._batches.items():
                while len(batch.items) >= batch.limit:
                    requests.append((kind, *batch.take(batch.limit)))
        for kind, items, decisions in requests:
            self._send(kind, items, decisions)

    def _send(self, kind: str, items: list[bytes], decisions: int) -> None:
        signal = self._signals.get(kind)
        if signal is None:
            return
        try:
            rejected = signal.send(self._envelope.request(items), len(items))
        except Exception as exc:  # a dead sender thread would lose every later batch unseen
            with self._lock:
                signal.report.failed(len(items), f"{signal.url}: {type(exc).__name__}: {exc}")
            return
        # decisions are counted by their spans, or by their verdict logs when no spans are sent;
        # a partial success does not say which items it refused, and any of them may be a
        # decision's root (ClaimTrail's receiver refuses decisions so), so none is counted for it
        if rejected is not None and (kind == "traces" or "traces" not in self._signals):
            with self._lock:
                self._delivered += max(0, decisions - rejected)

    def _send_metrics(self) -> None:
        signal = self._signals.get("metrics")
        self._metrics_sent_at = time.monotonic()
        if signal is None or self.metrics is None:
            return
        try:
            with self._lock:
                if not self.metrics.points():
                    return
                request = self.metrics.request(self.resource.attributes, self._metrics_start, time.time_ns())
            signal.send(request.SerializeToString(), 1)
        except Exception as exc:  # as for spans and logs: a dead sender thread would hang flush and close
            with self._lock:
                signal.report.failed(1, f"{signal.url}: {type(exc).__name__}: {exc}")


def _copy(report: SignalReport) -> SignalReport:
    return SignalReport(report.signal, report.enabled, report.requests, report.requests_failed, report.items,
                        report.items_failed, list(report.errors))


def _resource(environ: Mapping[str, str]) -> Resource:
    # explicit resource attributes win over the environment, so name the service only when
    # neither OTEL_SERVICE_NAME nor OTEL_RESOURCE_ATTRIBUTES does
    named = bool(environ.get("OTEL_SERVICE_NAME")) or "service.name=" in environ.get("OTEL_RESOURCE_ATTRIBUTES", "")
    return Resource.create() if named else Resource.create({SERVICE_NAME: DEFAULT_SERVICE_NAME})
