"""Two watcher replicas elect one leader through a coordination.k8s.io Lease."""

from __future__ import annotations

import socket
import threading
import time
from datetime import datetime

import pytest
from kubernetes import client

from ingest.kube.lease import LeaseElector
from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import api_client


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture()
def server():  # noqa: ANN201
    with FakeApiServer() as s:
        yield s


def _elector(server: FakeApiServer, identity: str, clock: Clock) -> LeaseElector:
    return LeaseElector(
        api_client(server), "claimtrail", "claimtrail-watcher-prod", identity,
        lease_duration=15, renew_deadline=10, retry_period=2, monotonic=clock, wall=clock,
    )


def _lease(server: FakeApiServer) -> dict:
    return server.leases[("claimtrail", "claimtrail-watcher-prod")]["spec"]


def test_first_replica_creates_the_lease_and_the_second_waits(server: FakeApiServer) -> None:
    clock = Clock()
    a, b = _elector(server, "watcher-a", clock), _elector(server, "watcher-b", clock)
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    spec = _lease(server)
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("watcher-a", 15)
    assert datetime.fromisoformat(spec["renewTime"]).timestamp() == 1000.0


def test_renewing_leader_keeps_the_lease_however_long_it_runs(server: FakeApiServer) -> None:
    clock = Clock()
    a, b = _elector(server, "watcher-a", clock), _elector(server, "watcher-b", clock)
    a.try_acquire_or_renew()
    for _ in range(20):
        clock.t += 2
        assert a.try_acquire_or_renew() is True
        assert b.try_acquire_or_renew() is False
    assert _lease(server)["holderIdentity"] == "watcher-a"


def test_lease_expires_by_the_observers_clock_and_is_taken_over_once(server: FakeApiServer) -> None:
    clock = Clock()
    a, b = _elector(server, "watcher-a", clock), _elector(server, "watcher-b", clock)
    a.try_acquire_or_renew()
    assert b.try_acquire_or_renew() is False  # b starts observing the record now
    clock.t += 14.9
    assert b.try_acquire_or_renew() is False
    clock.t += 0.2  # a has been silent for longer than the lease duration
    assert b.try_acquire_or_renew() is True
    assert (_lease(server)["holderIdentity"], _lease(server)["leaseTransitions"]) == ("watcher-b", 1)
    assert a.try_acquire_or_renew() is False


def test_concurrent_writer_gets_conflict_and_does_not_lead(server: FakeApiServer) -> None:
    clock = Clock()
    a, b = _elector(server, "watcher-a", clock), _elector(server, "watcher-b", clock)
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    clock.t += 16
    # between b's read and b's write, a renews: b's write carries a stale resourceVersion
    server.before_lease_update = lambda: a.try_acquire_or_renew()
    assert b.try_acquire_or_renew() is False
    assert _lease(server)["holderIdentity"] == "watcher-a"


def test_released_lease_is_taken_at_once(server: FakeApiServer) -> None:
    clock = Clock()
    a, b = _elector(server, "watcher-a", clock), _elector(server, "watcher-b", clock)
    a.try_acquire_or_renew()
    b.try_acquire_or_renew()
    a.release()
    assert b.try_acquire_or_renew() is True
    assert _lease(server)["holderIdentity"] == "watcher-b"


def test_only_one_of_two_running_replicas_leads_and_the_other_follows_on_shutdown(server: FakeApiServer) -> None:
    leading: list[str] = []
    overlap = threading.Event()
    lock = threading.Lock()
    started = {"watcher-a": threading.Event(), "watcher-b": threading.Event()}

    def lead_as(identity: str):  # noqa: ANN202
        def lead(stop_leading: threading.Event) -> None:
            with lock:
                if leading:
                    overlap.set()
                leading.append(identity)
            started[identity].set()
            stop_leading.wait()
            with lock:
                leading.remove(identity)
        return lead

    stops = {i: threading.Event() for i in started}
    electors = {
        i: LeaseElector(api_client(server), "claimtrail", "w", i, lease_duration=3, renew_deadline=2, retry_period=0.05)
        for i in started
    }
    threads = {i: threading.Thread(target=electors[i].run, args=(stops[i], lead_as(i)), daemon=True) for i in started}
    threads["watcher-a"].start()
    assert started["watcher-a"].wait(10)
    threads["watcher-b"].start()
    assert not started["watcher-b"].wait(0.5)  # b keeps waiting while a renews
    stops["watcher-a"].set()  # a shuts down and releases the lease
    threads["watcher-a"].join(10)
    assert started["watcher-b"].wait(10)
    stops["watcher-b"].set()
    threads["watcher-b"].join(10)
    assert not overlap.is_set()


