"""Pure mapping from a (redacted) DecisionRecord to OTLP attributes, and verdict selection.

No OpenTelemetry objects here: the functions return plain attribute dicts and verdict lists, so
the schema can be tested without an SDK and the exporter stays a thin shell around them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, get_origin, get_type_hints

from audit.allocator.outcome import TierEvidence
from audit.records import DecisionRecord, TierSummary, record_value_bytes
from audit.telemetry import schema as s

AttributeValue = str | bool | int | float | list[str]

DEFAULT_MAX_VERDICTS = 64

# OTLP's AnyValue holds signed 64-bit integers only (int_value), while the store keeps seq and
# wait_ms as UInt64. The OpenTelemetry specification's attribute type mapping ("Integer values",
# specification/common/attribute-type-mapping.md) sends an integer outside int64 as string_value
# in decimal: exact, where a double would round anything past 2^53.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def otlp_int(value: int) -> int | str:
    """``value`` as an OTLP attribute carries it: itself within int64, else its decimal text."""
    return value if INT64_MIN <= value <= INT64_MAX else str(value)


def int_from_otlp(value: object) -> int:
    """The integer an attribute written by ``otlp_int`` holds; ValueError saying why for any other
    value: not an integer, or a text that is not the plain decimal of one outside int64 (a sender
    that writes ``"5"`` for 5 is refused, as the record's JSON is read strictly)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"is a {type(value).__name__}, not an integer")
    if isinstance(value, int):
        return value
    if not _DECIMAL.fullmatch(value):
        raise ValueError("is not an integer (an integer outside int64 travels as its decimal text)")
    number = int(value)
    if INT64_MIN <= number <= INT64_MAX:
        raise ValueError("is text, but an integer within int64 travels as int_value")
    return number


_DECIMAL = re.compile(r"-?(?:0|[1-9][0-9]{0,39})")  # digits enough for any 128-bit integer, no more


@dataclass(slots=True)
class Verdict:
    """One device verdict as exported: a record exemplar or a verdict handed in by the engine.

    ``position`` is the tier's place in ``record.tiers`` (tier indexes repeat when a pod has
    several requests), or None when the verdict matches no tier of the record.
    """

    position: int | None
    tier_index: int
    device: str
    node: str
    reason: str
    source: str
    detail: dict[str, str] = field(default_factory=dict)


@dataclass
class VerdictSelection:
    kept: list[Verdict]
    dropped_by_position: dict[int | None, int]

    @property
    def dropped(self) -> int:
        return sum(self.dropped_by_position.values())


# Root span attributes read straight from record fields, in the order they are sent; the
# direct encoder (audit.telemetry.otlpwire) walks this same table.
ROOT_FIELDS: tuple[tuple[str, str], ...] = (
    # first the fields that take few values across decisions (ROOT_STABLE of them): the direct
    # encoder keeps their encoding per combination of values
    (s.K8S_CLUSTER, "cluster"),
    (s.K8S_NAMESPACE, "namespace"),
    (s.SCHEMA_VERSION, "schema_version"),
    (s.ATTEMPT, "attempt"),
    (s.TENANT, "tenant"),
    (s.OUTCOME, "outcome"),
    (s.PREFERRED_MODEL, "preferred_model"),
    (s.ALLOCATED_MODEL, "allocated_model"),
    (s.TIER_INDEX, "tier_index"),
    (s.FALLBACK, "fallback"),
    (s.POLICY_VERSION, "policy_version"),
    (s.POLICY_DIGEST, "policy_digest"),
    (s.RETRY_CLASS, "retry_class"),
    (s.BACKOFF_MS, "backoff_ms"),
    (s.TRACK, "track"),
    (s.TEMPLATE_VERSION, "template_version"),
    (s.ENGINE_VERSION, "engine_version"),
    # then the ones that identify the decision
    (s.K8S_POD_NAME, "pod"),
    (s.K8S_POD_UID, "pod_uid"),
    (s.K8S_NODE, "node"),
    (s.DECISION_ID, "decision_id"),
    (s.SEQ, "seq"),
    (s.INPUT_DIGEST, "input_digest"),
    (s.OUTPUT_DIGEST, "output_digest"),
    (s.WAIT_MS, "wait_ms"),
    (s.STEPS, "steps"),
    (s.DURATION_US, "duration_us"),
    (s.MESSAGE, "message"),
    (s.CLAIMS, "claims"),
    (s.CLAIM_UIDS, "claim_uids"),
    (s.PREFERENCE, "preference"),
)
ROOT_STABLE = 17


def field_reader(names: Sequence[str]) -> Callable[[DecisionRecord], tuple[Any, ...]]:
    """A function returning a record's ``names`` fields as a tuple, in that order.

    Written out as attribute reads (``r.cluster, r.namespace, ...``) rather than
    ``operator.attrgetter``: the interpreter specialises each read of a slotted field, where the
    generic lookup costs several times as much, and the exporter reads some thirty fields of
    every decision."""
    reader: Callable[[DecisionRecord], tuple[Any, ...]] = _compiled(f"lambda r: ({_reads(names)})", {})
    return reader


def declared_field_reader(names: Sequence[str]) -> Callable[[DecisionRecord], tuple[Any, ...] | None]:
    """``field_reader``, but None when a value is not exactly of the class ``DecisionRecord``
    declares for its field (a bool where an int is declared, a str subclass): values of the
    declared classes encode alike when equal, so the tuple can key a cache of their encoding.
    The classes are checked in the same written-out form (``v[0].__class__ is c0 and ...``),
    several times cheaper than ``map(type, ...)``."""
    hints = get_type_hints(DecisionRecord)
    classes = {f"c{i}": get_origin(hints[name]) or hints[name] for i, name in enumerate(names)}
    checks = "".join(f" and v[{i}].__class__ is c{i}" for i in range(len(names)))
    reader: Callable[[DecisionRecord], tuple[Any, ...] | None] = _compiled(
        f"lambda r: v if (v := ({_reads(names)})){checks} else None", classes)
    return reader


def _reads(names: Sequence[str]) -> str:
    if not all(name.isidentifier() for name in names):
        raise ValueError(f"not attribute names: {list(names)}")
    return "".join(f"r.{name}, " for name in names)


def _compiled(source: str, names: dict[str, Any]) -> Any:
    # the source is made of our own field names, each checked to be an identifier
    return eval(source, names)


root_field_values = field_reader([name for _, name in ROOT_FIELDS])


def root_attributes(
    record: DecisionRecord,
    labels: Mapping[str, str],
    redacted_paths: Sequence[str],
    selection: VerdictSelection,
    why_url: str = "",
) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {}
    # empty strings and lists say nothing in an explorer; the record attribute keeps them
    for (key, _), value in zip(ROOT_FIELDS, root_field_values(record), strict=True):
        if value != "" and value != []:
            attrs[key] = list(value) if isinstance(value, list) else _int(value)
    for key, value in root_extras(record, selection, why_url):
        if value != "" and value != []:
            attrs[key] = value
    if redacted_paths:
        attrs[s.REDACTED] = list(redacted_paths)
    for key in sorted(labels):
        attrs[s.K8S_POD_LABEL_PREFIX + key] = labels[key]
    return attrs


def root_extras(
    record: DecisionRecord, selection: VerdictSelection, why_url: str
) -> tuple[tuple[str, AttributeValue], ...]:
    """The root attributes after ``ROOT_FIELDS``: derived values, then the record itself."""
    return (
        (s.DEVICES, [d.device for d in record.devices]),
        (s.BLOCKERS, [f"{b.code}@{b.tier}" for b in record.blockers]),
        (s.VERDICTS_EXPORTED, len(selection.kept)),
        (s.VERDICTS_DROPPED, selection.dropped),
        (s.WHY_URL, why_url),
        (s.RECORD, record_value_bytes(record).decode()),
    )


class _Lazy(Mapping[str, AttributeValue]):
    """Attributes built as a dict on first read (the SDK route reads them); the direct encoder
    writes the same attributes from the inputs kept here without building the dict."""

    __slots__ = ("_built",)

    def _build(self) -> dict[str, AttributeValue]:
        raise NotImplementedError

    def _dict(self) -> dict[str, AttributeValue]:
        built: dict[str, AttributeValue] | None = getattr(self, "_built", None)
        if built is None:
            built = self._built = self._build()
        return built

    def __getitem__(self, key: str) -> AttributeValue:
        return self._dict()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self._dict())


