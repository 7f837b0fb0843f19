"""A kind the API server does not serve (404) does not hold the watcher up, and is watched as
soon as it is served: in a rolling control-plane upgrade, requests reach API servers of the old
version, which lack the newer kinds, until the last one is replaced."""

from __future__ import annotations

import threading
import time

import pytest

from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import CollectingSink, make_watcher, populate

CASES = {
    # kind -> (404 answers before it is served, world events of the kind in the end)
    "served_after_an_upgrade": ("ResourceSlice", 3, 3),
    "served_after_many_refusals": ("DeviceClass", 6, 1),
    "never_served": ("DeviceTaintRule", 10_000, 0),
}


@pytest.mark.parametrize(("kind", "refusals", "events"), list(CASES.values()), ids=list(CASES))
def test_a_kind_not_served_yet_is_watched_once_it_is(kind: str, refusals: int, events: int) -> None:
    with FakeApiServer() as server:
        populate(server)
        server.collections[kind].unserved = refusals
        sink = CollectingSink()
        watcher = make_watcher(server, sink)
        stop = threading.Event()
        thread = threading.Thread(target=watcher.run, args=(stop,), daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline:
                logged = [e for e in sink.events if e.object_kind == kind]
                pods = [e for e in sink.events if e.object_kind == "Pod"]
                if len(logged) >= events and len(pods) >= 5:
                    break
                time.sleep(0.02)
        finally:
            stop.set()
            thread.join(5)
    assert len([e for e in sink.events if e.object_kind == kind]) == events
    assert len([e for e in sink.events if e.object_kind == "Pod"]) == 5  # the rest of the world went on
