"""Decision records: the unit of evidence ClaimTrail stores, exports, replays and explains.

A record is one allocation attempt for one pod's claims at a world sequence number. Everything
that reads or writes decisions (the engine, the store, the API, OTLP export and receive, replay)
speaks this one shape. Records carry two digests over canonical JSON: ``input_digest`` names the
inputs the engine saw, ``output_digest`` the outcome and evidence it produced. Fields measured
from a clock (``duration_us``) are excluded from the output digest so a replay can match.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import orjson

from audit.canonical import digest, escaped_text, fast_canonical_json, lone_surrogate, shown_text

SCHEMA_VERSION = 1


class Reason(StrEnum):
    """Closed per-device vocabulary, in upstream check order, then cluster level (``audit.explain.reasons`` renders them)."""

    SELECTED = "selected"
    IN_USE = "in_use"
    CLASS_SELECTOR_MISMATCH = "class_selector_mismatch"
    REQUEST_SELECTOR_MISMATCH = "request_selector_mismatch"
    CEL_ERROR = "cel_error"
    NODE_MISMATCH = "node_mismatch"
    CAPACITY_INSUFFICIENT = "capacity_insufficient"
    COUNTERS_EXHAUSTED = "counters_exhausted"
    UNHEALTHY = "unhealthy"
    TAINT_NOT_TOLERATED = "taint_not_tolerated"
    CONSTRAINT_UNSATISFIED = "constraint_unsatisfied"
    POOL_INCOMPLETE = "pool_incomplete"
    POOL_INVALID = "pool_invalid"
    NOT_REACHED = "not_reached"
    QUOTA_EXHAUSTED = "quota_exhausted"
    FAIR_SHARE_DEFERRED = "fair_share_deferred"
    NODE_FILTERED = "node_filtered"
    BINDING_CONFLICT = "binding_conflict"
    STALE_SLICE = "stale_slice"


class Blocker(StrEnum):
    """Tier-level reasons a whole preference tier could not be used."""

    QUOTA_EXHAUSTED = "quota_exhausted"
    FAIR_SHARE_DEFERRED = "fair_share_deferred"
    INSUFFICIENT_ON_NODE = "insufficient_on_node"
    NOT_REQUESTED = "not_requested"
    # Explanations only: a device-plugin pod asked about a model it neither got nor was turned down
    # for. It names no model (its GPUs are a count of nvidia.com/gpu on a node), so no preference
    # list leaves the model out.
    NO_MODEL_CHOICE = "no_model_choice"
    # Not a tier's: the placement went ahead of older pending pods of its tenant (tier -1).
    QUEUE_SKIP = "queue_skip"
    # Adaptive fallback: the expected time until the first choice fits, and the wait-or-fall-back
    # choice made from it (on tier 0; audit.scheduler.adaptive).
    FALLBACK_ESTIMATE = "fallback_estimate"
    # Reservations for long-pending pods (audit/scheduler/reservations.py): made, waited on,
    # released by the placement, not possible, and another pod kept off reserved devices (tier -1).
    RESERVATION_MADE = "reservation_made"
    RESERVATION_WAITING = "reservation_waiting"
    RESERVATION_RELEASED = "reservation_released"
    RESERVATION_UNAVAILABLE = "reservation_unavailable"
    RESERVATION_HELD = "reservation_held"
    # Reclaim (audit/scheduler/reclaim.py): the preemptor's quota (or fair share) on the tier it
    # reclaims, and one per preempted pod (tier -1).
    RECLAIM = "reclaim"
    RECLAIM_VICTIM = "reclaim_victim"


# What a tenant may see of a verdict's ``detail`` (``audit.api.tenant_view`` drops every other key),
# kept beside the codes so that a new reason and the detail keys it records are added together.
# Keys whose values describe devices, nodes, selectors, quotas and counts, never another tenant's
# object (audit/allocator/search.py and audit/scheduler record them):
DETAIL_KEYS = frozenset({
    "key", "value", "effect", "taint", "selector", "expression", "error", "capacity", "problem", "counterSet",
    "counter", "constraint", "attribute", "pool", "node", "backtracked", "device", "generation", "free", "bind_seq",
    "model", "used", "requested", "nominal", "limit", "lendable", "over_quota", "request", "count",
    "nodes_with_capacity",
    "fallback_mode", "fallback_after_ms", "held_eq", "entitlement_eq", "waiting_held_eq", "waiting_entitlement_eq",
    # explanation blockers (audit/explain) carry these next to code and tier
    "code", "tier", "tenant_share", "other_share", "best_node", "best", "preference", "model_nodes",
    # per-device verdicts of an explanation: why a node or a claim constraint ruled a device out
    "cause", "aborted_by", "requests",
    # ... and, beneath a tier the policy closed, what the device's own checks found
    "verdict",
    # the retry budget and queue skips of the decision engine (audit/scheduler)
    "bind_failure", "max_bind_failures", "older_pending", "oldest_wait_ms",
    # the adaptive fallback's estimate: the choice, the expected wait and how much history it read
    "choice", "basis", "expected_free_ms", "waited_ms", "max_wait_ms", "history", "running", "recheck_after_ms",
    # ... and what it waited on: devices, or the tenant's own quota (how much it lacks, both estimates)
    "wait_on", "quota_short", "quota_free_ms", "devices_free_ms",
    # ... and the devices its tenant's device-plugin pods ahead of it wait for (its quota goes to them first)
    "ahead",
    # reservations (audit/scheduler/reservations.py); the pod a reservation is for is ``pod``
    "missing", "held", "reserved_ms", "on_reserved_node", "reservations",
    # reclaim (audit/scheduler/reclaim.py); the victim pod and its tenant are ``pod`` and ``tenant``
    "min_runtime_ms", "victims", "device_ms", "runtime_ms", "requested_eq", "released_eq",
})
# detail keys whose value is a namespaced object's "ns/name" (a pod or a claim)
OBJECT_KEYS = frozenset({"holder", "claim", "pod", "oldest"})
# detail keys whose value names a tenant or a namespaced object (``by`` in prose): shown when it is
# the record's own, else as "(others)"
NAMING_KEYS = OBJECT_KEYS | {"by", "tenant", "waiting_tenant", "other_tenant"}


class Outcome(StrEnum):
    ALLOCATED = "allocated"
    UNSCHEDULABLE = "unschedulable"
    DEFERRED = "deferred"
    ERROR = "error"
    # no node could take the pod, so it reclaimed devices by preempting pods of tenants holding
    # beyond their quota or fair share (their eviction follows; the pod's next attempt places it)
    PREEMPTED = "preempted"


class RetryClass(StrEnum):
    """How a failed attempt continues: retryable classes back off, terminal ones stop."""

    NONE = ""
    BINDING_CONFLICT = "binding_conflict"
    STALE_SLICE = "stale_slice"
    UNHEALTHY = "unhealthy"
    NODE_LOST = "node_lost"
    UNSCHEDULABLE = "unschedulable"
    QUOTA = "quota"
    FAIR_SHARE = "fair_share"
    TERMINAL = "terminal"


class Track(StrEnum):
    DRA = "dra"
    DEVICE_PLUGIN = "device-plugin"


class _Slotted:
    """Base of the record dataclasses: reading ``__dict__`` gives None instead of raising.

    orjson writes a dataclass by first asking the instance for its ``__dict__`` and, when the
    class has ``__slots__``, then writes the declared fields (orjson's ``serialize/per_type/
    dataclass.rs``). On a slotted instance that first lookup raises AttributeError, and making
    and discarding the error (its message formatted each time) costs about as much as writing the
    fields. A class-level None answers the lookup without an error; instances still have no dict
    of their own and refuse attributes besides their fields.
    """

    __slots__ = ()
    __dict__ = None  # type: ignore[assignment]


# Records and their parts have slots: a simulated day keeps every record alive, and a per-instance
# dict would add about 1.6 KB to each record.
@dataclass(slots=True)
class DeviceRef(_Slotted):
    """A device handed to the pod: identity ``driver/pool/device``, where and what it is."""

    device: str
    node: str
    model: str
    request: str


@dataclass(slots=True)
class Exemplar(_Slotted):
    """One device verdict kept in the summary; full verdicts come back by replay."""

    device: str
    node: str
    reason: str
    detail: dict[str, str] = field(default_factory=dict)


# A device-plugin pod's one tier asks for GPUs of whatever model its nodes hold; a tier whose
# selectors select no known model is labelled "none".
ANY_MODEL, NO_MODEL = "any", "none"


def label_models(label: str) -> list[str]:
    """The device models a tier label names (a record's ``preference`` entry or a tier's
    ``model``): ``A100|H100|L40S`` for a tier of several, none for ``ANY_MODEL`` or ``NO_MODEL``."""
    return [m.strip() for m in label.split("|") if m.strip() and m.strip() not in (ANY_MODEL, NO_MODEL)]


@dataclass(slots=True)
class TierSummary(_Slotted):
    """Evidence for one preference tier (a firstAvailable subrequest, or the only request)."""

    index: int
    request: str
    model: str  # the model, "A100|H100|L40S" for a tier of several, ANY_MODEL or NO_MODEL
    considered: int
    reasons: dict[str, int] = field(default_factory=dict)
    exemplars: list[Exemplar] = field(default_factory=list)
    nodes_evaluated: int = 0


@dataclass(slots=True)
class TierBlocker(_Slotted):
    code: str
    tier: int
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class DecisionRecord(_Slotted):
    decision_id: str
    cluster: str
    seq: int
    time: str
    attempt: int
    tenant: str
    namespace: str
    pod: str
    pod_uid: str
    claims: list[str]
    claim_uids: list[str]
    preference: list[str]
    policy_version: str
    policy_digest: str
    outcome: str
    node: str = ""
    devices: list[DeviceRef] = field(default_factory=list)
    tier_index: int = -1
    preferred_model: str = ""
    allocated_model: str = ""
    fallback: bool = False
    tiers: list[TierSummary] = field(default_factory=list)
    blockers: list[TierBlocker] = field(default_factory=list)
    retry_class: str = ""
    backoff_ms: int = 0
    wait_ms: int = 0
    steps: int = 0
    duration_us: int = 0
    track: str = Track.DRA.value
    template_version: str = ""
    message: str = ""
    engine_version: str = ""
    input_digest: str = ""
    output_digest: str = ""
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DecisionRecord:
        """Build from trusted dicts (our own JSONL). Untrusted input goes through ``validate_record``."""
        d = dict(data)
        d["devices"] = [DeviceRef(**x) for x in d.get("devices", [])]
        d["tiers"] = [
            TierSummary(**{**t, "exemplars": [Exemplar(**e) for e in t.get("exemplars", [])]})
            for t in d.get("tiers", [])
        ]
        d["blockers"] = [TierBlocker(**b) for b in d.get("blockers", [])]
        return cls(**d)

    def compute_output_digest(self) -> str:
        # record_dict, not to_dict: asdict's generic deep copy is most of the cost, and ingest
        # digests every record it is sent to check it against its declared digest
        return digest(output_view(record_dict(self)))

    def seal(self) -> DecisionRecord:
        """Fill ``output_digest`` from the record's own content; returns self for chaining."""
        self.output_digest = self.compute_output_digest()
        return self