class TierAttributes(_Lazy):
    __slots__ = ("record", "tier", "dropped", "result")

    def __init__(self, record: DecisionRecord, tier: TierSummary, dropped: int, result: str) -> None:
        self.record, self.tier, self.dropped, self.result = record, tier, dropped, result

    def _build(self) -> dict[str, AttributeValue]:
        return tier_attributes(self.record, self.tier, self.dropped, self.result)


class VerdictAttributes(_Lazy):
    __slots__ = ("decision_id", "verdict")

    def __init__(self, decision_id: str, verdict: Verdict) -> None:
        self.decision_id, self.verdict = decision_id, verdict

    def _build(self) -> dict[str, AttributeValue]:
        return verdict_attributes(self.decision_id, self.verdict)


class RootAttributes(_Lazy):
    """The root span's attributes, built on first read like the tier's and the verdict's."""

    __slots__ = ("record", "labels", "paths", "selection", "why_url")

    def __init__(self, record: DecisionRecord, labels: Mapping[str, str], paths: Sequence[str],
                 selection: VerdictSelection, why_url: str) -> None:
        self.record, self.labels, self.paths, self.selection, self.why_url = record, labels, paths, selection, why_url

    def _build(self) -> dict[str, AttributeValue]:
        return root_attributes(self.record, self.labels, self.paths, self.selection, self.why_url)


