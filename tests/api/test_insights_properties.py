"""The store's pending and regret counts agree with a plain Python reading of the same records,
whatever the records (hypothesis): pods pending now are those whose latest attempt is not an
allocation; a fallback is regretted when a later decision of its cluster got the preferred
model within ``REGRET_WINDOW_S``."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.records import DecisionRecord, decision_id, to_jsonl
from audit.store.filters import DecisionFilter
from audit.store.insights import REGRET_WINDOW_S, pending_pods, regret_counts
from audit.store.queries import AuditStore

START = datetime(2026, 6, 1, 8, tzinfo=UTC)
CLUSTERS = itertools.count()
# (pod, seconds after START, outcome/allocated model)
DECISION = st.tuples(st.integers(0, 3), st.integers(0, 1800), st.sampled_from(["H100", "A100", "", "deferred"]))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuditStore]:
    s = AuditStore.open(f"chdb://{tmp_path_factory.mktemp('props')}/db")
    try:
        yield s
    finally:
        s.close()


def _records(cluster: str, specs: list[tuple[int, int, str]]) -> list[DecisionRecord]:
    out = []
    for n, (pod, seconds, got) in enumerate(specs):
        outcome = "allocated" if got in ("H100", "A100") else ("deferred" if got == "deferred" else "unschedulable")
        model = got if outcome == "allocated" else ""
        time = (START + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
        out.append(DecisionRecord(
            decision_id=decision_id(cluster, f"claim-{n}", n + 1), cluster=cluster, seq=seconds, time=time,
            attempt=n + 1, tenant="team-p", namespace="team-p", pod=f"p-{pod}", pod_uid=f"uid-{pod}",
            claims=[f"p-{pod}-gpu"], claim_uids=[f"claim-{n}"], preference=["H100", "A100"], policy_version="v1",
            policy_digest="d" * 64, outcome=outcome, tier_index={"H100": 0, "A100": 1}.get(model, -1),
            preferred_model="H100", allocated_model=model, fallback=model == "A100").seal())
    return out


def _seconds(r: DecisionRecord) -> int:
    return r.seq


@settings(max_examples=25, deadline=None)
@given(specs=st.lists(DECISION, min_size=1, max_size=12))
def test_pending_and_regret_match_the_records(store: AuditStore, specs: list[tuple[int, int, str]]) -> None:
    cluster = f"prop-{next(CLUSTERS)}"
    records = _records(cluster, specs)
    store.ingest_jsonl(to_jsonl(records).encode(), "records", "props")
    latest: dict[str, DecisionRecord] = {}
    for r in sorted(records, key=lambda r: (r.seq, r.time, r.attempt)):
        latest[r.pod_uid] = r
    pending = sum(1 for r in latest.values() if r.outcome != "allocated")
    f = DecisionFilter(cluster=cluster)
    rows = pending_pods(store._query, f, 10**12)  # noqa: SLF001 - the insights run on the store's query call
    assert sum(r["pending_now"] for r in rows) == pending
    fallbacks = [r for r in records if r.fallback]
    h100 = [_seconds(r) for r in records if r.allocated_model == "H100"]
    regretted = sum(1 for r in fallbacks if any(_seconds(r) < t <= _seconds(r) + REGRET_WINDOW_S for t in h100))
    assert regret_counts(store._query, f, []).get((), 0) == regretted  # noqa: SLF001
