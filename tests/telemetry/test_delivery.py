"""DecisionExporter's batches and delivery accounting against real loopback servers."""

from __future__ import annotations

import gzip
import time
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from audit.telemetry import DecisionExporter, TelemetryError
from tests.otlp.loopback import running_receiver, serve, set_otel_env
from tests.telemetry.records_factory import make_record


class Backend:
    """An OTLP/HTTP traces endpoint that answers from a script of statuses (then 200)."""

    def __init__(self, statuses: list[int], rejected: int = 0) -> None:
        self.statuses, self.rejected = list(statuses), rejected
        self.bodies: list[tuple[dict[str, str], bytes]] = []

    async def traces(self, request: Request) -> Response:
        body = await request.body()
        self.bodies.append((dict(request.headers), body))
        if self.statuses:
            return Response(status_code=self.statuses.pop(0))
        partial = ExportTracePartialSuccess(rejected_spans=self.rejected, error_message="span too old")
        answer = ExportTraceServiceResponse(partial_success=partial) if self.rejected else ExportTraceServiceResponse()
        return Response(answer.SerializeToString(), media_type="application/x-protobuf")

    def app(self) -> Any:
        return Starlette(routes=[Route("/v1/traces", self.traces, methods=["POST"])])


def _traces_only(url: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": url + "/v1/traces", "OTEL_LOGS_EXPORTER": "none",
            "OTEL_METRICS_EXPORTER": "none", **(extra or {})}


def test_requests_hold_at_most_the_batch_size_and_count_decisions_by_their_root(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = Backend([])
    with serve(backend.app()) as url:
        set_otel_env(monkeypatch, _traces_only(url, {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "5"}))
        with DecisionExporter() as exporter:
            for i in range(7):  # 4 spans each: root, wait, two tiers
                exporter.export(make_record(i))
            report = exporter.flush()
    sizes = [len(ExportTraceServiceRequest.FromString(body).resource_spans[0].scope_spans[0].spans)
             for _, body in backend.bodies]
    assert sizes == [5, 5, 5, 5, 5, 3]
    assert (report.decisions, report.decisions_delivered, report.traces.items, report.traces.requests) == (7, 7, 28, 6)


def test_a_retryable_answer_is_tried_again_and_a_refusal_is_not(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = Backend([503, 400])
    with serve(backend.app()) as url:
        set_otel_env(monkeypatch, _traces_only(url, {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "4"}))
        with DecisionExporter() as exporter:
            exporter.export(make_record(0))  # 503, then 200 on the second try
            exporter.flush()
            exporter.export(make_record(1))  # 400: refused for good
            report = exporter.flush()
    assert len(backend.bodies) == 3
    assert (report.decisions_delivered, report.traces.requests, report.traces.requests_failed) == (1, 2, 1)
    assert report.traces.errors == [f"HTTP 400 Bad Request from {url}/v1/traces"]


def test_items_an_endpoint_rejects_in_a_partial_success_are_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = Backend([], rejected=2)
    with serve(backend.app()) as url:
        set_otel_env(monkeypatch, _traces_only(url))
        with DecisionExporter() as exporter:
            exporter.export(make_record(0))
            report = exporter.flush()
    assert (report.traces.items, report.traces.items_failed) == (4, 2)
    assert report.traces.errors == [f"{url}/v1/traces refused 2 items: span too old"]


def test_headers_and_gzip_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = Backend([])
    with serve(backend.app()) as url:
        set_otel_env(monkeypatch, _traces_only(url, {"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20t0k,x-team=gpu",
                                                     "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip"}))
        with DecisionExporter() as exporter:
            exporter.export(make_record(0))
    (headers, body), = backend.bodies
    assert (headers["authorization"], headers["x-team"], headers["content-encoding"]) == ("Bearer t0k", "gpu", "gzip")
    assert len(ExportTraceServiceRequest.FromString(gzip.decompress(body)).resource_spans[0].scope_spans[0].spans) == 4


def test_a_partial_batch_leaves_after_the_schedule_delay_without_a_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    with running_receiver() as rx:
        set_otel_env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url, "OTEL_BSP_SCHEDULE_DELAY": "50",
                                   "OTEL_BLRP_SCHEDULE_DELAY": "50"})
        exporter = DecisionExporter()
        for i in range(3):
            exporter.export(make_record(i))
        exporter._encode_pending()  # what a full encoding batch does; the send is left to the delay
        deadline = time.monotonic() + 30  # a wait for the sender thread, not a speed check
        while len(rx.sink.records) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        received = len(rx.sink.records)
        exporter.close()
    assert received == 3


