"""Listing pages are served again while nothing was stored, and never after something was.

A real server on loopback with its embedded store; the cache's hits and misses are read from
``/metrics``."""

from __future__ import annotations

import dataclasses
import threading
import time
from datetime import timedelta

import pytest

from audit.api.pages import PageCache
from audit.records import DecisionRecord, to_jsonl
from tests.api.conftest import Server, own_server
from tests.store.factory import BASE_TIME, iso, make_record

srv = own_server("pages")


def _record(n: int, tenant: str = "team-a") -> DecisionRecord:
    return dataclasses.replace(make_record(n, tenant=tenant), decision_id=f"page-{tenant}-{n:03d}",
                               time=iso(BASE_TIME + timedelta(minutes=n))).seal()


def _ingest(server: Server, records: list[DecisionRecord]) -> None:
    answer = server.post("/v1/ingest/records", content=to_jsonl(records).encode())
    assert answer.status_code == 200, answer.text
    assert answer.json()["accepted"] == len(records) and answer.json()["delivered"]


def _cache(server: Server) -> tuple[int, int]:
    text = server.get("/metrics", None).text
    found = {line.split('"')[1]: int(float(line.split()[-1])) for line in text.splitlines()
             if line.startswith("claimtrail_page_cache{")}
    return found["hits"], found["misses"]


def _page(server: Server, who: str, **params: str | int) -> list[str]:
    answer = server.get("/v1/decisions", who, **params)
    assert answer.status_code == 200, answer.text
    return [item["decision_id"] for item in answer.json()["items"]]


def test_a_page_asked_again_with_nothing_stored_in_between_is_served_from_the_cache(srv: Server) -> None:
    _ingest(srv, [_record(n) for n in range(1, 4)])
    first = _page(srv, "team-a", limit=2)
    hits, misses = _cache(srv)
    assert _page(srv, "team-a", limit=2) == first == ["page-team-a-003", "page-team-a-002"]
    assert _cache(srv) == (hits + 1, misses)


def test_a_page_asked_again_after_an_ingest_shows_what_was_stored(srv: Server) -> None:
    _ingest(srv, [_record(n) for n in range(10, 12)])
    assert _page(srv, "team-a", limit=2) == ["page-team-a-011", "page-team-a-010"]
    _ingest(srv, [_record(12)])  # newer: the cached page would no longer be the newest
    hits, misses = _cache(srv)
    assert _page(srv, "team-a", limit=2) == ["page-team-a-012", "page-team-a-011"]
    assert _cache(srv) == (hits, misses + 1)


def test_an_ingest_for_another_tenant_also_renews_the_page(srv: Server) -> None:
    _page(srv, "team-a", limit=1)
    _ingest(srv, [_record(20, tenant="team-b")])
    hits, misses = _cache(srv)
    _page(srv, "team-a", limit=1)
    assert _cache(srv) == (hits, misses + 1)  # the version is the store's, not the tenant's


def test_pages_are_kept_per_caller_and_redaction(srv: Server) -> None:
    _ingest(srv, [_record(30)])
    tenant = srv.get("/v1/decisions", "team-a", limit=1).json()["items"][0]
    admin = srv.get("/v1/decisions", "admin", limit=1, tenant="team-a").json()["items"][0]
    assert tenant["decision_id"] == admin["decision_id"] == "page-team-a-030"
    assert admin["pod"] == "train-30" and tenant["pod"] != "train-30"  # the tenant's page hashes pod names
    again = srv.get("/v1/decisions", "admin", limit=1, tenant="team-a").json()["items"][0]
    assert again == admin



@pytest.mark.parametrize(
    ("versions", "fails", "reads", "answers", "counts"),
    [
        # four readers of one version: one reads the store, three get its page
        ([1, 1, 1, 1], set(), [0], ["page 0"] * 4, (3, 1)),
        # two versions: a reader of the newer one does not take the older read's page
        ([1, 1, 2, 2], set(), [0, 2], ["page 0", "page 0", "page 2", "page 2"], (2, 2)),
        # the first read fails: its error is its own, and the readers waiting for it read for themselves
        ([1, 1, 1], {0}, [0, 1, 2], ["store away", "page 1", "page 2"], (0, 3)),
    ],
    ids=["one-version", "two-versions", "first-read-fails"],
)
def test_readers_missing_one_page_at_once_wait_for_one_read_of_it(
        versions: list[int], fails: set[int], reads: list[int], answers: list[str], counts: tuple[int, int]) -> None:
    cache = PageCache()
    release = threading.Event()
    called: list[int] = []
    got: list[str] = [""] * len(versions)

    def compute(i: int) -> str:
        called.append(i)
        release.wait()  # every read runs until all readers have asked
        if i in fails:
            raise RuntimeError("store away")
        return f"page {i}"

    def read(i: int) -> None:
        try:
            got[i] = cache.get_or_compute("page", versions[i], lambda: compute(i))
        except RuntimeError as exc:
            got[i] = str(exc)

    threads = []
    for i in range(len(versions)):  # one at a time: each has read or joined a read before the next asks
        threads.append(threading.Thread(target=read, args=(i,)))
        threads[-1].start()
        while len(called) + cache.hits < i + 1:
            time.sleep(0.001)
    release.set()
    for t in threads:
        t.join()
    assert got == answers
    assert sorted(called) == reads
    assert (cache.hits, cache.misses) == counts
