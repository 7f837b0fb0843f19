"""The read side returns exactly what was written, scoped to the caller's tenant."""

from __future__ import annotations

import pytest

from audit.canonical import canonical_json
from audit.errors import UserError
from audit.store.queries import AuditStore, DecisionFilter, ReplayRun
from tests.store.conftest import write_all
from tests.store.factory import make_event, make_record, make_records


def test_get_decision_returns_the_record_byte_for_byte(store: AuditStore) -> None:
    records = make_records(30)
    write_all(store, records)
    for record in records:
        got = store.get_decision(record.decision_id, None)
        assert got is not None
        assert canonical_json(got.to_dict()) == canonical_json(record.to_dict())
        assert got.output_digest == got.compute_output_digest()


def test_get_decision_of_another_tenant_is_not_found(store: AuditStore) -> None:
    record = make_record(0, tenant="acme")
    write_all(store, [record])
    assert store.get_decision(record.decision_id, "acme") is not None
    assert store.get_decision(record.decision_id, "globex") is None
    assert store.get_decision("no-such-id", None) is None


def test_latest_for_pod_picks_the_newest_attempt_in_scope(store: AuditStore) -> None:
    first = make_record(1, tenant="acme", pod="p", namespace="ns", attempt=0)
    second = make_record(2, tenant="acme", pod="p", namespace="ns", attempt=1)
    other = make_record(3, tenant="acme", pod="q", namespace="ns")
    write_all(store, [second, first, other])
    got = store.latest_for_pod("ns", "p", "acme")
    assert got is not None and got.decision_id == second.decision_id
    assert store.latest_for_pod("ns", "p", "globex") is None
    assert store.latest_for_pod("ns", "missing", None) is None


@pytest.mark.parametrize("limit", [1, 7, 50], ids=["page-1", "page-7", "one-page"])
def test_list_decisions_pages_cover_every_record_once_newest_first(store: AuditStore, limit: int) -> None:
    records = make_records(40)
    write_all(store, records)
    write_all(store, records[10:20])  # duplicates must not show up twice
    seen: list[str] = []
    cursor = None
    while True:
        page, cursor = store.list_decisions(DecisionFilter(), cursor, limit)
        seen.extend(r.decision_id for r in page)
        if cursor is None:
            break
    assert seen == [r.decision_id for r in reversed(records)]


@pytest.mark.parametrize(
    ("f", "expected"),
    [
        (DecisionFilter(tenant="acme"), lambda r: r.tenant == "acme"),
        (DecisionFilter(model="A100"), lambda r: r.allocated_model == "A100"),
        (DecisionFilter(outcome="unschedulable"), lambda r: r.outcome == "unschedulable"),
        (DecisionFilter(fallback=True), lambda r: r.fallback),
        (DecisionFilter(since="2026-11-01T00:00:10Z", until="2026-11-01T00:00:20Z"),
         lambda r: "2026-11-01T00:00:10.000Z" <= r.time < "2026-11-01T00:00:20.000Z"),
        (DecisionFilter(namespace="globex-ml", pod="train-5"), lambda r: r.pod == "train-5"),
        (DecisionFilter(cluster="c2"), lambda r: False),
    ],
    ids=["tenant", "model", "outcome", "fallback", "time-range", "pod", "other-cluster"],
)
def test_list_decisions_applies_each_filter(store: AuditStore, f: DecisionFilter, expected) -> None:
    records = make_records(40)
    write_all(store, records)
    page, cursor = store.list_decisions(f, None, 100)
    assert cursor is None
    assert sorted(r.decision_id for r in page) == sorted(r.decision_id for r in records if expected(r))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.list_decisions(DecisionFilter(), "not a cursor!", 10), "cursor"),
        (lambda s: s.list_decisions(DecisionFilter(), None, 0), "limit 0"),
        (lambda s: s.list_decisions(DecisionFilter(since="yesterday"), None, 10), "since: 'yesterday' is not an ISO"),
        (lambda s: s.fallback_stats(DecisionFilter(), ["color"]), "group_by 'color'"),
    ],
    ids=["bad-cursor", "bad-limit", "bad-time", "bad-group"],
)
def test_bad_query_input_is_a_user_error_naming_the_field(store: AuditStore, call, message: str) -> None:
    with pytest.raises(UserError, match=message):
        call(store)


def test_events_come_back_in_seq_order_once_within_the_range(store: AuditStore) -> None:
    events = [make_event(seq) for seq in range(1, 51)]
    writer = store.writer(background=False)
    writer.write_events(reversed(events))
    writer.write_events(events[:10])  # re-sent
    assert writer.flush()
    got = list(store.events("c1", 5, 20, page=4))
    assert [e.seq for e in got] == list(range(6, 21))
    assert [e.to_dict() for e in got] == [e.to_dict() for e in events[5:20]]
    assert list(store.events("c2", 0, 100)) == []
    writer.write_events([make_event(0)])
    assert writer.flush()
    assert [e.seq for e in store.events("c1", -1, 2)] == [0, 1, 2]  # replay folds from before seq 0
    assert store.nearest_checkpoint("c1", -1) is None
    assert store.max_seq("c1") == 50


def test_nearest_checkpoint_is_the_latest_at_or_before_seq(store: AuditStore) -> None:
    store.write_checkpoint("c1", 100, {"state": 1})
    store.write_checkpoint("c1", 200, {"state": 2})
    assert store.nearest_checkpoint("c1", 99) is None
    assert store.nearest_checkpoint("c1", 150) == (100, {"state": 1})
    assert store.nearest_checkpoint("c1", 200) == (200, {"state": 2})
    assert store.nearest_checkpoint("c2", 500) is None
    store.write_checkpoint("c1", 100, {"state": "rewritten"})
    assert store.nearest_checkpoint("c1", 150) == (100, {"state": "rewritten"})
    assert store.checkpoint_seqs("c1") == [100, 200] and store.checkpoint_seqs("c2") == []


def test_replay_summary_counts_the_latest_run_per_decision(store: AuditStore) -> None:
    records = make_records(4)
    write_all(store, records)
    ids = [r.decision_id for r in records]
    store.write_replay_runs([
        ReplayRun(ids[0], "0.1.0", "pd", True, time="2026-11-02T00:00:00Z"),
        ReplayRun(ids[1], "0.1.0", "pd", False, "engine_changed", "tiers.0", time="2026-11-02T00:00:00Z"),
        ReplayRun(ids[1], "0.1.0", "pd", True, time="2026-11-02T01:00:00Z"),
        ReplayRun(ids[2], "0.1.0", "pd", False, "input_missing", time="2026-11-02T00:00:00Z"),
        ReplayRun(ids[3], "0.2.0", "pd", False, "engine_changed", time="2026-11-02T00:00:00Z"),
    ])
    assert store.replay_summary(engine_version="0.1.0") == [
        {"engine_version": "0.1.0", "policy_digest": "pd", "decisions": 3, "matches": 2, "mismatches": 1,
         "mismatch_causes": {"input_missing": 1}}]
    scoped = store.replay_summary(tenant=records[3].tenant)
    assert [(r["engine_version"], r["decisions"]) for r in scoped] == [("0.2.0", 1)]