def test_a_record_that_cannot_be_encoded_is_reported_and_the_rest_still_go(monkeypatch: pytest.MonkeyPatch) -> None:
    from audit.records import TierBlocker

    bad = make_record(1)
    bad.blockers = [TierBlocker("insufficient_on_node", 0, {"callback": object()})]
    with running_receiver() as rx:
        set_otel_env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url})
        with DecisionExporter() as exporter:
            exporter.export(make_record(0))
            exporter.export(bad)
            report = exporter.flush()
    assert (report.decisions, report.decisions_delivered) == (2, 1)
    (error,) = report.errors
    assert error.startswith(f"DecisionRecord {bad.decision_id}: cannot be encoded for OTLP:")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [({"time": "soon"}, r"time: 'soon' is not an ISO 8601 timestamp"),
     ({"wait_ms": -5}, r"wait_ms: must be >= 0, got -5"),
     ({"duration_us": -1}, r"duration_us: must be >= 0, got -1")],
    ids=["time", "wait", "duration"],
)
def test_a_record_with_impossible_times_is_refused_in_the_call(
    monkeypatch: pytest.MonkeyPatch, overrides: dict[str, Any], message: str
) -> None:
    set_otel_env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    record = make_record(**overrides)
    with DecisionExporter() as exporter, pytest.raises(TelemetryError, match=rf"DecisionRecord {record.decision_id}: {message}"):
        exporter.export(record)


class _Unhashable(str):
    """A model name that fails when the encoder looks it up among the names it has written: an
    encoder failure of no expected kind."""

    __slots__ = ()

    def __hash__(self) -> int:
        raise RuntimeError("no hash for this name")


def test_an_encoder_failure_of_any_kind_is_reported_and_later_decisions_still_go(monkeypatch: pytest.MonkeyPatch) -> None:
    # decisions are encoded on the sender thread: an error escaping there would stop every later send
    bad = make_record(1)
    bad.tiers[0].model = _Unhashable("H100")
    with running_receiver() as rx:
        set_otel_env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url})
        with DecisionExporter() as exporter:
            exporter.export(bad)
            exporter.export(make_record(2))
            first = exporter.flush()
            exporter.export(make_record(3))
            second = exporter.flush()
    assert (first.decisions, first.decisions_delivered) == (2, 1)
    assert first.errors == (f"DecisionRecord {bad.decision_id}: cannot be encoded for OTLP: no hash for this name",)
    assert (second.decisions, second.decisions_delivered) == (3, 2)
    assert sorted(r.seq for r in rx.sink.records) == [1042 + 2, 1042 + 3]


class ThrottlingBackend:
    """A traces endpoint that answers its first request with ``status`` and ``Retry-After``, then
    200, noting when each request arrived."""

    def __init__(self, status: int, retry_after: Any) -> None:
        self.status, self.retry_after = status, retry_after
        self.arrivals: list[float] = []

    async def traces(self, request: Request) -> Response:
        await request.body()
        self.arrivals.append(time.monotonic())
        if len(self.arrivals) == 1:
            return Response(status_code=self.status, headers={"Retry-After": self.retry_after()})
        return Response(ExportTraceServiceResponse().SerializeToString(), media_type="application/x-protobuf")

    def app(self) -> Any:
        return Starlette(routes=[Route("/v1/traces", self.traces, methods=["POST"])])


def _http_date(seconds_ahead: float) -> str:
    from email.utils import formatdate

    return formatdate(time.time() + seconds_ahead, usegmt=True)


