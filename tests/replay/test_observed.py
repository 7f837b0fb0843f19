"""Observed decisions (node from the binding) replay as device agreement on that node."""

from __future__ import annotations

import pytest

from audit.records import DecisionRecord
from audit.replay import MemorySource, Verifier
from audit.replay.report import summarize
from ingest.kube.observe import DecisionObserver
from tests.kube.apiserver import FakeApiServer
from tests.kube.harness import FIXED_TIME, CollectingSink, make_watcher, populate, run_until_caught_up


def _observed(changes: str) -> CollectingSink:
    # the watcher's own allocator check is off: replay must reach its verdict from the event log alone
    observer = DecisionObserver("test-cluster", lambda: FIXED_TIME, check_allocations=False)
    with FakeApiServer() as server:
        populate(server, changes=changes)
        sink = CollectingSink()
        run_until_caught_up(server, make_watcher(server, sink, observer=observer))
    return sink


@pytest.fixture(scope="module")
def agreeing():
    return _observed("changes.yaml")


@pytest.fixture(scope="module")
def disagreeing():
    return _observed("changes-mismatch.yaml")


def _replay_allocated(sink: CollectingSink):
    allocated = [r for r in sink.records if r.outcome == "allocated" and r.track == "dra"]
    assert allocated
    return allocated, list(Verifier(MemorySource(sink.events)).run(allocated))


def test_an_observed_choice_our_allocator_makes_too_is_agreement(agreeing):
    records, results = _replay_allocated(agreeing)
    assert [(r.observed, r.match, r.diff) for r in results] == [(True, True, [])] * len(records)
    assert summarize(results).agreement_rate == 1.0


def test_an_observed_choice_our_allocator_does_not_make_is_a_mismatch_naming_the_device(disagreeing):
    records, results = _replay_allocated(disagreeing)
    by_pod = {rec.pod: res for rec, res in zip(sorted(records, key=lambda r: (r.seq, r.decision_id)), results,
                                               strict=True)}
    res = by_pod["infer-0"]
    assert (res.observed, res.match, res.cause) == (True, False, "output_mismatch")
    [line] = res.diff
    assert line.endswith("[1]: recorded gpu.nvidia.com/node-a/gpu-1, replayed gpu.nvidia.com/node-a/gpu-0")
    summary = summarize(results)
    assert summary.observed == len(records) and summary.agreement_rate == (len(records) - 1) / len(records)


def test_share_ids_and_timestamps_do_not_count(agreeing):
    """Fields upstream randomises are blanked: changing them in the log changes nothing."""
    events = []
    for ev in agreeing.events:
        alloc = ((ev.payload.get("status") or {}).get("allocation") or {}) if ev.object_kind == "ResourceClaim" else {}
        if alloc:
            results = [{**r, "shareID": "00000000-0000-0000-0000-000000000042"} for r in alloc["devices"]["results"]]
            alloc = {**alloc, "devices": {**alloc["devices"], "results": results},
                     "allocationTimestamp": "2030-01-01T00:00:00Z"}
            ev = type(ev)(**{**ev.to_dict(), "payload": {**ev.payload, "status": {**ev.payload["status"],
                                                                                   "allocation": alloc}}})
        events.append(ev)
    allocated = [r for r in agreeing.records if r.outcome == "allocated" and r.track == "dra"]
    assert all(r.match for r in Verifier(MemorySource(events)).run(allocated))


def test_the_world_before_the_allocation_is_used_even_after_the_claim_is_gone(agreeing):
    """Watchers race: the record may be written after its claim was deleted from the world."""
    records = [r for r in agreeing.records if r.outcome == "allocated" and r.track == "dra"]
    last = max(e.seq for e in agreeing.events)
    deleted = {(e.namespace, e.name) for e in agreeing.events if e.object_kind == "ResourceClaim" and e.type == "delete"}
    late = [DecisionRecord.from_dict({**r.to_dict(), "seq": last}) for r in records]
    assert all((r.namespace, r.claims[0]) in deleted for r in late)
    results = list(Verifier(MemorySource(agreeing.events)).run(late))
    assert [(r.match, r.diff) for r in results] == [(True, [])] * len(late)


def test_an_allocation_missing_from_the_log_is_an_input_mismatch(agreeing):
    records = [r for r in agreeing.records if r.outcome == "allocated" and r.track == "dra"]
    events = [e for e in agreeing.events
              if not (e.object_kind == "ResourceClaim" and (e.payload.get("status") or {}).get("allocation"))]
    events = [type(e)(**{**e.to_dict(), "seq": i}) for i, e in enumerate(events)]
    moved = [DecisionRecord.from_dict({**r.to_dict(), "seq": len(events) - 1}) for r in records]
    [result] = list(Verifier(MemorySource(events)).run(moved[:1]))
    assert (result.match, result.cause) == (False, "input_mismatch")
    assert result.diff == [f"ResourceClaim {moved[0].namespace}/{moved[0].claims[0]}: no allocation in events "
                           f"0..{len(events) - 1}"]