# Fields left out of the output digest: the digest itself and anything measured from a clock.
OUTPUT_DIGEST_EXCLUDED = frozenset({"output_digest", "duration_us"})


def output_view(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in OUTPUT_DIGEST_EXCLUDED}


def record_dict(r: DecisionRecord) -> dict[str, Any]:
    """The record as plain JSON data: the value ``record_text`` writes (``json.loads`` of it, short
    of parsing), a new dict that shares nothing mutable with the record, so a caller may change it.

    For a record of declared types that is ``r.to_dict()`` (the tests compare the two on every
    record of a simulation); it is built by hand because ``dataclasses.asdict`` walks every value
    generically and costs several times as much. The open maps (a verdict's ``detail``) may hold
    any value; what is not JSON's own there is written as its JSON value: a tuple as a list, a
    dataclass as its fields, so the API's tenant view and redaction, which read them as JSON, see
    what is stored and exported. A value JSON has no form for (a set, say) is a TypeError."""
    return {
        "decision_id": r.decision_id, "cluster": r.cluster, "seq": r.seq, "time": r.time, "attempt": r.attempt,
        "tenant": r.tenant, "namespace": r.namespace, "pod": r.pod, "pod_uid": r.pod_uid,
        "claims": list(r.claims), "claim_uids": list(r.claim_uids), "preference": list(r.preference),
        "policy_version": r.policy_version, "policy_digest": r.policy_digest, "outcome": r.outcome,
        "node": r.node,
        "devices": [{"device": d.device, "node": d.node, "model": d.model, "request": d.request} for d in r.devices],
        "tier_index": r.tier_index, "preferred_model": r.preferred_model, "allocated_model": r.allocated_model,
        "fallback": r.fallback,
        "tiers": [{"index": t.index, "request": t.request, "model": t.model, "considered": t.considered,
                   "reasons": dict(t.reasons),
                   "exemplars": [{"device": e.device, "node": e.node, "reason": e.reason, "detail": _plain_map(e.detail)}
                                 for e in t.exemplars],
                   "nodes_evaluated": t.nodes_evaluated} for t in r.tiers],
        "blockers": [{"code": b.code, "tier": b.tier, "detail": _plain_map(b.detail)} for b in r.blockers],
        "retry_class": r.retry_class, "backoff_ms": r.backoff_ms, "wait_ms": r.wait_ms, "steps": r.steps,
        "duration_us": r.duration_us, "track": r.track, "template_version": r.template_version,
        "message": r.message, "engine_version": r.engine_version, "input_digest": r.input_digest,
        "output_digest": r.output_digest, "schema_version": r.schema_version,
    }


