"""Per-caller limits on a real server: a tenant over its rate or its share of running requests gets
429 with Retry-After while other callers are served; oversized bodies and URLs are refused on
every route before any work is done."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from audit.api.limits import Admission, CallerLimits
from tests.api.conftest import Server, auth, start_server, stop


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("limited")
    server, proc = start_server(root, "--rate-limit", "0.05", "--burst", "4", "--max-in-flight", "1")
    try:
        yield server
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def one_at_a_time(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server bounding only requests in flight: the rate is high enough that polling until a slow
    request is admitted never runs into the rate limit, however slow the machine."""
    root = tmp_path_factory.mktemp("one-at-a-time")
    server, proc = start_server(root, "--max-in-flight", "1")
    try:
        yield server
    finally:
        stop(proc)


def test_a_tenant_over_its_rate_gets_429_with_retry_after_while_another_tenant_is_served(limited: Server) -> None:
    statuses = [limited.get("/v1/decisions", who="team-a").status_code for _ in range(5)]
    assert statuses == [200, 200, 200, 200, 429]
    refused = limited.get("/v1/decisions", who="team-a")
    # one request per 20 s: the wait left is under that, less what the requests above took
    assert refused.status_code == 429 and 1 <= int(refused.headers["retry-after"]) <= 20
    assert refused.headers["content-type"] == "application/problem+json"
    assert "requests per second" in refused.json()["detail"]
    assert limited.get("/v1/decisions", who="team-b").status_code == 200
    assert limited.get("/healthz", who=None).status_code == 200  # probes are never limited


def test_a_tenant_holding_its_share_of_running_requests_waits_while_others_are_served(one_at_a_time: Server) -> None:
    limited = one_at_a_time
    release, started = threading.Event(), threading.Event()

    def slow_body() -> Iterator[bytes]:
        yield b'{"decision_ids": ['
        started.set()
        release.wait(30)
        yield b"]}"

    slow: dict[str, httpx.Response] = {}
    thread = threading.Thread(target=lambda: slow.setdefault("answer", httpx.post(
        limited.base + "/v1/replay", content=slow_body(), headers=auth("admin"), timeout=60)))
    thread.start()
    try:
        # no other admin request until the slow one is on its way: one in flight first would be
        # the one holding the admin's share, and the slow one would be refused instead
        assert started.wait(30)
        for _ in range(60):  # until the slow request has been admitted (a loaded machine may take a moment)
            busy = limited.get("/v1/decisions", who="admin")
            if busy.status_code == 429:
                break
            time.sleep(0.5)
        assert busy.status_code == 429 and busy.headers["retry-after"] == "1", (busy.text, slow)
        assert "already running" in busy.json()["detail"]
        assert limited.get("/v1/decisions", who="team-b").status_code == 200
    finally:
        release.set()
        thread.join()
    assert slow["answer"].status_code == 400  # an empty request: neither ids nor a window
    assert limited.get("/v1/decisions", who="admin").status_code == 200


def test_oversized_bodies_and_urls_are_refused_on_every_route(limited: Server) -> None:
    big = b'{"decision_ids": ["' + b"x" * (2 << 20) + b'"]}'
    # refused before routing, so before any handler could read it (a route reading its own body,
    # POST /v1/replay, answers with its own limit: tests/api/test_replay_limits.py)
    declared = limited.post("/v1/decisions", content=big, who="team-b")
    assert declared.status_code == 413 and "exceeds the limit of 1048576 bytes" in declared.json()["detail"]
    replay = limited.post("/v1/replay", content=iter([big[i:i + 65536] for i in range(0, len(big), 65536)]),
                          who="team-b")
    assert replay.status_code == 413 and replay.json()["max_bytes"] == 2 * 1024 * 1024
    long_url = limited.get("/v1/decisions", who="team-b", pod="a" * 9000)
    assert long_url.status_code == 414


@pytest.mark.parametrize(("steps", "expected"), [
    ([0.0, 0.0, 0.0], [True, True, False]),  # burst 2, then empty
    ([0.0, 0.0, 1.0], [True, True, True]),  # one second refills one token at rate 1
    ([0.0, 0.0, 0.5], [True, True, False]),  # half a token is not a request
    ([0.0, 10.0, 0.0, 0.0], [True, True, True, False]),  # a quiet spell refills to the burst, no more
], ids=["burst-exhausted", "refilled", "half-refilled", "refill-capped-at-burst"])
def test_the_token_bucket_admits_the_burst_then_the_rate(steps: list[float], expected: list[bool]) -> None:
    now = [0.0]
    admission = Admission(CallerLimits(rate=1.0, burst=2, in_flight=10), clock=lambda: now[0])
    seen = []
    for step in steps:
        now[0] += step
        admitted, _, _ = admission.enter("tenant:a")
        seen.append(admitted)
        if admitted:
            admission.leave("tenant:a")
    assert seen == expected


def test_callers_have_separate_buckets_and_shares() -> None:
    admission = Admission(CallerLimits(rate=1.0, burst=5, in_flight=1), clock=lambda: 0.0)
    assert admission.enter("tenant:a")[0]
    assert admission.enter("tenant:a") == (False, 1, "1 requests of this caller are already running")
    assert admission.enter("tenant:b")[0]
    admission.leave("tenant:a")
    assert admission.enter("tenant:a")[0]


def test_idle_callers_are_forgotten_so_many_addresses_cannot_grow_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    from audit.api import limits

    monkeypatch.setattr(limits, "MAX_CALLERS", 3)
    now = [0.0]
    admission = Admission(CallerLimits(rate=1.0, burst=1, in_flight=1), clock=lambda: now[0])
    assert admission.enter("address:busy")[0]  # stays running: never forgotten
    for i in range(10):
        now[0] += 5.0  # long enough for an idle bucket to refill
        assert admission.enter(f"address:{i}")[0]
        admission.leave(f"address:{i}")
        assert len(admission._buckets) <= 3
    assert admission.enter("address:busy") == (False, 1, "1 requests of this caller are already running")