def test_leader_whose_work_dies_releases_the_lease_and_reports_failure(server: FakeApiServer) -> None:
    elector = LeaseElector(api_client(server), "claimtrail", "w", "watcher-a",
                           lease_duration=3, renew_deadline=2, retry_period=0.05)

    def ends_at_once(stop_leading: threading.Event) -> None:
        return  # as if the watcher had crashed

    assert elector.run(threading.Event(), ends_at_once) is True
    assert server.leases[("claimtrail", "w")]["spec"].get("holderIdentity") is None


def _unreachable() -> client.ApiClient:
    # a port nothing listens on: connection refused, as while the API server restarts
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = client.Configuration()
    cfg.host = f"http://127.0.0.1:{port}"
    cfg.retries = 0
    return client.ApiClient(cfg)


WHEN_THE_SERVER_GOES = {
    # (the server is gone before the first attempt, the elector's verdict, whether it led)
    "before_acquiring": (True, False, False),  # keeps trying until stopped; never leads
    "while_leading": (False, True, True),  # steps down once the renew deadline passes
}


@pytest.mark.parametrize(("gone_at_start", "lost", "led"), list(WHEN_THE_SERVER_GOES.values()),
                         ids=list(WHEN_THE_SERVER_GOES))
def test_an_unreachable_api_server_fails_lease_attempts_instead_of_crashing(
    server: FakeApiServer, gone_at_start: bool, lost: bool, led: bool
) -> None:
    elector = LeaseElector(_unreachable() if gone_at_start else api_client(server), "claimtrail", "w", "watcher-a",
                           lease_duration=3, renew_deadline=1, retry_period=0.05)
    stop = threading.Event()
    stopped = threading.Event()

    def lead(stop_leading: threading.Event) -> None:
        elector.api.api_client = _unreachable()  # from now on every renewal is refused
        stop_leading.wait()
        stopped.set()

    if gone_at_start:
        assert elector.try_acquire_or_renew() is False
        threading.Timer(0.5, stop.set).start()
    result: list[bool] = []
    thread = threading.Thread(target=lambda: result.append(elector.run(stop, lead)), daemon=True)
    thread.start()
    thread.join(10)
    assert result == [lost] and stopped.is_set() is led


@pytest.mark.parametrize("hook", ["before_lease_read", "before_lease_update"], ids=["read_hangs", "update_hangs"])
def test_leader_steps_down_by_its_renew_deadline_when_a_lease_request_hangs(server: FakeApiServer, hook: str) -> None:
    elector = LeaseElector(api_client(server), "claimtrail", "w", "watcher-a",
                           lease_duration=3, renew_deadline=1, retry_period=0.05)
    release = threading.Event()
    hung_at: list[float] = []
    stopped_at: list[float] = []

    def hang() -> None:
        hung_at.append(time.monotonic())
        setattr(server, hook, hang)  # every later request hangs as well
        release.wait(15)  # an API server that accepts requests and never answers

    def lead(stop_leading: threading.Event) -> None:
        setattr(server, hook, hang)
        stop_leading.wait()
        stopped_at.append(time.monotonic())

    stop = threading.Event()
    thread = threading.Thread(target=elector.run, args=(stop, lead), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not stopped_at and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        release.set()
        stop.set()
        thread.join(10)
    # stepped down within its renew deadline (plus scheduling slack), long before another
    # replica could take the Lease over (lease_duration), and not only once the request ended
    assert stopped_at and stopped_at[0] - hung_at[0] < 2.5