def _int(value: AttributeValue) -> AttributeValue:
    """``otlp_int`` of an int, any other value (of a record not built by the engine) as it is."""
    return otlp_int(value) if value.__class__ is int else value


def tier_attributes(
    record: DecisionRecord, tier: TierSummary, dropped: int, result: str = ""
) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {
        s.DECISION_ID: record.decision_id,
        s.TIER_INDEX: _int(tier.index),
        s.TIER_REQUEST: tier.request,
        s.TIER_MODEL: tier.model,
        s.TIER_CONSIDERED: _int(tier.considered),
        s.TIER_NODES_EVALUATED: _int(tier.nodes_evaluated),
        s.TIER_VERDICTS_DROPPED: dropped,
    }
    if result:
        attrs[s.TIER_RESULT] = result
    for code in sorted(tier.reasons):
        attrs[s.TIER_REASON_PREFIX + code] = _int(tier.reasons[code])
    if record.blockers:
        attrs.update(tier_blocker_attributes(record, tier.index))
    return attrs


def tier_blocker_attributes(record: DecisionRecord, tier_index: int) -> dict[str, AttributeValue]:
    """The tier's blocker attributes, the last of its span's: their codes, then each one's
    parameters (empty when no blocker names the tier). A code the tier has more than once (a
    ``quota_exhausted`` per model whose quota closed it) keys its n-th blocker's parameters under
    ``<code>.<n>.`` from the second on, so none overwrites another's."""
    blockers = [b for b in record.blockers if b.tier == tier_index]
    attrs: dict[str, AttributeValue] = {}
    if blockers:
        attrs[s.TIER_BLOCKERS] = [b.code for b in blockers]
        seen: dict[str, int] = {}
        for b in blockers:
            n = seen[b.code] = seen.get(b.code, 0) + 1
            prefix = f"{s.TIER_BLOCKER_PREFIX}{b.code}." if n == 1 else f"{s.TIER_BLOCKER_PREFIX}{b.code}.{n}."
            for key in sorted(b.detail):
                attrs[prefix + key] = _scalar(b.detail[key])
    return attrs


