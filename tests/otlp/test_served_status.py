"""The OTLP endpoints of a real ``claimtrail serve`` (embedded chDB store, ``--max-body-mb 1``)
answer a body they will not read with the status the ingest endpoints give the same body, and
the OTLP/HTTP spec asks for: 413 for a body over the limit, compressed or once inflated, and 415
for a content coding other than gzip (HTTP's answer to a Content-Encoding it cannot decode,
naming the one it can; the body is quarantined as received). Each refusal is counted on /metrics:
a 413 as ``too_large``, a 415 as ``malformed``, both as a request."""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator

import pytest
from google.rpc import status_pb2

from tests.api.conftest import Server, start_server, stop

LIMIT = 1024 * 1024
PB = {"content-type": "application/x-protobuf"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv, proc = start_server(tmp_path_factory.mktemp("otlp-status"), "--max-body-mb", "1")
    try:
        yield srv
    finally:
        stop(proc)


COUNTED = ("requests", "malformed", "too_large")


def _counters(server: Server) -> dict[str, float]:
    text = server.get("/metrics").text
    found = {name: re.search(rf'^claimtrail_otlp_items{{counter="{name}"}} (\S+)$', text, re.M) for name in COUNTED}
    assert all(found.values()), found
    return {name: float(match.group(1)) for name, match in found.items() if match is not None}


REFUSED_UNREAD = {
    "over-the-limit-as-sent": (b"\0" * (LIMIT + 1), {}, 413, f"body: exceeds the {LIMIT}-byte limit", 0),
    "gzip-inflating-past-the-limit": (gzip.compress(b"\0" * (LIMIT + 1)), {"content-encoding": "gzip"}, 413,
                                      f"body: decompresses to more than the {LIMIT}-byte limit", 0),
    "deflate": (zlib.compress(b"{}"), {"content-encoding": "deflate"}, 415,
                "Content-Encoding: 'deflate' is not supported (use gzip or none)", 1),
    "brotli": (b"\x0b\x00\x80{}\x03", {"content-encoding": "br"}, 415,
               "Content-Encoding: 'br' is not supported (use gzip or none)", 1),
}
ACCEPTED_ENCODING = {413: None, 415: "gzip"}


@pytest.mark.slow
@pytest.mark.parametrize(("body", "headers", "status", "message", "quarantined"), REFUSED_UNREAD.values(),
                         ids=REFUSED_UNREAD.keys())
def test_a_body_refused_unread_gets_the_status_the_ingest_endpoints_give(
    server: Server, body: bytes, headers: dict[str, str], status: int, message: str, quarantined: int,
) -> None:
    before = _counters(server)
    otlp = server.post("/v1/traces", content=body, headers={**PB, **headers})
    ingest = server.post("/v1/ingest/records", content=body, headers=headers)
    assert (otlp.status_code, ingest.status_code) == (status, status)
    assert (otlp.headers["content-type"], status_pb2.Status.FromString(otlp.content).message) == (
        PB["content-type"], message)
    assert otlp.headers.get("accept-encoding") == ACCEPTED_ENCODING[status]
    after = _counters(server)
    # the ingest endpoint's request is not the receiver's: only the OTLP one is counted
    assert {name: after[name] - before[name] for name in COUNTED} == {
        "requests": 1, "malformed": quarantined, "too_large": 1 if status == 413 else 0}
