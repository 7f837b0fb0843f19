"""A window of ``/v1/stats`` that the cluster's event log does not reach is refused, as a what-if's is.

A short log (one H100 node; team-a's pod bound at 00:05, team-a's and team-b's pods created at
00:10 and still pending at its last event, 01:00 on 2026-11-02) is stored under a cluster of its
own. A window after that log would stretch the world of 01:00 over it (the two pending pods
"waiting" until the window's end, months later); one before it would count a cluster the log
does not show yet. Every kind whose figures come from the pod lifecycle answers 400 naming the
window and the log's span; a window the log reaches, even past its end, is answered, as a
what-if over it is. The kinds that count decision records only (migration, replay) have no pod
figure to extrapolate and answer as before.
"""

from __future__ import annotations

import json

import pytest

from tests.api.conftest import Server
from tests.metrics.eventlog import Log

CLUSTER = "short"
POD_KINDS = ("overview", "fairness", "fallback", "health")
SPAN = "2026-11-02T00:00:00.000Z .. 2026-11-02T01:00:00.000Z"


def _refusal(asked: str, side: str) -> str:
    return (f"{asked}: the window lies {side} the event log of cluster {CLUSTER}, which spans {SPAN}; "
            "pod figures cover only the time the log records")


@pytest.fixture(scope="module")
def short_log(server: Server) -> Server:
    log = Log(cluster=CLUSTER).nodes("H100", 1, 4)
    log.at(0).pod("team-a/p0", ("gpu", ["H100"], 1))
    log.at(5).bind("team-a/p0", "h100-0", {"gpu": ("h100", [0])})
    log.at(10).pod("team-a/p1", ("gpu", ["H100"], 4)).pod("team-b/p2", ("gpu", ["H100"], 4))
    log.tick(60)
    body = "".join(json.dumps(e.to_dict()) + "\n" for e in log.events).encode()
    r = server.post("/v1/ingest/events", content=body)
    assert r.status_code == 200, r.text
    return server


REFUSED = {
    "months-after-the-log": ({"since": "2027-01-01T00:00:00Z", "until": "2027-01-02T00:00:00Z"},
                             _refusal("since 2027-01-01T00:00:00.000Z, until 2027-01-02T00:00:00.000Z", "after")),
    "since-alone-just-after-its-last-event": ({"since": "2026-11-02T01:00:00.001Z"},
                                              _refusal("since 2026-11-02T01:00:00.001Z", "after")),
    "until-alone-at-its-first-event": ({"until": "2026-11-02T00:00:00Z"},
                                       _refusal("until 2026-11-02T00:00:00.000Z", "before")),
    "a-day-before-the-log": ({"since": "2026-11-01T00:00:00Z", "until": "2026-11-01T12:00:00Z"},
                             _refusal("since 2026-11-01T00:00:00.000Z, until 2026-11-01T12:00:00.000Z", "before")),
}


@pytest.mark.parametrize("kind", POD_KINDS)
@pytest.mark.parametrize(("window", "detail"), REFUSED.values(), ids=REFUSED.keys())
def test_a_window_the_event_log_does_not_reach_is_refused_with_the_logs_span(short_log: Server, kind: str,
                                                                            window: dict[str, str],
                                                                            detail: str) -> None:
    r = short_log.get(f"/v1/stats/{kind}", cluster=CLUSTER, **window)
    assert (r.status_code, r.json()["type"].rsplit("/", 1)[-1], r.json()["detail"]) == (400, "invalid-parameter",
                                                                                       detail)


@pytest.mark.parametrize("kind", ["migration", "replay"])
def test_kinds_that_count_decision_records_only_answer_a_window_after_the_log(short_log: Server, kind: str) -> None:
    window = REFUSED["months-after-the-log"][0]
    r = short_log.get(f"/v1/stats/{kind}", cluster=CLUSTER, **window)
    assert (r.status_code, r.json()["rows"]) == (200, [])


# windows the log reaches: the pending pods at the window's end, per tenant
ANSWERED = {
    "its-last-event": ({"since": "2026-11-02T01:00:00Z", "until": "2026-11-02T01:00:00.001Z"},
                       {"team-a": 1, "team-b": 1}),
    "across-its-end": ({"since": "2026-11-02T00:30:00Z", "until": "2026-11-02T03:00:00Z"}, {"team-a": 1, "team-b": 1}),
    "before-the-pending-pods": ({"until": "2026-11-02T00:10:00Z"}, {"team-a": 0}),
    "the-whole-log": ({}, {"team-a": 1, "team-b": 1}),
}


@pytest.mark.parametrize(("window", "pending"), ANSWERED.values(), ids=ANSWERED.keys())
def test_a_window_the_event_log_reaches_is_answered(short_log: Server, window: dict[str, str],
                                                    pending: dict[str, int]) -> None:
    body = short_log.get("/v1/stats/fairness", cluster=CLUSTER, **window).json()
    assert {t["tenant"]: t["pending_at_end"] for t in body["tenants"]} == pending
