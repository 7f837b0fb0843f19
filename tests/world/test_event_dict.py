"""An event's dict is every field with the value ``dataclasses.asdict`` gives, its payload the
event's own: readers of pages of thousands of events (``GET /v1/events``, a resuming watcher)
must not pay a deep copy of every payload."""

from __future__ import annotations

import dataclasses
from typing import Any

import orjson
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


FIELDS = {"cluster": "c", "seq": 7, "time": "2026-05-01T08:00:00.000000Z", "type": "upsert", "object_kind": "Node",
          "namespace": "", "name": "n1", "payload": NODE, "resource_version": "42"}
DICTS = {
    "every_field_in_reverse_order": dict(reversed(FIELDS.items())),
    "every_field_as_a_text_parses": orjson.loads(orjson.dumps(FIELDS)),
    "the_defaults_left_out": {k: v for k, v in FIELDS.items() if k not in ("payload", "resource_version")},
    "an_unknown_key_for_a_field": {**{k: v for k, v in FIELDS.items() if k != "name"}, "nmae": "n1"},
    "an_unknown_key_besides_them": {**FIELDS, "extra": 1},
    "a_field_missing": {k: v for k, v in FIELDS.items() if k != "seq"},
}


@pytest.mark.parametrize("data", list(DICTS.values()), ids=list(DICTS))
def test_an_event_from_a_dict_is_the_one_its_fields_as_keywords_make(data: dict[str, Any]) -> None:
    try:
        expected: WorldEvent | str = WorldEvent(**data)
    except TypeError as exc:
        expected = str(exc)
    try:
        got: WorldEvent | str = WorldEvent.from_dict(data)
    except TypeError as exc:
        got = str(exc)
    assert got == expected
    if isinstance(got, WorldEvent):
        assert got.payload is data.get("payload", got.payload)