@pytest.mark.parametrize(
    ("status", "retry_after", "waited_at_least"),
    [
        (503, lambda: "1", 0.95),
        (429, lambda: "1", 0.95),
        (503, lambda: _http_date(2), 0.95),  # an HTTP-date has whole seconds: 1 to 2 s from now
    ],
    ids=["503-seconds", "429-seconds", "503-http-date"],
)
def test_a_throttled_request_is_retried_no_sooner_than_retry_after_asks(
    monkeypatch: pytest.MonkeyPatch, status: int, retry_after: Any, waited_at_least: float
) -> None:
    backend = ThrottlingBackend(status, retry_after)
    with serve(backend.app()) as url:
        set_otel_env(monkeypatch, _traces_only(url))
        with DecisionExporter() as exporter:
            exporter.export(make_record(0))
            report = exporter.flush()
    assert len(backend.arrivals) == 2
    assert backend.arrivals[1] - backend.arrivals[0] >= waited_at_least
    assert (report.decisions_delivered, report.traces.requests_failed) == (1, 0)


class RefusingStore:
    """A decision store for ClaimTrail's own receiver that refuses the first ``refused`` records
    of each request as conflicting with history."""

    def __init__(self, refused: int) -> None:
        self.refused = refused

    def write_records(self, records: list[Any]) -> list[str]:
        return [f"decision {r.decision_id}: conflicts with the stored one" for r in records[: self.refused]]

    def quarantine(self, source: str, kind: str, error: str, raw: bytes) -> None:
        pass


@pytest.mark.parametrize(
    ("refused", "delivered"),
    [(0, 3), (1, 2), (3, 0)],
    ids=["none-refused", "one-refused", "all-refused"],
)
def test_decisions_a_receiver_refuses_in_a_partial_success_are_not_delivered(
    monkeypatch: pytest.MonkeyPatch, refused: int, delivered: int
) -> None:
    from fastapi import FastAPI

    from ingest.otlp import ReceiverCounters, make_router

    app = FastAPI()
    app.include_router(make_router(RefusingStore(refused), ReceiverCounters()))
    with serve(app) as url:
        set_otel_env(monkeypatch, _traces_only(url))
        with DecisionExporter() as exporter:
            for i in range(3):
                exporter.export(make_record(i, cluster=f"refused-{i}"))
            report = exporter.flush()
    assert (report.decisions, report.decisions_delivered, report.traces.items_failed) == (3, delivered, refused)
    assert report.nothing_delivered == (delivered == 0)


def _failing_metrics(kind: str) -> Any:
    from audit.telemetry import delivery

    real = delivery.HttpSignal.send

    def send(self: Any, body: bytes, items: int) -> int | None:
        if self.signal == "metrics":
            if kind == "raises":
                raise RuntimeError("metrics encoder broke")
            raise ValueError("Invalid header value b'a\\nb'")
        return real(self, body, items)

    return send


@pytest.mark.parametrize(
    ("kind", "error"),
    [("raises", "RuntimeError: metrics encoder broke"), ("value-error", "ValueError: Invalid header value")],
    ids=["runtime-error", "value-error"],
)
def test_a_metrics_request_that_fails_unexpectedly_is_reported_and_flush_returns(
    monkeypatch: pytest.MonkeyPatch, kind: str, error: str
) -> None:
    import threading

    from audit.telemetry import delivery

    monkeypatch.setattr(delivery.HttpSignal, "send", _failing_metrics(kind))
    reports: list[Any] = []
    with running_receiver() as rx:
        set_otel_env(monkeypatch, {"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url})
        exporter = DecisionExporter()
        exporter.export(make_record(0))
        flushing = threading.Thread(target=lambda: reports.append(exporter.flush()), daemon=True)
        flushing.start()
        flushing.join(20)
        assert not flushing.is_alive(), "flush waited for a sender thread that had died"
        exporter.export(make_record(1))  # the sender still works after the failure
        report = exporter.close()
    assert reports[0].decisions_delivered == 1
    assert (report.decisions_delivered, report.metrics.requests_failed) == (2, 2)
    assert error in report.metrics.errors[0]