def _scalar(value: object) -> AttributeValue:
    """A blocker parameter as an attribute value: numbers and booleans as they are, anything
    else as its text (parameters are flat in practice; a nested one still arrives readable)."""
    if isinstance(value, bool | float | str):
        return value
    if isinstance(value, int):
        return otlp_int(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def tier_results(record: DecisionRecord) -> list[str]:
    """What became of each tier of ``record.tiers``: ``selected`` (the allocation came from it),
    ``exhausted`` (tried and could not serve the pod) or ``not_tried`` (the search ended before
    it, or it was never evaluated). Tiers after the selected one were not tried; without a
    selection, a tier counts as tried when it considered a device or met a reason or a blocker."""
    selected = record.tier_index
    if selected >= 0:
        return [_SELECTED if tier.index == selected else _EXHAUSTED if tier.index < selected else _NOT_TRIED
                for tier in record.tiers]
    blocked = {b.tier for b in record.blockers} if record.blockers else ()
    return [_EXHAUSTED if tier.considered or tier.reasons or tier.index in blocked else _NOT_TRIED
            for tier in record.tiers]


_SELECTED, _EXHAUSTED, _NOT_TRIED = s.TIER_SELECTED, s.TIER_EXHAUSTED, s.TIER_NOT_TRIED


def tier_status_message(record: DecisionRecord, tier: TierSummary) -> str:
    """Why an exhausted tier failed, for its span status: reason counts, largest first, then
    its blockers (``H100 exhausted: in_use 6, unhealthy 2; blocked: insufficient_on_node``)."""
    counts = sorted(((n, code) for code, n in tier.reasons.items() if code != "not_reached"), key=lambda c: (-c[0], c[1]))
    text = f"{tier.model or tier.request or f'tier {tier.index}'} exhausted"
    if counts:
        text += ": " + ", ".join(f"{code} {n}" for n, code in counts)
    blockers = [b.code for b in record.blockers if b.tier == tier.index]
    if blockers:
        text += "; blocked: " + ", ".join(blockers)
    return text


def verdict_attributes(decision_id: str, verdict: Verdict) -> dict[str, AttributeValue]:
    attrs: dict[str, AttributeValue] = {
        s.DECISION_ID: decision_id,
        s.TIER_INDEX: _int(verdict.tier_index),
        s.VERDICT_DEVICE: verdict.device,
        s.VERDICT_NODE: verdict.node,
        s.VERDICT_REASON: verdict.reason,
        s.VERDICT_SOURCE: verdict.source,
    }
    for key in sorted(verdict.detail):
        attrs[s.VERDICT_DETAIL_PREFIX + key] = verdict.detail[key]
    return attrs


def verdict_body(verdict: Verdict) -> str:
    where = f" on {verdict.node}" if verdict.node else ""
    return f"tier {verdict.tier_index}: {verdict.device}{where}: {verdict.reason}"


def tier_position(record: DecisionRecord, evidence: TierEvidence) -> int | None:
    """The tier of ``record.tiers`` that engine evidence belongs to: by request name (plain, or
    prefixed with the claim name as multi-claim records write it), else by a unique tier index."""
    claim_name = evidence.claim.split("/", 1)[-1]
    names = {evidence.request, f"{claim_name}/{evidence.request}"}
    by_name = [i for i, tier in enumerate(record.tiers) if tier.request in names]
    if by_name:
        return by_name[0]
    by_index = [i for i, tier in enumerate(record.tiers) if tier.index == evidence.subrequest_index]
    return by_index[0] if len(by_index) == 1 else None


def select_verdicts(
    record: DecisionRecord, extra: Sequence[TierEvidence], limit: int
) -> VerdictSelection:
    """Exemplars first (tier order), then extra verdicts not already present, at most ``limit``.

    Extra verdicts were evaluated on the decision's node. Everything past the bound is counted
    per tier position, never silently lost.
    """
    candidates: list[Verdict] = []
    if not extra:  # the usual case: the record's exemplars only, nothing to deduplicate
        for position, tier in enumerate(record.tiers):
            for ex in tier.exemplars:
                # the detail is only read from here on (redaction builds new verdicts), so not copied
                candidates.append(Verdict(position, tier.index, ex.device, ex.node, ex.reason, "exemplar", ex.detail))
        if len(candidates) <= limit:
            return VerdictSelection(candidates, {})
        candidates = []
    seen: set[tuple[int | None, str]] = set()
    for position, tier in enumerate(record.tiers):
        for ex in tier.exemplars:
            candidates.append(Verdict(position, tier.index, ex.device, ex.node, ex.reason, "exemplar", dict(ex.detail)))
            seen.add((position, ex.device))
    for evidence in extra:
        joined = tier_position(record, evidence)
        for v in evidence.verdicts:
            key = (joined, v.device)
            if key in seen:
                continue
            seen.add(key)
            candidates.append(
                Verdict(joined, evidence.subrequest_index, v.device, record.node, v.reason, "engine", v.detail_dict())
            )
    kept = candidates[: max(limit, 0)]
    dropped: dict[int | None, int] = {}
    for left_out in candidates[len(kept):]:
        dropped[left_out.position] = dropped.get(left_out.position, 0) + 1
    return VerdictSelection(kept, dropped)
