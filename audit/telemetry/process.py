"""Decision export in a child process, so the engine's thread only pays for handing a record over.

Even with spans built directly, the OTLP exporters' protobuf encoding alone costs about 200 µs
of CPU per decision in Python, a large share of the engine's own time per decision, and in the
engine's process it would compete for the interpreter lock. ``ExporterProcess`` runs
``DecisionTelemetry`` (batch processors, OTLP exporters, standard ``OTEL_*`` configuration) in a
spawned child and sends it batches of encoded decisions through a pipe (``audit.telemetry.wire``:
about 2.6 µs per decision in the engine's thread, against 12 µs to pickle the record). Each
decision is encoded when ``export()`` is called, so changing a record afterwards changes nothing
sent. Configuration, record-time and encoding errors are raised in the caller, before anything
is sent. A full pipe blocks the caller (back-pressure), so no decision is silently dropped
between the two processes.
"""

from __future__ import annotations

import gc
import multiprocessing as mp
import os
import pickle
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

from audit.allocator.outcome import TierEvidence
from audit.records import DecisionRecord
from audit.telemetry.errors import TelemetryError
from audit.telemetry.pipeline import DecisionTelemetry, TelemetrySettings, protocol_for
from audit.telemetry.traces import parsed_time
from audit.telemetry.wire import decode_decision, encode_decision

DEFAULT_BATCH = 64
# Messages the child accepts ahead of its export work: 256 batches of 64 are about 16,000
# decisions, some 30 MB of encoded records.
INBOX_MESSAGES = 256
# Added to the child's CPU niceness, so that on busy cores the scheduler keeps the engine running
# instead of preempting it for export work. Measured on two cores shared with other work (eight
# back-to-back pairs of runs), 10 lowered the CPU the engine lost to the child from +66 to +37 µs
# per decision with the engine's wall time unchanged; 19 let other work starve the child, which
# then stalled the engine on a full pipe (wall time per decision up by half).
DEFAULT_NICENESS = 10


@dataclass(frozen=True)
class FlushReport:
    """What the child has done so far: decisions exported, and errors it met (with messages).

    ``cpu_seconds`` is the CPU time the child has used since it finished starting up (imports
    and exporter setup excluded), so a caller can see what export costs on the other core.
    """

    exported: int
    errors: tuple[str, ...]
    cpu_seconds: float = field(default=0.0, compare=False)


def _dumps(message: Any) -> bytes:
    # plain pickle at the highest protocol is a quarter faster than Connection.send's pickler
    return pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)


def _child_main(conn: Connection, niceness: int) -> None:
    telemetry = DecisionTelemetry.from_env()
    # Everything imported and built so far lives as long as the child: moving it out of the
    # collector's generations spares every full collection from walking the SDK's object graph
    # (about a tenth of the child's CPU per decision, measured).
    gc.freeze()
    if niceness:
        os.nice(niceness)
    exported = 0
    errors: list[str] = []
    started = time.process_time()

    def report() -> bytes:
        return _dumps(FlushReport(exported, tuple(errors), time.process_time() - started))

    inbox = _drain_into_inbox(conn)
    while True:
        data = inbox.get()
        if data is None:  # the caller went away without stopping us: export what arrived
            telemetry.shutdown()
            return
        message = pickle.loads(data)
        kind = message[0]
        if kind == "decisions":
            for encoded in message[1]:
                try:
                    telemetry.export(*decode_decision(encoded))
                    exported += 1
                except TelemetryError as exc:  # checked in the caller already; kept for completeness
                    errors.append(str(exc))
        elif kind == "health":
            telemetry.metrics.observe_health_transition(*message[1])
        elif kind == "replay":
            telemetry.metrics.observe_replay(*message[1])
        elif kind == "flush":
            telemetry.force_flush()
            conn.send_bytes(report())
        elif kind == "stop":
            telemetry.shutdown()
            conn.send_bytes(report())
            return