_ATOMIC = frozenset({str, int, float, bool, type(None)})


def _plain_map(values: dict[str, Any]) -> dict[str, Any]:
    """A copy of an open map with every value as plain JSON data; a map of scalars (nearly every
    one) is copied as it is."""
    if _ATOMIC.issuperset(map(type, values.values())):
        return dict(values)
    return {k: _plain(v) for k, v in values.items()}


def _plain(value: Any) -> Any:
    """``value`` as plain JSON data (a new container wherever it has one)."""
    cls = value.__class__
    if cls in _ATOMIC:
        return value
    if cls is dict:
        return {k: _plain(v) for k, v in value.items()}
    if cls is list or cls is tuple:
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    # subclasses of the plain types (a str enum member, say) are kept as they are: JSON writes their value
    if isinstance(value, str | int | float):
        return value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    raise TypeError(f"DecisionRecord: a value of type {cls.__name__} has no JSON form")


def check_output_digest(record: DecisionRecord) -> None:
    """RecordError when ``record`` declares an ``output_digest`` its content does not hash to: it
    was changed after it was sealed. History is append-only, so such a record, once stored, could
    never be replaced, and every replay would only report it edited; every way records come in
    refuses it instead. A record without a digest (not sealed) is for the caller to judge."""
    if record.output_digest:
        computed = record.compute_output_digest()
        if record.output_digest != computed:
            raise RecordError("output_digest",
                              f"declared {record.output_digest} but the record's content digests to {computed}")


