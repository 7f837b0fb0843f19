"""Real servers on 127.0.0.1 for OTLP tests: uvicorn serving the receiver, with every request
body captured as received (to check what bytes a sender put on the wire)."""

from __future__ import annotations

import gzip
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI, Response
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceResponse

from ingest.otlp import MemorySink, ReceiverCounters, make_router


@dataclass(frozen=True)
class Captured:
    path: str
    content_encoding: str
    raw: bytes

    def plain(self) -> bytes:
        return gzip.decompress(self.raw) if self.content_encoding == "gzip" else self.raw


class CaptureBodies:
    """ASGI middleware keeping each HTTP request body exactly as it arrived."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.captured: list[Captured] = []
        self._lock = threading.Lock()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []

        async def recording_receive() -> Any:
            message = await receive()
            if message["type"] == "http.request":
                chunks.append(message.get("body", b""))
            return message

        await self.app(scope, recording_receive, send)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        with self._lock:
            self.captured.append(Captured(scope["path"], headers.get("content-encoding", ""), b"".join(chunks)))

    def bodies(self, path: str | None = None) -> list[Captured]:
        with self._lock:
            return [c for c in self.captured if path is None or c.path == path]


@dataclass
class ReceiverApp:
    sink: MemorySink
    counters: ReceiverCounters
    capture: CaptureBodies
    url: str = ""


def receiver_app() -> ReceiverApp:
    sink = MemorySink()
    counters = ReceiverCounters()
    app = FastAPI()
    app.include_router(make_router(sink, counters))

    @app.post("/v1/metrics")
    async def metrics() -> Response:
        # metrics are not decisions; accept them so the exporter's bytes can be inspected too
        return Response(ExportMetricsServiceResponse().SerializeToString(), media_type="application/x-protobuf")

    return ReceiverApp(sink, counters, CaptureBodies(app))


@contextmanager
def serve(app: Any, lifespan: str = "off") -> Iterator[str]:
    """Run ``app`` with uvicorn on a free loopback port; yields the base URL. ``lifespan="on"``
    runs the app's startup and shutdown as under ``claimtrail serve``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan=lifespan))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # an app's own startup (a store to open) runs first with lifespan on
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start on loopback")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@contextmanager
def running_receiver() -> Iterator[ReceiverApp]:
    app = receiver_app()
    with serve(app.capture) as url:
        app.url = url
        yield app


def set_otel_env(monkeypatch: Any, env: dict[str, str]) -> None:
    """Exactly the given OTEL/ClaimTrail variables (and CLAIMTRAIL_API) in the environment."""
    for name in [n for n in os.environ if n.startswith(("OTEL_", "CLAIMTRAIL_OTEL_")) or n == "CLAIMTRAIL_API"]:
        monkeypatch.delenv(name)
    # metrics leave only when flushed, so a test sees a fixed number of metric requests
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "3600000")
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def telemetry_from_env(monkeypatch: Any, env: dict[str, str]) -> Any:
    """A DecisionTelemetry built by ``from_env`` under exactly the given OTEL/ClaimTrail variables."""
    from audit.telemetry import DecisionTelemetry

    set_otel_env(monkeypatch, env)
    return DecisionTelemetry.from_env()
