"""The dashboards inherit the API's tenant scoping: a token from the environment or the sign-in box.

A second API server runs with a tokens file (no ``--insecure-local``): without a token every
page says it is not signed in; with tenant alpha's token the explorer cannot find beta's pods
and the fallback page shows alpha next to the folded ``(others)``.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import streamlit
import yaml
from streamlit.testing.v1 import AppTest

from tests.dashboards import factory
from tests.dashboards.conftest import REPO, seed, start_api, stop

APP = str(REPO / "dashboards" / "app.py")
ADMIN_TOKEN = "admin-token-for-tests"
ALPHA_TOKEN = "alpha-token-for-tests"


@pytest.fixture(scope="module")
def scoped_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("scoped-api")
    tokens = root / "tokens.yaml"
    tokens.write_text(yaml.safe_dump({"tokens": [{"token": ADMIN_TOKEN, "admin": True},
                                                 {"token": ALPHA_TOKEN, "tenant": "alpha"}]}))
    base, proc = start_api(root, root / "serve.log", ("--tokens", str(tokens)))
    try:
        seed(base, ADMIN_TOKEN)
        yield base
    finally:
        stop(proc)


def run_page(script: str, at: AppTest | None = None) -> AppTest:
    at = at or AppTest.from_file(APP, default_timeout=60)
    at.run()
    at.switch_page(f"panels/{script}").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_without_a_token_the_page_says_to_sign_in(scoped_api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAIMTRAIL_API", scoped_api)
    monkeypatch.delenv("CLAIMTRAIL_TOKEN", raising=False)
    at = run_page("1_overview.py")
    assert [e.value for e in at.error] == [
        "Could not load decision totals: GET /v1/stats/overview: not signed in (set a token) — "
        "a valid bearer token is required (Authorization: Bearer <token>)"
    ]


def test_a_token_typed_in_the_sign_in_box_is_used(scoped_api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAIMTRAIL_API", scoped_api)
    monkeypatch.delenv("CLAIMTRAIL_TOKEN", raising=False)
    at = run_page("1_overview.py")
    at.text_input(key="login_token").input(ALPHA_TOKEN).run()
    assert not any("not signed in" in e.value for e in at.error)
    shown = {m.label: m.value for m in at.metric}
    assert shown["Decisions"] == "5"  # alpha's own; the others' are named apart
    assert shown["Pending at window end"] == "0"  # pods pending come from the event log, which holds none of these pods


def test_a_tenants_overview_headline_is_its_own_population(scoped_api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """alpha's 5 decisions (4 allocated, 1 unschedulable) and its own pod figures make the headline,
    hour by hour too; beta's 5 (3 allocated), folded by the API into (others), are named apart."""
    streamlit.cache_data.clear()
    monkeypatch.setenv("CLAIMTRAIL_API", scoped_api)
    monkeypatch.setenv("CLAIMTRAIL_TOKEN", ALPHA_TOKEN)
    at = run_page("1_overview.py")
    assert not at.error, [e.value for e in at.error]
    shown = {m.label: m.value for m in at.metric}
    assert shown == {"Decisions": "5", "Allocation success (per decision)": "80.0 %", "First-choice rate": "–",
                     "Fallbacks (pods)": "0", "Unschedulable attempts": "1", "Pending at window end": "0"}
    assert "Other tenants, folded as (others) and not counted above: 5 decisions, 3 allocated; 0 pods pending at " \
           "the window's end." in [c.value for c in at.caption]
    assert [c.value for c in at.caption if c.value.startswith("Reading: ")] == [
        "Reading: 5 decisions: 80.0 % allocated, – of 0 pods with alternatives got their first choice and 0 fell "
        "back; 0 pods were pending at the window's end."]


def test_a_tenant_finds_only_its_own_claims(scoped_api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAIMTRAIL_API", scoped_api)
    monkeypatch.setenv("CLAIMTRAIL_TOKEN", ALPHA_TOKEN)
    at = run_page("5_explorer.py")
    at.radio(key="ex_kind").set_value("Claim").run()
    at.text_input(key="ex_query").input("train-06-gpu").run()
    assert [i.value for i in at.info] == ["No decision found for claim 'train-06-gpu' with these filters."]
    at.text_input(key="ex_query").input("train-01-gpu").run()
    assert {m.label: m.value for m in at.metric}["Allocated"] == "A100"


def test_a_tenant_sees_only_its_own_replay_runs_and_skip_reasons(scoped_api: str,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    ids = [r.decision_id for r in factory.records() if r.time < "2026-03-01T09:00:00Z"]  # alpha 2, beta 1
    r = httpx.post(f"{scoped_api}/v1/replay", json={"decision_ids": ids},
                   headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}, timeout=60)
    assert r.status_code == 200, r.text
    streamlit.cache_data.clear()
    monkeypatch.setenv("CLAIMTRAIL_API", scoped_api)
    monkeypatch.setenv("CLAIMTRAIL_TOKEN", ALPHA_TOKEN)
    at = run_page("6_replay.py")
    assert [c.value for c in at.caption if c.value.startswith("Reading: ")][0] == \
        "Reading: 2 decisions replayed, 0.0 % matched; 2 mismatched."
    at = run_page("2_fallback.py")
    # alpha's skipped H100 tiers only (train-01, -02, -03): 3 x 4 in use
    assert any(c.value == "Reading: The leading reason H100 was skipped is in_use (12 device verdicts in tiers that "
               "were not chosen)." for c in at.caption)


def test_a_tenant_cannot_find_another_tenants_pod(scoped_api: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLAIMTRAIL_API", scoped_api)
    monkeypatch.setenv("CLAIMTRAIL_TOKEN", ALPHA_TOKEN)
    at = run_page("5_explorer.py")
    at.text_input(key="ex_query").input("team-beta/train-06").run()
    assert [i.value for i in at.info] == ["No decision found for pod 'team-beta/train-06' with these filters."]
    at.text_input(key="ex_query").input("team-alpha/train-01").run()
    assert {m.label: m.value for m in at.metric}["Allocated"] == "A100"


@pytest.mark.parametrize(
    ("token", "offered"),
    [
        pytest.param(ADMIN_TOKEN, ["(all)", "alpha", "beta"], id="admin-every-tenant"),
        # alpha's rows fold beta into "(others)", a name the API refuses as a filter
        pytest.param(ALPHA_TOKEN, ["(all)", "alpha"], id="tenant-its-own-not-the-folded-others"),
    ],
)
def test_the_tenant_picker_offers_only_tenants_a_filter_can_name(scoped_api: str, monkeypatch: pytest.MonkeyPatch,
                                                                 token: str, offered: list[str]) -> None:
    streamlit.cache_data.clear()
    monkeypatch.setenv("CLAIMTRAIL_API", scoped_api)
    monkeypatch.setenv("CLAIMTRAIL_TOKEN", token)
    at = run_page("1_overview.py")
    assert at.selectbox(key="f_tenant").options == offered
    for choice in offered:
        at.selectbox(key="f_tenant").select(choice).run()
        assert not at.error, [e.value for e in at.error]