def decision_id(cluster: str, claim_uid: str, attempt: int) -> str:
    """Deterministic id: the same attempt re-sent from anywhere lands on the same key (UUID text form)."""
    h = hashlib.sha256(f"{cluster}\x00{claim_uid}\x00{attempt}".encode()).hexdigest()[:32]
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def to_jsonl(records: list[DecisionRecord]) -> str:
    return "".join(record_text(r) + "\n" for r in records)


class RecordError(ValueError):
    """An incoming record failed validation; ``path`` names the field, as quarantine stores it,
    and ``reason`` says what is wrong with it."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"DecisionRecord: {path}: {message}" if path else f"DecisionRecord: {message}")
        self.path = path
        self.reason = message


# The canonical text of a record -------------------------------------------------------------
#
# By definition ``canonical_json(record.to_dict())``: what the store keeps and the output digest
# is taken over (less two fields); an exported decision carries the same value in declared field
# order (``record_value_bytes``). Encoding it is most of what ingest costs in Python, so orjson
# writes it from the record itself under the canonical encoder's conditions
# (``audit.canonical.fast_canonical_json``), calling back into a function generated from the
# record dataclasses only to open each dataclass into its fields (no ``dataclasses.asdict`` deep
# copy, no intermediate tree). A record holding what that path does not write as json would (a
# value not of its declared type, a null, a float in one of the forms the two write differently)
# is written by json, so the bytes never differ from the definition;
# ``tests/store/test_record_text.py`` holds them equal. A text UTF-8 cannot hold (a lone
# surrogate) has no canonical form: such a record is refused, the field named
# (``audit.canonical.lone_surrogate``).


def _opener_source(classes: list[type], names: dict[type, str]) -> str:
    """Source of the function that gives orjson, for an instance of one of ``classes`` (exactly
    that class, not a subclass), the dict ``dataclasses.asdict`` would make of it one level deep;
    nested dataclasses come back to it as orjson reaches them. Anything else raises TypeError."""
    lines = ["def _opened(o):", "    t = type(o)"]
    for cls in classes:
        body = ", ".join(f"{name!r}: o.{name}" for name in sorted(f.name for f in dataclasses.fields(cls)))
        lines.append(f"    if t is {names[cls]}:\n        return {{{body}}}")
    lines.append("    raise TypeError(f'{t.__name__} is not a record class')")
    return "\n".join(lines) + "\n"


def _build_opener(root: type) -> Callable[[Any], dict[str, Any]]:
    classes: list[type] = []

    def visit(cls: type) -> None:
        if cls in classes:
            return
        classes.append(cls)
        for hint in typing.get_type_hints(cls).values():
            for candidate in (hint, *typing.get_args(hint)):
                if dataclasses.is_dataclass(candidate) and isinstance(candidate, type):
                    visit(candidate)

    visit(root)
    names = {cls: f"_{cls.__name__}" for cls in classes}
    namespace: dict[str, Any] = {name: cls for cls, name in names.items()}
    exec(_opener_source(classes, names), namespace)  # noqa: S102 - our own source
    opened: Callable[[Any], dict[str, Any]] = namespace["_opened"]
    return opened


_OPENED = _build_opener(DecisionRecord)


def _fields_dict(value: Any) -> dict[str, Any]:
    """json's hook for the dataclasses in a record: their fields, one level deep."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


