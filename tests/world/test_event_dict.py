"""An event's dict is every field with the value ``dataclasses.asdict`` gives, its payload the
event's own: readers of pages of thousands of events (``GET /v1/events``, a resuming watcher)
must not pay a deep copy of every payload."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from audit.events import WorldEvent

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"gpu": "h100"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
EVENTS = {
    "an_upsert_with_a_nested_payload": WorldEvent(cluster="c", seq=7, time="2026-05-01T08:00:00.000000Z",
                                                 type="upsert", object_kind="Node", namespace="", name="n1",
                                                 payload=NODE, resource_version="42"),
    "a_delete_with_the_defaults": WorldEvent(cluster="c", seq=8, time="2026-05-01T08:00:01.000000Z", type="delete",
                                             object_kind="Pod", namespace="team-a", name="p"),
}


@pytest.mark.parametrize("event", list(EVENTS.values()), ids=list(EVENTS))
def test_an_events_dict_is_asdicts_value_without_copying_the_payload(event: WorldEvent) -> None:
    out: dict[str, Any] = event.to_dict()
    assert (list(out), out) == ([f.name for f in dataclasses.fields(WorldEvent)], dataclasses.asdict(event))
    assert out["payload"] is event.payload
