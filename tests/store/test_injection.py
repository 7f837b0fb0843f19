"""SQL-injection strings in every query parameter are data, never SQL."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from audit.api.stats.fairness import usage_by_model
from audit.canonical import canonical_json
from audit.errors import UserError
from audit.store.connection import resolve_dsn
from audit.store.queries import AuditStore, DecisionFilter
from tests.store.conftest import write_all
from tests.store.factory import make_record, make_records

NASTY = [
    "'; DROP TABLE decisions; --",
    "acme' OR '1'='1",
    "acme') OR ('1'='1",
    "\\' OR 1=1 --",
    "{tenant:String}",
    "`decisions`",
    "x\x00y",
    "1; SELECT * FROM system.tables",
    "acme\" OR \"\"=\"",
]
FILTER_FIELDS = ["tenant", "namespace", "pod", "model", "outcome", "policy_version", "cluster", "track", "claim"]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuditStore]:
    """One store for the module (opening a chDB store per case would dominate the run time)."""
    with AuditStore.open(f"chdb://{tmp_path_factory.mktemp('inj')}/db") as store:
        write_all(store, make_records(20))
        yield store


def intact(store: AuditStore) -> None:
    assert store.client.query("SELECT count() FROM decisions FINAL WHERE cluster = 'c1'").result_rows[0][0] == 20
    assert store.client.query("SELECT count() FROM system.tables WHERE database = 'claimtrail'").result_rows[0][0] == 26


@pytest.mark.parametrize("value", NASTY, ids=range(len(NASTY)))
def test_point_lookups_treat_injection_as_a_value(loaded: AuditStore, value: str) -> None:
    assert loaded.get_decision(value, None) is None
    assert loaded.get_decision(make_record(0).decision_id, value) is None
    assert loaded.latest_for_pod(value, value, None) is None
    assert loaded.latest_for_pod("acme-ml", "train-0", value) is None
    assert list(loaded.events(value, 0, 100)) == []
    assert loaded.nearest_checkpoint(value, 10) is None
    assert loaded.replay_summary(value, value, value) == []
    assert loaded.max_seq(value) is None
    intact(loaded)


@pytest.mark.parametrize("field", FILTER_FIELDS)
def test_every_filter_field_treats_injection_as_a_value(loaded: AuditStore, field: str) -> None:
    for value in NASTY:
        f = DecisionFilter(**{field: value})
        assert loaded.list_decisions(f, None, 100) == ([], None)
        assert loaded.fallback_stats(f, ["tenant", "model", "hour"]) == []
        assert loaded.insight(usage_by_model, f, True, scope_tenant="acme") == []
        assert loaded.health_stats(f) == []
        assert loaded.migration_stats(f) == []
        intact(loaded)


@pytest.mark.parametrize("value", NASTY, ids=range(len(NASTY)))
def test_scope_tenant_and_cursor_treat_injection_as_a_value(loaded: AuditStore, value: str) -> None:
    # the rollup answers the cluster alone; a time off the hour needs the raw rows
    for f in (DecisionFilter(cluster="c1"), DecisionFilter(cluster="c1", since="2026-10-31T23:59:30Z")):
        got = loaded.fallback_stats(f, ["tenant"], scope_tenant=value)
        assert [(g["tenant"], g["decisions"]) for g in got] == [("(others)", 20)]
    rows = loaded.insight(usage_by_model, DecisionFilter(cluster="c1"), True, scope_tenant=value)
    assert {r["tenant"] for r in rows} == {"(others)"} and sum(r["decisions"] for r in rows) == 20
    with pytest.raises(UserError, match="cursor"):
        loaded.list_decisions(DecisionFilter(), value, 10)
    intact(loaded)


@pytest.mark.parametrize("index", range(len(NASTY)))
def test_injection_inside_stored_values_round_trips_literally(loaded: AuditStore, index: int) -> None:
    store, value = loaded, NASTY[index]
    record = make_record(index, tenant=value, pod=value, namespace=value, cluster="stored-injection")
    write_all(store, [record])
    store.write_checkpoint(value, 5, {"v": value})
    got = store.get_decision(record.decision_id, value)
    assert got is not None and canonical_json(got.to_dict()) == canonical_json(record.to_dict())
    assert store.latest_for_pod(value, value, value) is not None
    assert store.nearest_checkpoint(value, 5) == (5, {"v": value})
    by_tenant = store.fallback_stats(DecisionFilter(cluster="stored-injection", tenant=value), ["tenant"])
    assert [(g["tenant"], g["decisions"]) for g in by_tenant] == [(value, 1)]
    intact(store)


@pytest.mark.parametrize("dsn", ["http://u:p@localhost:8123/db;DROP", "http://localhost:8123/a b", "ftp://x"],
                         ids=["semicolon-database", "space-database", "scheme"])
def test_dsns_that_would_reach_sql_are_refused(dsn: str) -> None:
    with pytest.raises(UserError, match="DSN"):
        resolve_dsn(dsn)
