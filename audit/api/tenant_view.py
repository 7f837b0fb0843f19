"""What a tenant may see of its own decision record: an allow-list, field by field.

A record of tenant A can mention other tenants' objects: the claim holding a device it wanted
(``by`` in an ``in_use`` exemplar, ``holder`` in a binding conflict), the tenant it was deferred
for (``waiting_tenant``), and the message rendered from those. The tenant view is built only from
the fields listed in ``RECORD_FIELDS``, so a field added to the record later is not shown until
someone decides how; free-form ``detail`` maps keep only the keys in ``DETAIL_KEYS``; values of
``NAMING_KEYS`` that name another tenant's object read ``(others)`` (the name aggregates use for
other tenants), and wherever such a name appears in the message it is replaced the same way.
"""

from __future__ import annotations

import re
from typing import Any

from audit.explain.holders import OTHER_TENANT
from audit.records import DETAIL_KEYS, NAMING_KEYS, OTHERS_TENANT

OTHERS = OTHERS_TENANT

# every field of the record and of its nested parts, and how the tenant view treats it:
# "keep" (the tenant's own data, closed vocabularies, numbers, digests), "detail" (a free-form
# map filtered by DETAIL_KEYS), "message" (free text scrubbed of the names found in details)
RECORD_FIELDS: dict[str, str] = {
    **{name: "keep" for name in (
        "decision_id", "cluster", "seq", "time", "attempt", "tenant", "namespace", "pod", "pod_uid", "claims",
        "claim_uids", "preference", "policy_version", "policy_digest", "outcome", "node", "tier_index",
        "preferred_model", "allocated_model", "fallback", "retry_class", "backoff_ms", "wait_ms", "steps",
        "duration_us", "track", "template_version", "engine_version", "input_digest", "output_digest",
        "schema_version")},
    "message": "message",
    "devices.device": "keep", "devices.node": "keep", "devices.model": "keep", "devices.request": "keep",
    "tiers.index": "keep", "tiers.request": "keep", "tiers.model": "keep", "tiers.considered": "keep",
    "tiers.reasons": "keep", "tiers.nodes_evaluated": "keep",
    "tiers.exemplars.device": "keep", "tiers.exemplars.node": "keep", "tiers.exemplars.reason": "keep",
    "tiers.exemplars.detail": "detail",
    "blockers.code": "keep", "blockers.tier": "keep", "blockers.detail": "detail",
}

UNOWNED = frozenset({"same claim", "allocated", OTHER_TENANT})  # ``by`` values that name nothing
# "ns/name" references inside a naming value ("pod ns/x (claim ns/y)", "ns/a,ns/b")
_REFERENCE = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[^\s,;()]+")


def tenant_view(data: dict[str, Any]) -> dict[str, Any]:
    """The record (as a dict, after any pod-name redaction) as its own tenant may see it."""
    foreign: set[str] = set()
    view = _part(data, "", data, foreign)
    if isinstance(view.get("message"), str):
        view["message"] = _scrub(view["message"], foreign)
    return view


def _part(obj: dict[str, Any], prefix: str, record: dict[str, Any], foreign: set[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in obj.items():
        path = prefix + key
        rule = RECORD_FIELDS.get(path)
        if rule is None and not any(p.startswith(path + ".") for p in RECORD_FIELDS):
            continue  # not in the allow-list: not shown
        if rule == "detail":
            out[key] = _detail(value, record, foreign)
        elif rule in ("keep", "message"):
            out[key] = value
        elif isinstance(value, list):  # a list of nested parts (devices, tiers, exemplars, blockers)
            out[key] = [_part(v, path + ".", record, foreign) for v in value if isinstance(v, dict)]
    return out


def _detail(detail: Any, record: dict[str, Any], foreign: set[str]) -> dict[str, Any]:
    if not isinstance(detail, dict):
        return {}
    out: dict[str, Any] = {}
    for key, value in detail.items():
        if key in DETAIL_KEYS:
            out[key] = value
        elif key in NAMING_KEYS:
            if _owned(str(value), record):
                out[key] = value
            else:
                foreign.add(str(value))
                out[key] = OTHERS
    return out


def _owned(value: str, record: dict[str, Any]) -> bool:
    """Whether the value names only the record's own tenant or objects in its namespace."""
    if value in UNOWNED or value == record.get("tenant"):
        return True
    references = [m.group(0) for m in _REFERENCE.finditer(value)]
    return bool(references) and all(r.partition("/")[0] == record.get("namespace") for r in references)


def _scrub(text: str, names: set[str]) -> str:
    for name in sorted(names, key=len, reverse=True):  # a longer name first: "team-b/x" before "team-b"
        if name:
            text = text.replace(name, OTHERS)
    return text


def tenant_explanation(body: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """An explanation of the tenant's own decision, with the same allow-list: details of blockers
    and device verdicts filtered, and other tenants' names gone from every text."""
    foreign: set[str] = set()
    _part(record, "", record, foreign)  # the names the record's details hold
    out = dict(body)
    if isinstance(out.get("blockers"), list):  # flat: code, tier and the detail keys side by side
        out["blockers"] = [_detail(b, record, foreign) for b in out["blockers"]]
    if isinstance(out.get("devices"), list):
        out["devices"] = [{**d, "detail": _detail(d.get("detail"), record, foreign)} if isinstance(d, dict) else d
                          for d in out["devices"]]
    return _deep_scrub(out, foreign)


def _deep_scrub(value: Any, names: set[str]) -> Any:
    if isinstance(value, str):
        return _scrub(value, names)
    if isinstance(value, list):
        return [_deep_scrub(v, names) for v in value]
    if isinstance(value, dict):
        return {k: v if k in ("decision_id",) else _deep_scrub(v, names) for k, v in value.items()}
    return value
