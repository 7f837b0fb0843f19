"""A window of ``/v1/stats`` that the cluster's event log does not reach has no pod figures.

A short log (one H100 node; team-a's pod bound at 00:05, team-a's and team-b's pods created at
00:10 and still pending at its last event, 01:00 on 2026-11-02) is stored under a cluster of its
own, with two scheduling failures of a pod recorded after it (a watcher records those
while no object of the cluster changes). Pod figures over a window after that log would stretch
the world of 01:00 over it (the two pending pods "waiting" until the window's end, months later);
over one before it, they would count a cluster the log does not show yet. Every kind with pod
figures gives them as null there, and ``pod_figures`` names the window and the log's span, by the
rule that refuses a what-if over the window; the decision records in the window are counted as
in any other. A window the log reaches, even past its end, has its figures, as a what-if over it
is decided.
"""

from __future__ import annotations

import json

import pytest

from audit.records import to_jsonl
from tests.api.conftest import Server
from tests.builders import decision
from tests.metrics.eventlog import Log

CLUSTER = "short"
POD_KINDS = ("overview", "fairness", "fallback", "health")
SPAN = "2026-11-02T00:00:00.000Z .. 2026-11-02T01:00:00.000Z"


def _refusal(asked: str, side: str) -> str:
    return (f"none: {asked}: the window lies {side} the event log of cluster {CLUSTER}, which spans {SPAN}; "
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
    # under a tenant of their own: the server is shared with other modules, which count team-b's decisions
    failures = [decision(CLUSTER, "claim-p9", n, seq=log.events[-1].seq, time=at, tenant="night-shift", pod="p9")
                for n, at in ((1, "2027-01-01T05:00:00Z"), (2, "2027-01-01T06:00:00Z"))]
    r = server.post("/v1/ingest/records", content=to_jsonl(failures).encode())
    assert (r.status_code, r.json()["quarantined"]) == (200, 0), r.text
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


# the pod figures each kind gives as null (unknown, not zero) when it has none
NO_POD_FIGURES = {
    "overview": {},  # its rows' pending_now and starving_pods: below
    "fairness": {"jain_whole": None, "jain_contention": None, "contention_windows": None, "tenants": []},
    "fallback": {"pods_with_preference": None, "first_choice_rate": None, "fallbacks": None, "regretted": None},
    "health": {"unhealthy_devices": None, "unhealthy_device_hours": None},
}


@pytest.mark.parametrize("kind", POD_KINDS)
@pytest.mark.parametrize(("window", "note"), REFUSED.values(), ids=REFUSED.keys())
def test_a_window_the_event_log_does_not_reach_has_no_pod_figures_and_names_the_logs_span(
        short_log: Server, kind: str, window: dict[str, str], note: str) -> None:
    body = short_log.get(f"/v1/stats/{kind}", cluster=CLUSTER, **window).json()
    assert {k: body[k] for k in NO_POD_FIGURES[kind]} == NO_POD_FIGURES[kind]
    assert body["pod_figures"] == note and "window" not in body


def test_the_decisions_recorded_in_a_window_after_the_event_log_are_counted(short_log: Server) -> None:
    body = short_log.get("/v1/stats/overview", cluster=CLUSTER, group_by="tenant",
                         **REFUSED["months-after-the-log"][0]).json()
    assert [(r["tenant"], r["decisions"], r["unschedulable"], r["pending_now"], r["starving_pods"])
            for r in body["rows"]] == [("night-shift", 2, 2, None, None)]
    assert body["pod_figures"] == REFUSED["months-after-the-log"][1]


@pytest.mark.parametrize("kind", ["migration", "replay"])
def test_kinds_that_count_decision_records_only_answer_a_window_after_the_log(short_log: Server, kind: str) -> None:
    window = REFUSED["since-alone-just-after-its-last-event"][0]
    r = short_log.get(f"/v1/stats/{kind}", cluster=CLUSTER, **window)
    assert (r.status_code, "pod_figures" in r.json()) == (200, False)


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
