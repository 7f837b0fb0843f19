"""OTLP/HTTP endpoints ``/v1/traces`` and ``/v1/logs`` as a FastAPI router.

Per the OTLP/HTTP spec: protobuf or JSON bodies (the response uses the request's encoding),
optional gzip, 413 for a body over the size limit (checked while it streams in, before it is
held whole, and again on what a gzip body inflates to; counted as ``too_large``), 200 with
``partial_success`` when some items were rejected, 400 with a ``google.rpc.Status`` body for a
malformed payload (which is also quarantined, raw bytes as received), 415 for other media types
and content codings, and 503 with Retry-After when the sink cannot write so the sender retries.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request, Response
from google.protobuf.message import Message
from google.rpc import code_pb2, status_pb2
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from starlette.concurrency import run_in_threadpool

from ingest.otlp.payload import (
    JSON,
    MAX_BODY_BYTES,
    BodyTooLarge,
    PayloadError,
    UnsupportedEncoding,
    UnsupportedMediaType,
    decompress,
    media_type,
    parse,
    serialize,
)
from ingest.otlp.receiver import OtlpReceiver, ReceiverCounters, SinkUnavailable
from ingest.otlp.sink import RecordSink

SOURCE = "otlp/http"
# A 503 tells the sender when to try again (the OTLP/HTTP spec's throttling answer, RFC 9110
# 10.2.3), as the API's other 503s do: without it a sender cannot tell a store that is briefly
# busy from one that is gone, and picks its own backoff.
RETRY_AFTER_SECONDS = 1


@dataclass(frozen=True)
class _Signal:
    kind: str
    message_type: type[Message]
    export: Callable[[Any], Message]


def make_router(
    sink: RecordSink, counters: ReceiverCounters | None = None, max_body_bytes: int = MAX_BODY_BYTES
) -> APIRouter:
    """Routes for the API server; pass ``counters`` to read what the receiver saw."""
    receiver = OtlpReceiver(sink, SOURCE, counters or ReceiverCounters())
    traces = _Signal("traces", ExportTraceServiceRequest, receiver.traces)
    logs = _Signal("logs", ExportLogsServiceRequest, receiver.logs)
    router = APIRouter(tags=["otlp"])

    async def dispatch(signal: _Signal, request: Request) -> Response:
        body = await _read_capped(request, max_body_bytes)
        if body is None:
            receiver.too_large()
            message = f"body: exceeds the {max_body_bytes}-byte limit"
            return _status(413, code_pb2.INVALID_ARGUMENT, message, _media_or_json(request))
        # decoding and the store write are blocking work; keep them off the event loop
        return await run_in_threadpool(
            _handle,
            receiver,
            signal,
            max_body_bytes,
            body,
            request.headers.get("content-type", ""),
            request.headers.get("content-encoding", ""),
        )

    @router.post("/v1/traces")
    async def otlp_traces(request: Request) -> Response:
        return await dispatch(traces, request)

    @router.post("/v1/logs")
    async def otlp_logs(request: Request) -> Response:
        return await dispatch(logs, request)

    return router


async def _read_capped(request: Request, cap: int) -> bytes | None:
    """The body, or None as soon as it is known to exceed ``cap`` (by Content-Length or while it
    streams in): an oversized body is never held in memory whole."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        return None
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > cap:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _media_or_json(request: Request) -> str:
    return _media_or_json_of(request.headers.get("content-type", ""))


def _media_or_json_of(content_type: str) -> str:
    try:
        return media_type(content_type)
    except UnsupportedMediaType:
        return JSON


def _handle(
    receiver: OtlpReceiver, signal: _Signal, max_body: int, body: bytes, content_type: str, content_encoding: str
) -> Response:
    try:
        return _answer(receiver, signal, max_body, body, content_type, content_encoding)
    except SinkUnavailable as exc:  # records or a quarantined item could not be written
        media = _media_or_json_of(content_type)
        return _status(503, code_pb2.UNAVAILABLE, str(exc), media, {"Retry-After": str(RETRY_AFTER_SECONDS)})


def _answer(
    receiver: OtlpReceiver, signal: _Signal, max_body: int, body: bytes, content_type: str, content_encoding: str
) -> Response:
    try:
        media = media_type(content_type)
    except UnsupportedMediaType as exc:
        receiver.malformed(signal.kind, str(exc), body)
        return _status(415, code_pb2.INVALID_ARGUMENT, str(exc), JSON)
    try:
        request = parse(decompress(body, content_encoding, max_body), media, signal.message_type)
    except BodyTooLarge as exc:  # not malformed, and refused unread like a body over the cap
        receiver.too_large()
        return _status(413, code_pb2.INVALID_ARGUMENT, str(exc), media)
    except UnsupportedEncoding as exc:
        receiver.malformed(signal.kind, str(exc), body)
        # RFC 7694: a 415 for a content coding names the codings the server does decode
        return _status(415, code_pb2.INVALID_ARGUMENT, str(exc), media, {"Accept-Encoding": "gzip"})
    except PayloadError as exc:
        receiver.malformed(signal.kind, str(exc), body)
        return _status(400, code_pb2.INVALID_ARGUMENT, str(exc), media)
    return Response(serialize(signal.export(request), media), status_code=200, media_type=media)


def _status(http_status: int, code: int, message: str, media: str, headers: dict[str, str] | None = None) -> Response:
    body = status_pb2.Status(code=code, message=message)
    return Response(serialize(body, media), status_code=http_status, media_type=media, headers=headers)
