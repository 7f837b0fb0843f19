"""A record is answered from the JSON text the store keeps exactly when that text is the record the API
would build from it: every field at every level, including texts written before a defaulted field
existed (the long way fills it in), and through a real server for admins and tenants alike."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from audit.api.auth import Redaction, redact_record, redact_stored
from audit.api.stored import admin_body, complete, record_data
from audit.records import (
    DecisionRecord,
    DeviceRef,
    Exemplar,
    TierBlocker,
    TierSummary,
    record_dict,
    record_text,
)
from tests.api.conftest import start_server, stop
from tests.builders import device
from tests.store.factory import make_record

# each nested part of a record: where it sits in the record's dict, and its dataclass
PARTS: dict[str, type] = {"": DecisionRecord, "devices": DeviceRef, "tiers": TierSummary,
                          "tiers.exemplars": Exemplar, "blockers": TierBlocker}


def _full(tenant: str = "team-a") -> DecisionRecord:
    """A record with at least one of every nested part, non-ASCII text and a detail of each kind."""
    record = make_record(4, tenant=tenant, namespace=f"{tenant}-ns")
    record.devices = [device("node-1", "A100", "gpu/a100")]
    record.blockers = [TierBlocker("quota_exhausted", 0, {"used": 3, "limit": 2, "holder": "team-b/claim-x",
                                                          "ratio": 0.25})]
    record.message = 'träin ✓ "quoted" \\ held by team-b/claim-x'
    assert record.tiers and record.tiers[0].exemplars
    return record


def _without(data: dict[str, Any], part: str, name: str) -> dict[str, Any]:
    """``data`` with field ``name`` removed from every object at ``part`` (as a record written before
    that field existed)."""
    out = json.loads(json.dumps(data))
    objects = [out]
    for step in filter(None, part.split(".")):
        objects = [child for obj in objects for child in obj[step]]
    for obj in objects:
        del obj[name]
    return out


def _defaulted() -> Iterator[tuple[str, str]]:
    for part, cls in PARTS.items():
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING:
                yield part, f.name


def _expected(text: str) -> dict[str, Any]:
    """What the API built from a stored text before: the record, then its plain dict."""
    return record_dict(DecisionRecord.from_dict(json.loads(text)))


def test_a_text_with_every_field_is_answered_as_stored() -> None:
    text = record_text(_full())
    assert complete(orjson.loads(text))
    assert admin_body(text) == text.encode()
    assert json.loads(admin_body(text)) == _expected(text) == record_data(text)


@pytest.mark.parametrize(("part", "name"), list(_defaulted()), ids=lambda v: v or "record")
def test_a_text_without_a_defaulted_field_is_answered_with_its_default(part: str, name: str) -> None:
    text = json.dumps(_without(json.loads(record_text(_full())), part, name), ensure_ascii=False)
    assert not complete(orjson.loads(text))
    assert json.loads(admin_body(text)) == _expected(text) == record_data(text)


def test_every_field_of_every_part_is_checked() -> None:
    """Leaving out any field, defaulted or required, makes the text incomplete: nothing is passed on
    that the long way would have filled in or refused."""
    data = json.loads(record_text(_full()))
    for part, cls in PARTS.items():
        for f in dataclasses.fields(cls):
            assert not complete(_without(data, part, f.name)), f"{part}.{f.name}"


def test_a_text_with_an_unknown_field_fails_as_before() -> None:
    data = json.loads(record_text(_full()))
    data["tiers"][0]["surprise"] = 1
    text = json.dumps(data)
    assert not complete(orjson.loads(text))
    with pytest.raises(TypeError):
        DecisionRecord.from_dict(json.loads(text))
    with pytest.raises(TypeError):
        admin_body(text)


def test_an_integer_beyond_64_bits_goes_the_long_way() -> None:
    record = _full()
    record.blockers[0].detail["count"] = 2**70
    text = record_text(record)
    assert json.loads(admin_body(text)) == _expected(text) == record_data(text)


@pytest.mark.parametrize("redaction", [Redaction(), Redaction(hash_pod_names=True, drop_labels=True)],
                         ids=["no-redaction", "hashed-pods-dropped-labels"])
@pytest.mark.parametrize(("part", "name"), [("", ""), *_defaulted()], ids=lambda v: v or "complete")
def test_the_tenant_view_of_a_stored_text_is_the_view_of_its_record(part: str, name: str,
                                                                     redaction: Redaction) -> None:
    data = json.loads(record_text(_full()))
    text = json.dumps(_without(data, part, name) if name else data)
    assert redact_stored(text, redaction) == redact_record(DecisionRecord.from_dict(json.loads(text)), redaction)


def _old_text(record: DecisionRecord) -> str:
    """The record as a writer from before every defaulted field existed would have stored it."""
    data = json.loads(record_text(record))
    for part, name in sorted(_defaulted(), reverse=True):  # the nested parts' fields before the lists holding them
        if part or name not in ("devices", "tiers", "blockers"):
            data = _without(data, part, name)
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def test_a_served_record_is_the_record_for_old_and_new_texts(tmp_path: Path) -> None:
    from audit.store.queries import AuditStore

    new, old = _full(), dataclasses.replace(_full(), decision_id="old-0", pod="old-pod", seq=5)
    with AuditStore.open(f"chdb://{tmp_path}/db") as store:
        store._insert("decisions_in", ["record"], [[record_text(new)], [_old_text(old)]])
        assert {r.decision_id for r in store.list_decisions(store_filter(), None, 10)[0]} == {new.decision_id, "old-0"}
    srv, proc = start_server(tmp_path)
    try:
        texts = {new.decision_id: record_text(new), "old-0": _old_text(old)}
        for decision_id, text in texts.items():
            expected = _expected(text)
            assert srv.get(f"/v1/decisions/{decision_id}").json() == expected
            tenant_view = srv.get(f"/v1/decisions/{decision_id}", who="team-a").json()
            built = redact_record(DecisionRecord.from_dict(json.loads(text)), Redaction(hash_pod_names=True))
            assert tenant_view.pop("pod").startswith("sha256:") and built.pop("pod").startswith("sha256:")  # salted by the server
            assert tenant_view == built
        for who in ("admin", "team-a"):
            page = srv.get("/v1/decisions", who=who, limit=10).json()
            assert page["next"] is None
            assert page["items"] == [srv.get(f"/v1/decisions/{r['decision_id']}", who=who).json() for r in page["items"]]
            assert sorted(r["decision_id"] for r in page["items"]) == sorted(texts)
    finally:
        stop(proc)


def store_filter() -> Any:
    from audit.store.filters import DecisionFilter

    return DecisionFilter()