# the settings of audit.canonical, with the record's dataclasses opened by the hook above
_JSON_TEXT = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                              default=_fields_dict).encode


def record_bytes(record: DecisionRecord) -> bytes:
    """The record's canonical JSON as UTF-8: byte for byte ``canonical_json(record.to_dict())``.

    RecordError naming the field when a text in it has no UTF-8 form (a lone surrogate, which a
    Python string can hold): such a record has no canonical text, and nothing can store or send it
    as it is (``escaped_record_text`` gives it in a form that can be kept)."""
    out = fast_canonical_json(record, _OPENED)
    if out is not None:
        return out
    try:
        return _JSON_TEXT(record).encode()
    except UnicodeEncodeError:
        raise _not_utf8(record) from None


def record_text(record: DecisionRecord) -> str:
    """``record_bytes`` as text (and refused alike)."""
    out = fast_canonical_json(record, _OPENED)
    if out is not None:
        return out.decode()
    text: str = _JSON_TEXT(record)
    try:
        text.encode()
    except UnicodeEncodeError:
        raise _not_utf8(record) from None
    return text


def record_value_bytes(record: DecisionRecord) -> bytes:
    """The record as JSON with its fields in declared order (nested maps sorted): the same JSON
    value as ``record_bytes``, not the same bytes, for a receiver that parses it (the
    ``claimtrail.record`` attribute of an exported decision). orjson writes the dataclasses
    natively, with no check of its output, at about half the cost of the canonical text, which an
    exporter pays for every decision; what it does not write natively (an integer past 64 bits, a
    key that is not a string, a text UTF-8 cannot hold) is written, or refused, as ``record_bytes``."""
    try:
        return orjson.dumps(record, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return record_bytes(record)


def escaped_record_text(record: DecisionRecord) -> str:
    """``record_text``, also for a record that has none: each lone surrogate written as its JSON
    escape (``\\ud800``), which is valid UTF-8 and reads back as the same string; for keeping a
    record that cannot be stored (quarantine) or letting the receiving end refuse it."""
    return escaped_text(_JSON_TEXT(record))


def record_problem(record: DecisionRecord, error: RecordError) -> str:
    """``error`` of ``record`` as one line naming the decision and the field."""
    return f"decision {shown_text(record.decision_id)}: field {error.path}: {error.reason}"


def _not_utf8(record: DecisionRecord) -> RecordError:
    """The error for the first text of ``record`` (a value, or a key of a map) that UTF-8 cannot hold."""
    # none found: no text of the record's own, a value of another type wrote the surrogate
    return _lone_surrogate(record) or RecordError("", "not valid UTF-8 text")


def _lone_surrogate(value: Any) -> RecordError | None:
    """The error for the first text under ``value`` (a record, or its JSON parsed) that UTF-8
    cannot hold, if any."""
    found = lone_surrogate(value)
    return None if found is None else RecordError(*found)


def record_json_schema() -> dict[str, Any]:
    """The documented JSON schema of a record (what `claimtrail schema --record` prints)."""
    from pydantic import TypeAdapter

    return TypeAdapter(DecisionRecord).json_schema()


def validate_record(data: Any, text: bytes | None = None) -> DecisionRecord:
    """Strictly parse an untrusted record; errors name the first failing field path.

    ``text``: the JSON text ``data`` was parsed from, when the caller has it: validated as it is
    instead of ``data`` written out again (a third of the cost of validating a record). Only a
    text that is plainly UTF-8 (no NUL byte, no byte-order mark) is taken, since the validator
    reads nothing else while ``json.loads`` also decodes UTF-16 and UTF-32; any other is written
    out again from ``data``, so the answer is the same either way."""
    from pydantic import ValidationError

    if not isinstance(data, dict):
        raise RecordError("", f"expected a JSON object, got {type(data).__name__}")
    source = text if text is not None and _plain_utf8(text) else json.dumps(data)
    try:
        # strict JSON mode: objects become dataclasses, but "5" never silently becomes 5
        rec = _adapter().validate_json(source, strict=True)
    except ValidationError as exc:
        err = exc.errors()[0]
        # a JSON escape of a lone surrogate (\ud800) that json.loads took: name the field, not the column
        surrogate = _lone_surrogate(data) if err["type"] == "json_invalid" else None
        raise surrogate or RecordError(".".join(str(p) for p in err["loc"]), err["msg"]) from None
    if rec.outcome not in _OUTCOMES:
        raise RecordError("outcome", f"unknown outcome {rec.outcome!r}")
    if rec.track not in _TRACKS:
        raise RecordError("track", f"unknown track {rec.track!r}")
    problem = cluster_name_problem(rec.cluster)
    if problem:
        raise RecordError("cluster", problem)
    problem = tenant_name_problem(rec.tenant)
    if problem:
        raise RecordError("tenant", problem)
    problem = policy_version_problem(rec.policy_version)
    if problem:
        raise RecordError("policy_version", problem)
    return rec


_OUTCOMES = frozenset(o.value for o in Outcome)
_TRACKS = frozenset(t.value for t in Track)


def _plain_utf8(text: bytes) -> bool:
    return b"\x00" not in text and not text.startswith(b"\xef\xbb\xbf")


# The name aggregates give every tenant but the caller's: a tenant of that name would be mistaken
# for the others, and the others for it.
OTHERS_TENANT = "(others)"


def tenant_name_problem(name: str) -> str:
    """Why ``name`` cannot be a tenant ('' when it can): the reserved aggregate name, or control
    characters (they would corrupt logs, metric labels and the one-line messages that name it)."""
    if name == OTHERS_TENANT:
        return f"{OTHERS_TENANT!r} is reserved for the other tenants in aggregates"
    return control_characters_problem(name, "a tenant name")


def cluster_name_problem(name: str) -> str:
    """Why ``name`` cannot be a cluster's ('' when it can): empty — a producer resumes from the last
    seq stored for its cluster, which it asks for by name, and the API cannot be asked for no
    name — or control characters, as in a tenant name."""
    if not name:
        return "must not be empty"
    return control_characters_problem(name, "a cluster name")


def policy_version_problem(version: str) -> str:
    """Why ``version`` cannot be a record's policy version ('' when it can): control characters,
    as in a tenant name (a version is asked for by name, in filters and messages alike)."""
    return control_characters_problem(version, "a policy version")


def control_characters_problem(name: str, what: str) -> str:
    """Why ``name`` cannot be ``what`` for its control characters ('' when it has none)."""
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in name):
        return f"{name!r}: control characters are not allowed in {what}"
    return ""


_ADAPTER: Any = None


def _adapter() -> Any:
    global _ADAPTER
    if _ADAPTER is None:
        from pydantic import TypeAdapter

        _ADAPTER = TypeAdapter(DecisionRecord)
    return _ADAPTER
