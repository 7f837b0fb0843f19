"""Sending encoded OTLP requests over HTTP, and counting what was delivered and what was not.

One ``HttpSignal`` per signal (traces, logs) reads its endpoint, headers, timeout, compression
and certificates from the standard ``OTEL_EXPORTER_OTLP_*`` variables (the per-signal variable
first), keeps one connection open and retries what the OTLP/HTTP specification calls retryable
(429, 502, 503, 504 and connection failures) a few times with backoff, waiting at least as long as
an answer's ``Retry-After`` asks (up to ``MAX_RETRY_AFTER_S``). Every request ends in the
signal's ``SignalReport``: requests and items sent and refused, with the first distinct errors,
so an export that reached nobody can say so instead of passing for a success.
"""

from __future__ import annotations

import email.utils
import gzip
import http.client
import re
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from audit.telemetry.errors import TelemetryConfigError

DEFAULT_ENDPOINT = "http://localhost:4318"
PATHS = {"traces": "/v1/traces", "logs": "/v1/logs", "metrics": "/v1/metrics"}
RETRYABLE = frozenset({429, 502, 503, 504})
ATTEMPTS = 3
BACKOFF_S = (0.25, 0.5)
# The OTLP/HTTP spec has a client honour a throttled answer's Retry-After; a longer wait than this
# would stall every later batch behind one request, so it is cut to this.
MAX_RETRY_AFTER_S = 5.0
# After a request failed every attempt, the endpoint counts as down for this long: later requests
# get one try each, so a dead endpoint costs seconds, not seconds per batch.
DOWN_FOR_S = 5.0
MAX_ERRORS = 3


@dataclass
class SignalReport:
    """What happened to one signal's requests: items are spans, log records or metric points."""

    signal: str
    enabled: bool = True
    requests: int = 0
    requests_failed: int = 0
    items: int = 0
    items_failed: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def items_delivered(self) -> int:
        return self.items - self.items_failed

    def failed(self, items: int, error: str) -> None:
        self.requests_failed += 1
        self.items_failed += items
        self.note(error)

    def note(self, error: str) -> None:
        if error not in self.errors and len(self.errors) < MAX_ERRORS:
            self.errors.append(error)

    def line(self, unit: str) -> str:
        if not self.enabled:
            return f"{self.signal}: off"
        text = f"{self.signal}: {self.items_delivered:,} of {self.items:,} {unit} delivered"
        if self.requests_failed:
            text += f"; {self.requests_failed:,} of {self.requests:,} requests failed"
        if self.errors:
            text += f" ({'; '.join(self.errors)})"
        return text


def _env(environ: Mapping[str, str], signal: str, name: str) -> tuple[str, str]:
    """The per-signal variable if set, else the general one: (variable name, value)."""
    specific = f"OTEL_EXPORTER_OTLP_{signal.upper()}_{name}"
    if environ.get(specific):
        return specific, environ[specific]
    general = f"OTEL_EXPORTER_OTLP_{name}"
    return general, environ.get(general, "")


def endpoint_url(signal: str, environ: Mapping[str, str]) -> str:
    """The per-signal endpoint is used as given; the general one gets ``/v1/<signal>`` appended."""
    specific = environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "")
    if specific:
        return specific
    base = environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "") or DEFAULT_ENDPOINT
    return base.rstrip("/") + PATHS[signal]


# RFC 9110 5.6.2: a field name is a token; a field value holds no CR, LF or NUL
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_BAD_VALUE = re.compile(r"[\r\n\x00]")


def parse_headers(name: str, raw: str) -> dict[str, str]:
    """``key=value`` pairs separated by commas, values URL-encoded (the W3C baggage format); a
    header HTTP cannot carry (a name that is not a token, a value with CR, LF or NUL once decoded)
    is refused here rather than failing every request."""
    headers: dict[str, str] = {}
    for part in raw.split(","):
        if not part.strip():
            continue
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise TelemetryConfigError(f"{name}: {part.strip()!r} is not key=value")
        key, value = unquote(key.strip()), unquote(value.strip())
        if not _TOKEN.fullmatch(key):
            raise TelemetryConfigError(f"{name}: {key!r} is not an HTTP header name")
        if _BAD_VALUE.search(value):
            raise TelemetryConfigError(f"{name}: the value of {key!r} holds a line break or NUL, which HTTP cannot carry")
        headers[key] = value
    return headers


def retry_after_s(value: str, now: float | None = None) -> float:
    """The seconds a ``Retry-After`` value asks to wait (delay-seconds or an HTTP-date, RFC 9110
    10.2.3); 0 when it is absent or unreadable."""
    value = value.strip()
    if not value:
        return 0.0
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return 0.0
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _reason(exc: Exception) -> str:
    """An OS or TLS error as one short phrase ("No such file or directory", "PEM lib")."""
    if isinstance(exc, ssl.SSLError):
        return f"not a usable certificate or key ({exc.reason or exc})"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


