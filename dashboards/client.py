"""The dashboards' only door to data: a typed client over the audit API's HTTP endpoints.

Pages never open the store (the API owns it and scopes every query to the caller's tenant);
they call the cached functions at the bottom of this module, which turn JSON into the small
typed shapes below. Every failure — connection refused, a 4xx problem+json, a malformed
response — becomes an ``ApiError`` whose message a page can show as it is.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx
import streamlit as st
from pydantic import BaseModel, ConfigDict, ValidationError

from audit.records import DecisionRecord

DEFAULT_API = "http://127.0.0.1:8080"
CACHE_TTL_SECONDS = 30
# Filters of GET /v1/decisions beyond the shared ones.
DECISION_FILTERS = frozenset({"namespace", "pod", "claim", "outcome", "fallback", "track"})
# The name of a /v1/stats kind: the API declares them (audit/api/stats) and answers 404 for others,
# so a new kind needs no change here.
StatsKind = str


class ApiError(Exception):
    """A failed API call, phrased for a person reading the dashboard."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class Filters:
    """The filters every page shares; empty strings mean "no filter"."""

    cluster: str = ""
    since: str = ""
    until: str = ""
    tenant: str = ""
    model: str = ""
    policy_version: str = ""

    def params(self) -> dict[str, str]:
        return {k: v for k, v in dataclasses.asdict(self).items() if v}


@dataclass(frozen=True)
class StatsTable:
    """One ``/v1/stats/*`` answer: flat rows aggregated by the API, and the keys they are grouped by."""

    rows: list[dict[str, Any]]
    group_by: list[str]
    # the finished figures the API gives beside the rows (pod-level metrics of the window)
    summary: dict[str, Any] = field(default_factory=dict)

    def missing(self, *columns: str) -> list[str]:
        """Columns a chart needs that the rows lack (empty when there are no rows to judge)."""
        if not self.rows:
            return []
        present = set().union(*(r.keys() for r in self.rows))
        return [c for c in columns if c not in present]

    def column(self, name: str) -> list[Any]:
        return [r.get(name) for r in self.rows]


@dataclass(frozen=True)
class DecisionPage:
    items: list[DecisionRecord]
    next: str | None


class WhyDevice(BaseModel):
    model_config = ConfigDict(extra="allow")

    device: str
    node: str = ""
    reason: str
    detail: Any = None


class WhyAnswer(BaseModel):
    """The "why was <model> skipped" answer of ``/v1/decisions/{id}/why``."""

    model_config = ConfigDict(extra="allow")

    pod: str = ""
    decision_id: str = ""
    model: str
    skipped: bool
    outcome: dict[str, Any] = {}
    reasons: dict[str, int] = {}
    blockers: list[dict[str, Any]] = []
    devices: list[WhyDevice] = []
    summary: str = ""
    policy_version: str = ""
    # What a pod the decision left without devices would get if scheduled now (with detail only).
    would_get: dict[str, Any] | None = None


@dataclass(frozen=True)
class ReplayReport:
    """What ``POST /v1/replay`` said; ``body`` keeps the full answer for the side-by-side view."""

    body: dict[str, Any] = field(default_factory=dict)

    @property
    def summary(self) -> dict[str, Any]:
        value = self.body.get("summary")
        return value if isinstance(value, dict) else {}

    @property
    def job(self) -> str:
        """The job id of a replay too large to run inside the request ("" when it ran there)."""
        return str(self.body.get("job") or self.body.get("job_id") or "")

    @property
    def runs(self) -> list[dict[str, Any]]:
        for key in ("runs", "results", "items"):
            value = self.body.get(key)
            if isinstance(value, list):
                return [r for r in value if isinstance(r, dict)]
        return []


_RECORD_FIELDS = {f.name for f in dataclasses.fields(DecisionRecord)}


def record_from_json(data: Any) -> DecisionRecord:
    """Build a record from the API's JSON, ignoring fields this version does not know."""
    if not isinstance(data, dict):
        raise ApiError(f"decision: expected a JSON object, got {type(data).__name__}")
    try:
        return DecisionRecord.from_dict({k: v for k, v in data.items() if k in _RECORD_FIELDS})
    except TypeError as exc:
        raise ApiError(f"decision {data.get('decision_id', '?')}: unexpected shape ({exc})") from None


