"""Fuzzed query parameters and path segments never produce a 5xx, and errors are problem documents."""

from __future__ import annotations

import httpx
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.api import factory
from tests.api.conftest import Server, auth

NASTY = st.sampled_from(["' OR 1=1 --", "'; DROP TABLE decisions; --", "{f_tenant:String}", "%00", "\x00", "../..",
                         "H100\n", "🙂", "a" * 5000, "-1", "1e309", "NaN", "true", "2026-13-45T99:99:99Z", "", " "])
VALUE = st.one_of(NASTY, st.text(max_size=60), st.integers().map(str))
PARAMS = st.dictionaries(
    st.sampled_from(["tenant", "namespace", "pod", "model", "outcome", "fallback", "since", "until", "policy_version",
                     "cluster", "track", "claim", "cursor", "limit", "after_seq", "group_by", "detail",
                     "unknown"]), VALUE, max_size=6)
PATHS = st.sampled_from(["/v1/decisions", "/v1/stats/fallback", "/v1/stats/fairness", "/v1/stats/health",
                         "/v1/stats/migration", "/v1/stats/replay", "/v1/stats/overview", f"/v1/decisions/{factory.FALLBACK.decision_id}/why",
                         "/v1/pods/team-a/train-1/why", "/v1/ingest/events/last-seq",
                         "/v1/events", "/v1/events/checkpoint"])


def _check(r: httpx.Response) -> None:
    assert r.status_code < 500, r.text
    if r.status_code >= 400:
        assert r.headers["content-type"] == "application/problem+json"


@settings(max_examples=60, deadline=None)
@given(path=PATHS, params=PARAMS, who=st.sampled_from(["admin", "team-a", "team-b"]))
def test_query_parameters_never_cause_a_server_error(server: Server, path: str, params: dict[str, str],
                                                     who: str) -> None:
    _check(httpx.get(server.base + path, params=params, headers=auth(who), timeout=60))


@settings(max_examples=40, deadline=None)
@given(segment=VALUE, model=VALUE)
def test_path_segments_never_cause_a_server_error(server: Server, segment: str, model: str) -> None:
    from urllib.parse import quote

    seg = quote(segment, safe="") or "x"
    for path in (f"/v1/decisions/{seg}", f"/v1/decisions/{seg}/why", f"/v1/pods/{seg}/{seg}/why"):
        _check(httpx.get(server.base + path, params={"model": model}, headers=auth("admin"), timeout=60))


@settings(max_examples=30, deadline=None)
@given(body=st.one_of(st.binary(max_size=300), st.text(max_size=300).map(str.encode)))
def test_ingest_and_replay_bodies_never_cause_a_server_error(server: Server, body: bytes) -> None:
    _check(httpx.post(server.base + "/v1/replay", content=body, headers={**auth("admin"),
                                                                         "Content-Type": "application/json"}))
    _check(httpx.post(server.base + "/v1/ingest/events", content=body, headers=auth("admin"), timeout=60))
