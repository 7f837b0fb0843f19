"""Whatever order, repetition and relists the reflectors deliver, the event log converges to the
cluster's state, never emits one object version twice, and never moves an object backwards."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from ingest.kube.eventlog import EventLog
from ingest.kube.reflector import Change, Snapshot

NAMES = ["a", "b", "c"]


def _history(ops: list[tuple[str, bool]]) -> list[tuple[str, str, dict[str, Any]]]:
    """Truth: (watch type, name, object) per change, resourceVersions from one counter."""
    alive: set[str] = set()
    out = []
    for rv, (name, delete) in enumerate(ops, start=1):
        obj = {"kind": "Node", "metadata": {"name": name, "resourceVersion": str(rv)}, "spec": {"v": rv}}
        if delete and name in alive:
            alive.discard(name)
            out.append(("DELETED", name, obj))
        elif not delete:
            out.append(("MODIFIED" if name in alive else "ADDED", name, obj))
            alive.add(name)
    return out


def _state(history: list[tuple[str, str, dict[str, Any]]], upto: int) -> dict[str, dict[str, Any]]:
    state: dict[str, dict[str, Any]] = {}
    for etype, name, obj in history[:upto]:
        if etype == "DELETED":
            state.pop(name, None)
        else:
            state[name] = obj
    return state


@settings(max_examples=80, deadline=None)
@given(
    ops=st.lists(st.tuples(st.sampled_from(NAMES), st.booleans()), min_size=1, max_size=25),
    extras=st.lists(st.tuples(st.integers(0, 30), st.sampled_from(["resend", "relist"]), st.integers(0, 30)), max_size=12),
)
def test_log_converges_without_doubles_or_regressions(ops: list[tuple[str, bool]], extras: list[tuple[int, str, int]]) -> None:
    history = _history(ops)
    deliveries: list[Change | Snapshot] = []
    inserts: dict[int, list[tuple[str, int]]] = {}
    for at, what, which in extras:
        inserts.setdefault(at % (len(history) + 1), []).append((what, which))
    for i in range(len(history) + 1):
        for what, which in inserts.get(i, []):
            if what == "resend" and i > 0:
                etype, _, obj = history[which % i]  # something already delivered, again
                deliveries.append(Change("Node", etype, obj))
            elif what == "relist":
                state = _state(history, i)
                list_rv = history[i - 1][2]["metadata"]["resourceVersion"] if i else "0"
                deliveries.append(Snapshot("Node", "", list(state.values()), list_rv))
        if i < len(history):
            etype, _, obj = history[i]
            deliveries.append(Change("Node", etype, obj))

    log = EventLog("c", lambda: "t")
    events = [a.event for d in deliveries for a in log.apply(d) if a.event]
    assert {k[2]: v for k, v in log.alive.items()} == _state(history, len(history))
    marks = [(e.name, e.type, e.resource_version) for e in events]
    assert len(marks) == len(set(marks))
    assert [e.seq for e in events] == list(range(len(events)))
    for name in NAMES:
        versions = [int(e.resource_version) for e in events if e.name == name]
        assert versions == sorted(versions)