class ApiClient:
    """Synchronous client of the audit API; one instance per base URL and token."""

    def __init__(self, base_url: str, token: str = "", timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise ApiError(f"the audit API at {self.base_url} is not reachable ({type(exc).__name__}: {exc})") from None
        if response.status_code >= 400:
            raise ApiError(_problem_text(method, path, response), response.status_code)
        try:
            return response.json()
        except ValueError:
            raise ApiError(f"{method} {path}: the API answered with something that is not JSON") from None

    def decisions(self, filters: Filters, limit: int = 50, cursor: str | None = None, **extra: str) -> DecisionPage:
        unknown = sorted(set(extra) - DECISION_FILTERS)
        if unknown:
            # Named here, before the request, so the message lists what the explorer can search by.
            raise ApiError(f"/v1/decisions cannot filter by {unknown[0]!r} (it filters by {', '.join(sorted(DECISION_FILTERS))})")
        params: dict[str, Any] = {**filters.params(), **{k: v for k, v in extra.items() if v}, "limit": limit}
        if cursor:
            params["cursor"] = cursor
        body = _expect_object(self._request("GET", "/v1/decisions", params=params), "/v1/decisions")
        items = body.get("items")
        if not isinstance(items, list):
            raise ApiError("/v1/decisions: the answer has no `items` list")
        return DecisionPage([record_from_json(i) for i in items], body.get("next"))

    def decision(self, decision_id: str) -> DecisionRecord:
        return record_from_json(self._request("GET", f"/v1/decisions/{_segment(decision_id)}"))

    def why(self, decision_id: str, model: str, devices: bool = True) -> WhyAnswer:
        params = {"model": model, **({"detail": "devices"} if devices else {})}
        path = f"/v1/decisions/{_segment(decision_id)}/why"
        return _why(self._request("GET", path, params=params), path)

    def pod_why(self, namespace: str, pod: str, model: str) -> WhyAnswer:
        path = f"/v1/pods/{_segment(namespace)}/{_segment(pod)}/why"
        return _why(self._request("GET", path, params={"model": model, "detail": "devices"}), path)

    def stats(self, kind: StatsKind, filters: Filters, group_by: tuple[str, ...] = (), by: str = "") -> StatsTable:
        """``by`` (``hour`` or ``model``) adds the API's per-hour or per-model rows to the summary
        (``by_hour`` or ``by_model``), on the kinds that give them."""
        params = filters.params()
        if group_by:
            params["group_by"] = ",".join(group_by)
        if by:
            params["by"] = by
        path = f"/v1/stats/{kind}"
        body = _expect_object(self._request("GET", path, params=params), path)
        rows = body.get("rows")
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            raise ApiError(f"{path}: the answer has no `rows` list of objects")
        summary = {k: v for k, v in body.items() if k not in ("rows", "group_by")}
        return StatsTable(rows, list(body.get("group_by") or group_by), summary)

    def replay(self, decision_ids: list[str]) -> ReplayReport:
        body = self._request("POST", "/v1/replay", json={"decision_ids": decision_ids})
        return ReplayReport(_expect_object(body, "/v1/replay"))

    def replay_window(self, filters: Filters, limit: int) -> ReplayReport:
        """Replay the decisions the filters select (cluster, since and until required by the API)."""
        body = self._request("POST", "/v1/replay", json={**filters.params(), "limit": limit})
        return ReplayReport(_expect_object(body, "/v1/replay"))

    def replay_job(self, job_id: str) -> ReplayReport:
        path = f"/v1/replay/{_segment(job_id)}"
        return ReplayReport(_expect_object(self._request("GET", path), path))

    def counterfactual(self, filters: Filters, policy_version: str) -> ReplayReport:
        body = self._request("POST", "/v1/replay", json={**filters.params(), "counterfactual_policy": policy_version})
        return ReplayReport(_expect_object(body, "/v1/replay"))


def _segment(value: str) -> str:
    """One URL path segment: a slash or other reserved character in user input stays inside it."""
    return quote(value, safe="")


def _expect_object(body: Any, path: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ApiError(f"{path}: expected a JSON object, got {type(body).__name__}")
    return body


def _why(body: Any, path: str) -> WhyAnswer:
    try:
        return WhyAnswer.model_validate(body)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ApiError(f"{path}: unexpected answer at `{where}`: {err['msg']}") from None


def _problem_text(method: str, path: str, response: httpx.Response) -> str:
    """Render an RFC 9457 problem (or any error body) as one readable line."""
    detail = ""
    try:
        body = response.json()
        if isinstance(body, dict):
            detail = str(body.get("detail") or body.get("title") or "")
    except ValueError:
        detail = response.text[:200]
    meaning = {401: "not signed in (set a token)", 403: "not allowed for this token", 404: "not found"}
    head = meaning.get(response.status_code, f"HTTP {response.status_code}")
    return f"{method} {path}: {head}" + (f" — {detail}" if detail else "")


# --- connection settings and the cached calls pages use -------------------------------------


def api_base() -> str:
    return os.environ.get("CLAIMTRAIL_API", DEFAULT_API)


def api_token() -> str:
    """The sidebar login wins over the environment, so a person can switch tenants without a restart."""
    entered = st.session_state.get("login_token", "") if st.runtime.exists() else ""
    return str(entered or os.environ.get("CLAIMTRAIL_TOKEN", ""))


@st.cache_resource(show_spinner=False)
def _client(base_url: str, token: str) -> ApiClient:
    return ApiClient(base_url, token)


def client() -> ApiClient:
    return _client(api_base(), api_token())


# Cached calls are keyed by base URL, token and every query argument; TTL bounds staleness.


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def cached_stats(base_url: str, token: str, kind: StatsKind, filters: Filters, group_by: tuple[str, ...],
                 by: str = "") -> StatsTable:
    return _client(base_url, token).stats(kind, filters, group_by, by)


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def cached_decisions(base_url: str, token: str, filters: Filters, limit: int, extra: tuple[tuple[str, str], ...]) -> DecisionPage:
    return _client(base_url, token).decisions(filters, limit, **dict(extra))


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def cached_decision(base_url: str, token: str, decision_id: str) -> DecisionRecord:
    return _client(base_url, token).decision(decision_id)


@st.cache_data(ttl=CACHE_TTL_SECONDS, show_spinner=False)
def cached_why(base_url: str, token: str, decision_id: str, model: str, devices: bool) -> WhyAnswer:
    return _client(base_url, token).why(decision_id, model, devices)


def stats(kind: StatsKind, filters: Filters, group_by: tuple[str, ...] = (), by: str = "") -> StatsTable:
    return cached_stats(api_base(), api_token(), kind, filters, group_by, by)


def breakdown(kind: StatsKind, filters: Filters, group_by: tuple[str, ...], by: str) -> list[dict[str, Any]]:
    """The API's rows per hour or per model (``by``) of ``/v1/stats/<kind>``, as it gives them."""
    rows = stats(kind, filters, group_by, by).summary.get(f"by_{by}")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ApiError(f"/v1/stats/{kind}?by={by}: the answer has no `by_{by}` list of objects")
    return rows


def decisions(filters: Filters, limit: int = 50, **extra: str) -> DecisionPage:
    return cached_decisions(api_base(), api_token(), filters, limit, tuple(sorted(extra.items())))


def decision(decision_id: str) -> DecisionRecord:
    return cached_decision(api_base(), api_token(), decision_id)


def why(decision_id: str, model: str, devices: bool = False) -> WhyAnswer:
    """The summary answer (from the record's evidence) or, with ``devices``, the per-device one (replayed world)."""
    return cached_why(api_base(), api_token(), decision_id, model, devices)


def replay(decision_ids: list[str]) -> ReplayReport:
    """Never cached: the button asks for a fresh re-execution every time."""
    return client().replay(decision_ids)


def counterfactual(filters: Filters, policy_version: str) -> ReplayReport:
    return client().counterfactual(filters, policy_version)


def replay_window(filters: Filters, limit: int) -> ReplayReport:
    return client().replay_window(filters, limit)


def replay_job(job_id: str) -> ReplayReport:
    return client().replay_job(job_id)
