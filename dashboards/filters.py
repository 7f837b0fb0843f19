"""The filter bar every page shares: cluster, time window, tenant, model and policy version.

Widgets live in the sidebar with stable keys (``f_cluster``, ``f_since``, ``f_until``,
``f_tenant``, ``f_model``, ``f_policy``) so a choice survives page switches and tests can set
them. The tenant and model choices are the ones present in the data, asked from the API; the
time window is ISO 8601 text checked here so a typo gets a message instead of an API error, and
its empty fields show the stored data's first and last hour (what "no limit" means).
"""

from __future__ import annotations

import streamlit as st

from audit.records import OTHERS_TENANT
from audit.timestamps import format_utc, parse_rfc3339
from dashboards import client
from dashboards.client import ApiError, Filters, StatsTable
from dashboards.extent import Extent, stored_extent

ALL = "(all)"
FACETS = ("tenant", "model")


def parse_instant(field: str, text: str) -> str:
    """An ISO 8601 time or date as the API wants it (with a zone); raise ValueError naming the field.

    The fields are labelled UTC, so a time or date without a zone is taken as UTC. A fraction of
    a second is kept as given (the API reads milliseconds): the window the API's figures name, as
    the empty fields show it, ends one millisecond past the last event, and typed in it must give
    the same figures as the empty field.
    """
    text = text.strip()
    if not text:
        return ""
    try:
        parsed = parse_rfc3339(text)
    except ValueError:
        raise ValueError(f"filter `{field}`: {text!r} is not an ISO 8601 time such as 2026-03-01T08:00:00Z") from None
    fraction = parsed.microsecond
    return format_utc(parsed, digits=0 if fraction == 0 else 3 if fraction % 1000 == 0 else 6)


def facet_choices(table: StatsTable) -> dict[str, list[str]]:
    """The tenants and allocated models of rows grouped by ``FACETS``, as the pickers offer them.
    A tenant caller's rows fold every other tenant into ``(others)``, a name no filter can take
    (the API refuses it): it is not offered."""
    refused = {"tenant": {OTHERS_TENANT}}
    return {column: sorted({str(v) for v in table.column(column) if v not in (None, "")} - refused.get(column, set()))
            for column in FACETS}


def _facets(cluster: str) -> dict[str, list[str]]:
    """Tenants and allocated models present in the data, from one call of the API's fallback
    statistics grouped by both (one request instead of one per choice list)."""
    try:
        table = client.stats("fallback", Filters(cluster=cluster), FACETS)
    except ApiError as exc:
        st.sidebar.caption(f"tenant and model choices unavailable: {exc}")
        return {column: [] for column in FACETS}
    return facet_choices(table)


def _extent() -> Extent:
    try:
        return stored_extent()
    except ApiError:
        return Extent()  # the page's own calls report the API problem; no second box for it here


def filter_bar() -> Filters:
    """Draw the filters and return them; a malformed time window stops the page with a message."""
    sb = st.sidebar
    sb.header("Filters")
    extent = _extent()
    clusters = ", ".join(extent.clusters[:3]) + (" …" if len(extent.clusters) > 3 else "")
    cluster = sb.text_input("Cluster", key="f_cluster", placeholder=f"all clusters ({clusters})" if clusters
                            else "all clusters").strip()
    # Empty since/until mean "no limit"; the placeholders show what that is: the stored data's range.
    since_text = sb.text_input("Since (UTC)", key="f_since", placeholder=extent.since or "first decision")
    until_text = sb.text_input("Until (UTC)", key="f_until", placeholder=extent.until or "last decision")
    choices = _facets(cluster)
    tenant = sb.selectbox("Tenant", [ALL, *choices["tenant"]], key="f_tenant")
    model = sb.selectbox("Allocated model", [ALL, *choices["model"]], key="f_model", help="The model a decision was given")
    policy = sb.text_input("Policy version", key="f_policy", placeholder="all versions").strip()
    try:
        since = parse_instant("since", since_text)
        until = parse_instant("until", until_text)
    except ValueError as exc:
        st.error(str(exc))
        st.stop()
    return Filters(
        cluster=cluster,
        since=since,
        until=until,
        tenant="" if tenant in (None, ALL) else str(tenant),
        model="" if model in (None, ALL) else str(model),
        policy_version=policy,
    )


def login_box() -> None:
    """A token typed here replaces ``CLAIMTRAIL_TOKEN`` for this browser session."""
    with st.sidebar.expander("Sign in", expanded=False):
        st.text_input("API token", key="login_token", type="password", help="Bearer token issued for your tenant")
        st.caption(f"API: {client.api_base()}")
