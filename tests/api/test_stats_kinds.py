"""Each ``/v1/stats`` kind is declared by one module of ``audit.api.stats``, and the API serves
exactly the kinds declared there, with the summary and groupings their modules give."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import audit.api.stats as stats_package
from audit.api.problems import Problem
from audit.api.stats import kinds
from tests.api.conftest import Server

DECLARED = ["fairness", "fallback", "health", "migration", "overview", "replay"]


def test_every_module_of_the_package_declares_the_kind_named_after_it() -> None:
    modules = sorted(m.name for m in pkgutil.iter_modules(stats_package.__path__))
    assert modules == DECLARED
    for name in modules:
        assert importlib.import_module(f"audit.api.stats.{name}").KIND.name == name
    assert [k.name for k in kinds()] == DECLARED


def test_the_api_serves_one_route_per_declared_kind_with_its_summary(server: Server) -> None:
    paths = server.get("/openapi.json", None).json()["paths"]
    served = sorted(p.removeprefix("/v1/stats/") for p in paths if p.startswith("/v1/stats/"))
    assert served == DECLARED
    for kind in kinds():
        assert paths[f"/v1/stats/{kind.name}"]["get"]["summary"] == kind.summary


@pytest.mark.parametrize(("name", "group_by", "keys"), [
    ("health", None, ["hour"]),
    ("health", "hour,model", ["hour", "model"]),
    ("fairness", "hour,tenant", ["hour", "tenant"]),
    ("replay", "cause", ["cause"]),
    ("fallback", None, ["tenant", "preferred", "model"]),
    ("fallback", "reason,preferred", ["reason", "preferred"]),
], ids=["health-default", "health-hour-model", "fairness-by-hour", "replay-by-cause", "fallback-default",
        "fallback-reasons"])
def test_a_kind_parses_the_groupings_it_declares(name: str, group_by: str | None, keys: list[str]) -> None:
    kind = next(k for k in kinds() if k.name == name)
    assert kind.group_keys(group_by) == keys


@pytest.mark.parametrize(("name", "group_by", "message"), [
    ("health", "model,hour", "group_by: /v1/stats/health is grouped by hour or model or hour,model"),
    ("fallback", "reason,tenant", "group_by: reason combines with preferred only"),
], ids=["health-undeclared-order", "fallback-reason-with-tenant"])
def test_a_grouping_a_kind_does_not_declare_is_refused_by_name(name: str, group_by: str, message: str) -> None:
    kind = next(k for k in kinds() if k.name == name)
    with pytest.raises(Problem) as caught:
        kind.group_keys(group_by)
    assert (caught.value.kind, caught.value.detail) == ("invalid-parameter", message)