# the response message of each signal and its partial-success count of refused items
_RESPONSES: dict[str, tuple[type[Message], str]] = {
    "traces": (ExportTraceServiceResponse, "rejected_spans"),
    "logs": (ExportLogsServiceResponse, "rejected_log_records"),
    "metrics": (ExportMetricsServiceResponse, "rejected_data_points"),
}


class HttpSignal:
    """POSTs one signal's encoded requests to its OTLP/HTTP endpoint and records the outcome."""

    def __init__(self, signal: str, environ: Mapping[str, str]) -> None:
        self.signal = signal
        self.url = endpoint_url(signal, environ)
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TelemetryConfigError(f"OTLP {signal} endpoint: {self.url!r} is not an http(s) URL")
        self._https = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if self._https else 80)
        self._path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        name, raw = _env(environ, signal, "HEADERS")
        self.headers = {**parse_headers(name, raw), "Content-Type": "application/x-protobuf"}
        name, raw = _env(environ, signal, "COMPRESSION")
        if raw not in ("", "none", "gzip"):
            raise TelemetryConfigError(f"{name}: {raw!r} is not 'gzip' or 'none'")
        self.gzip = raw == "gzip"
        if self.gzip:
            self.headers["Content-Encoding"] = "gzip"
        name, raw = _env(environ, signal, "TIMEOUT")
        try:
            self.timeout_s = int(raw) / 1000 if raw else 10.0
        except ValueError:
            raise TelemetryConfigError(f"{name}: {raw!r} is not a number of milliseconds") from None
        if self.timeout_s <= 0:  # a socket takes no negative timeout, and 0 would never wait for an answer
            raise TelemetryConfigError(f"{name}: must be > 0 milliseconds, got {raw}")
        self._ssl = self._ssl_context(environ) if self._https else None
        self._conn: http.client.HTTPConnection | None = None
        self._down_until = 0.0
        self.report = SignalReport(signal)

    def _ssl_context(self, environ: Mapping[str, str]) -> ssl.SSLContext:
        """The TLS context the certificate variables describe; a file that cannot be read or is
        not PEM is refused naming its variable."""
        ca_name, ca = _env(environ, self.signal, "CERTIFICATE")
        try:
            context = ssl.create_default_context(cafile=ca or None)
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
            raise TelemetryConfigError(f"{ca_name}: {ca!r}: {_reason(exc)}") from None
        cert_name, cert = _env(environ, self.signal, "CLIENT_CERTIFICATE")
        key_name, key = _env(environ, self.signal, "CLIENT_KEY")
        if cert:
            try:
                context.load_cert_chain(cert, key or None)
            except (OSError, ValueError) as exc:
                names = f"{cert_name}: {cert!r}" + (f" (key {key_name}: {key!r})" if key else "")
                raise TelemetryConfigError(f"{names}: {_reason(exc)}") from None
        return context

    def send(self, body: bytes, items: int) -> int | None:
        """Send one request of ``items`` items; None when the endpoint refused it, else how many
        of them it rejected in a partial success (counted as failed items)."""
        self.report.requests += 1
        self.report.items += items
        payload = gzip.compress(body, compresslevel=6) if self.gzip else body
        attempts = 1 if time.monotonic() < self._down_until else ATTEMPTS
        error = ""
        asked = 0.0  # the wait the last answer's Retry-After asked for
        for attempt in range(attempts):
            if attempt:
                time.sleep(max(BACKOFF_S[min(attempt - 1, len(BACKOFF_S) - 1)], asked))
            asked = 0.0
            try:
                status, reason, answer, retry_after = self._post(payload)
            except (OSError, http.client.HTTPException) as exc:
                self._close()
                error = f"{self.url}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}"
                continue
            if 200 <= status < 300:
                return self._partial(answer)
            error = f"HTTP {status} {reason} from {self.url}"
            if status not in RETRYABLE:
                break
            asked = min(retry_after_s(retry_after), MAX_RETRY_AFTER_S)
        else:
            self._down_until = time.monotonic() + DOWN_FOR_S
        self.report.failed(items, error)
        return None

    def _post(self, payload: bytes) -> tuple[int, str, bytes, str]:
        if self._conn is None:
            if self._https:
                self._conn = http.client.HTTPSConnection(self._host, self._port, timeout=self.timeout_s,
                                                         context=self._ssl)
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)
        self._conn.request("POST", self._path, payload, self.headers)
        response = self._conn.getresponse()
        answer = response.read()
        if response.getheader("Connection", "").lower() == "close":
            self._close()
        return response.status, response.reason, answer, response.getheader("Retry-After", "")

    def _partial(self, answer: bytes) -> int:
        """OTLP's partial success: the endpoint kept the request but refused some items; how many."""
        if not answer:
            return 0
        response, field = _RESPONSES[self.signal]
        message = response()
        try:
            message.ParseFromString(answer)
        except DecodeError:  # an answer that is not OTLP protobuf (a JSON body, say) says nothing more
            return 0
        partial = message.partial_success
        rejected: int = getattr(partial, field)
        if rejected:
            self.report.items_failed += rejected
            self.report.note(f"{self.url} refused {rejected} items: {partial.error_message}")
        return rejected

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        self._close()