def _drain_into_inbox(conn: Connection) -> queue.Queue[bytes | None]:
    """Read the caller's messages as they arrive, on a thread of their own.

    The socket between the processes holds only a few batches; without this reader, a child
    that fell that far behind (its share of busy cores dropping for a moment) made the engine
    block on every batch until it caught up. The inbox absorbs such stretches; when it is full
    the reader stops reading, the socket fills and the caller blocks (back-pressure), so nothing
    is dropped. ``None`` marks a caller that closed its end.
    """
    inbox: queue.Queue[bytes | None] = queue.Queue(maxsize=INBOX_MESSAGES)

    def read() -> None:
        while True:
            try:
                data = conn.recv_bytes()
            except (EOFError, OSError):
                inbox.put(None)
                return
            inbox.put(data)

    threading.Thread(target=read, name="claimtrail-otel-inbox", daemon=True).start()
    return inbox


class ExporterProcess:
    """``export()`` like ``DecisionTelemetry``, with the SDK work done in a child process.

    Records are sent in batches of ``batch_size``; ``niceness`` is added to the child's CPU
    niceness (see ``DEFAULT_NICENESS``).
    """

    def __init__(self, batch_size: int = DEFAULT_BATCH, niceness: int = DEFAULT_NICENESS) -> None:
        # fail in the caller, with the variable named, rather than in a child nobody watches
        self.settings = TelemetrySettings.from_env(os.environ)
        for signal in ("traces", "logs", "metrics"):
            protocol_for(signal, os.environ)
        self.batch_size = batch_size
        self._buffer: list[bytes] = []
        # spawn, not fork: the parent may run gRPC or SDK threads that a fork would copy mid-state
        context = mp.get_context("spawn")
        self._conn, child_conn = context.Pipe(duplex=True)
        self._proc = context.Process(target=_child_main, args=(child_conn, niceness), name="claimtrail-otel-export", daemon=True)
        self._proc.start()
        child_conn.close()
        self._closed = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid

    def export(
        self,
        record: DecisionRecord,
        verdicts: Sequence[TierEvidence] = (),
        labels: Mapping[str, str] | None = None,
    ) -> None:
        if self._closed:
            raise TelemetryError("ExporterProcess: closed")
        parsed_time(record)  # raises TelemetryError naming the decision for an unreadable time
        if record.duration_us < 0:
            raise TelemetryError(f"DecisionRecord {record.decision_id}: duration_us: must be >= 0, got {record.duration_us}")
        self._buffer.append(encode_decision(record, verdicts, labels))
        if len(self._buffer) >= self.batch_size:
            self._send_buffer()

    def observe_health_transition(self, cluster: str, model: str, healthy: bool) -> None:
        self._send(("health", (cluster, model, healthy)))

    def observe_replay(self, cluster: str, matched: bool) -> None:
        self._send(("replay", (cluster, matched)))

    def flush(self) -> FlushReport:
        """Send what is buffered and wait until the child has handed it to the OTLP exporters."""
        self._send(("flush",))
        return self._receive_report()

    def close(self) -> FlushReport:
        if self._closed:
            raise TelemetryError("ExporterProcess: already closed")
        self._send(("stop",))
        report = self._receive_report()
        self._closed = True
        self._conn.close()
        self._proc.join(timeout=30)
        return report

    def __enter__(self) -> ExporterProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self._closed:
            self.close()

    def _receive_report(self) -> FlushReport:
        try:
            report: FlushReport = pickle.loads(self._conn.recv_bytes())
        except (EOFError, OSError):
            self._proc.join(timeout=5)
            raise TelemetryError(f"ExporterProcess: export process exited with code {self._proc.exitcode}") from None
        return report

    def _send(self, message: tuple[Any, ...]) -> None:
        self._send_buffer()
        self._write(message)

    def _send_buffer(self) -> None:
        if self._buffer:
            batch, self._buffer = self._buffer, []
            self._write(("decisions", batch))

    def _write(self, message: tuple[Any, ...]) -> None:
        # checked per message, not per decision: a liveness check is a system call
        self._check_open()
        try:
            self._conn.send_bytes(_dumps(message))
        except OSError:
            self._proc.join(timeout=5)
            raise TelemetryError(f"ExporterProcess: export process exited with code {self._proc.exitcode}") from None

    def _check_open(self) -> None:
        if self._closed:
            raise TelemetryError("ExporterProcess: closed")
        if not self._proc.is_alive():
            raise TelemetryError(f"ExporterProcess: export process exited with code {self._proc.exitcode}")
