"""Typed, immutable views of the resource.k8s.io objects the allocator reads, with API defaulting.

``parse_object(raw)`` turns a raw dict (as loaded from YAML/JSON) into one of the dataclasses
below and applies the API server's defaulting (``allocationMode: ExactCount``, ``count: 1``,
toleration ``operator: Equal``). Wrong types raise ``ModelError`` naming the object and the
field path, e.g. ``ResourceSlice node-1: spec.devices[2].attributes.memory: expected one of
int/bool/string/version``. Semantic validation (limits, name syntax) is ``audit.dra.validate``'s
job; this module only guarantees that every field has the type the allocator relies on.
Quantities stay strings here; the allocator parses them with ``audit.dra.quantity``. Raw dicts
stay reachable (``raw``) where results must echo API fields byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from audit.canonical import equality_key
from audit.frozen import fast_init

ATTRIBUTE_KINDS = ("int", "bool", "string", "version", "ints", "bools", "strings", "versions")
SCALAR_KINDS = ("int", "bool", "string", "version")


class ModelError(ValueError):
    """A field has the wrong type; the message names the object and the field path."""


# --------------------------------------------------------------------------- field readers


class _Reader:
    """Reads typed fields from a raw dict, reporting ``<object>: <path>: <problem>`` on mismatch."""

    def __init__(self, obj: str) -> None:
        self.obj = obj

    def fail(self, path: str, message: str) -> ModelError:
        return ModelError(f"{self.obj}: {path}: {message}")

    def mapping(self, value: Any, path: str) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(path, f"expected an object, got {_type_name(value)}")
        return value

    def listing(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(path, f"expected a list, got {_type_name(value)}")
        return value

    def string(self, value: Any, path: str, default: str = "") -> str:
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {_type_name(value)}")
        return value

    def opt_bool(self, value: Any, path: str) -> bool | None:
        if value is None:
            return None
        if not isinstance(value, bool):
            raise self.fail(path, f"expected a boolean, got {_type_name(value)}")
        return value

    def integer(self, value: Any, path: str, default: int) -> int:
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {_type_name(value)}")
        return value

    def quantity(self, value: Any, path: str) -> str:
        # YAML turns `count: 4` style quantities into numbers; Kubernetes accepts both.
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise self.fail(path, f"expected a quantity (string or number), got {_type_name(value)}")
        if isinstance(value, float):
            return repr(value) if not value.is_integer() else str(int(value))
        return str(value)

    def strings(self, value: Any, path: str) -> tuple[str, ...]:
        return tuple(self.string(v, f"{path}[{i}]") for i, v in enumerate(self.listing(value, path)))


def _type_name(value: Any) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean", int: "integer",
            float: "number"}.get(type(value), type(value).__name__)


# --------------------------------------------------------------------------- shared pieces


@dataclass(frozen=True)
class NodeSelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...]

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key, "operator": self.operator}
        if self.values:
            out["values"] = list(self.values)
        return out


@dataclass(frozen=True)
class NodeSelectorTerm:
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


@dataclass(frozen=True)
class NodeSelector:
    """core/v1 NodeSelector: terms are ORed, requirements inside a term ANDed."""

    terms: tuple[NodeSelectorTerm, ...]


def _node_selector(r: _Reader, value: Any, path: str) -> NodeSelector | None:
    if value is None:
        return None
    raw = r.mapping(value, path)
    terms = []
    for i, term in enumerate(r.listing(raw.get("nodeSelectorTerms"), f"{path}.nodeSelectorTerms")):
        tpath = f"{path}.nodeSelectorTerms[{i}]"
        t = r.mapping(term, tpath)
        terms.append(NodeSelectorTerm(
            match_expressions=_requirements(r, t.get("matchExpressions"), f"{tpath}.matchExpressions"),
            match_fields=_requirements(r, t.get("matchFields"), f"{tpath}.matchFields"),
        ))
    return NodeSelector(tuple(terms))


def _requirements(r: _Reader, value: Any, path: str) -> tuple[NodeSelectorRequirement, ...]:
    out = []
    for i, item in enumerate(r.listing(value, path)):
        p = f"{path}[{i}]"
        m = r.mapping(item, p)
        out.append(NodeSelectorRequirement(
            key=r.string(m.get("key"), f"{p}.key"),
            operator=r.string(m.get("operator"), f"{p}.operator"),
            values=r.strings(m.get("values"), f"{p}.values"),
        ))
    return tuple(out)


@fast_init
@dataclass(frozen=True)
class Metadata:
    name: str
    namespace: str = ""
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    creation_timestamp: str = ""
    generate_name: str = ""


def _metadata(r: _Reader, raw: dict[str, Any]) -> Metadata:
    m = r.mapping(raw.get("metadata"), "metadata")
    labels = r.mapping(m.get("labels"), "metadata.labels")
    annotations = r.mapping(m.get("annotations"), "metadata.annotations")
    for key, value in labels.items():
        r.string(value, f"metadata.labels.{key}")
    for key, value in annotations.items():
        r.string(value, f"metadata.annotations.{key}")
    return Metadata(
        name=r.string(m.get("name"), "metadata.name"),
        namespace=r.string(m.get("namespace"), "metadata.namespace"),
        uid=r.string(m.get("uid"), "metadata.uid"),
        labels=dict(labels),
        annotations=dict(annotations),
        creation_timestamp=r.string(_timestamp(m.get("creationTimestamp")), "metadata.creationTimestamp"),
        generate_name=r.string(m.get("generateName"), "metadata.generateName"),
    )


def _timestamp(value: Any) -> Any:
    # PyYAML turns unquoted RFC 3339 timestamps into datetime objects.
    if value is not None and hasattr(value, "isoformat") and not isinstance(value, str):
        text = value.isoformat()
        return text.replace("+00:00", "Z")
    return value


# --------------------------------------------------------------------------- DeviceClass


@dataclass(frozen=True)
class DeviceSelector:
    """A selector; ``cel`` is None when the selector has no CEL expression (unknown future type)."""

    cel: str | None


def _selectors(r: _Reader, value: Any, path: str) -> tuple[DeviceSelector, ...]:
    out = []
    for i, item in enumerate(r.listing(value, path)):
        p = f"{path}[{i}]"
        m = r.mapping(item, p)
        cel = m.get("cel")
        if cel is None:
            out.append(DeviceSelector(None))
            continue
        c = r.mapping(cel, f"{p}.cel")
        out.append(DeviceSelector(r.string(c.get("expression"), f"{p}.cel.expression")))
    return tuple(out)


@dataclass(frozen=True)
class DeviceClass:
    name: str
    selectors: tuple[DeviceSelector, ...]
    config: tuple[Mapping[str, Any], ...]  # raw {opaque: {driver, parameters}} items, echoed in results
    extended_resource_name: str
    metadata: Metadata

    @property
    def label(self) -> str:
        return f"DeviceClass {self.name}"


def _device_class(r: _Reader, raw: dict[str, Any]) -> DeviceClass:
    meta = _metadata(r, raw)
    spec = r.mapping(raw.get("spec"), "spec")
    config = tuple(r.mapping(c, f"spec.config[{i}]") for i, c in enumerate(r.listing(spec.get("config"), "spec.config")))
    return DeviceClass(
        name=meta.name,
        selectors=_selectors(r, spec.get("selectors"), "spec.selectors"),
        config=config,
        extended_resource_name=r.string(spec.get("extendedResourceName"), "spec.extendedResourceName"),
        metadata=meta,
    )


# --------------------------------------------------------------------------- ResourceSlice


@fast_init
@dataclass(frozen=True)
class AttributeValue:
    """One typed attribute value; list kinds hold a tuple."""

    kind: str  # one of ATTRIBUTE_KINDS
    value: Any

    @property
    def is_list(self) -> bool:
        return self.kind not in SCALAR_KINDS

    def to_api(self) -> dict[str, Any]:
        return {self.kind: list(self.value) if self.is_list else self.value}


@dataclass(frozen=True)
class ValidRange:
    min: str | None
    max: str | None
    step: str | None


@dataclass(frozen=True)
class RequestPolicy:
    default: str | None
    valid_values: tuple[str, ...]
    valid_range: ValidRange | None


@fast_init
@dataclass(frozen=True)
class DeviceCapacity:
    value: str
    request_policy: RequestPolicy | None = None


@dataclass(frozen=True)
class DeviceTaint:
    key: str
    value: str
    effect: str
    time_added: str = ""

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"key": self.key}
        if self.value:
            out["value"] = self.value
        out["effect"] = self.effect
        if self.time_added:
            out["timeAdded"] = self.time_added
        return out


@dataclass(frozen=True)
class CounterConsumption:
    counter_set: str
    counters: Mapping[str, str]  # counter name -> quantity


@dataclass(frozen=True)
class CounterSet:
    name: str
    counters: Mapping[str, str]  # counter name -> quantity


@fast_init
@dataclass(frozen=True)
class Device:
    name: str
    attributes: Mapping[str, AttributeValue]
    capacity: Mapping[str, DeviceCapacity]
    consumes_counters: tuple[CounterConsumption, ...] = ()
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool = False
    node_name: str | None = None  # only with perDeviceNodeSelection
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    raw_attributes: Mapping[str, Any] = field(default_factory=dict)  # API-shaped, for CEL
    raw_capacity: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ResourceSlice:
    name: str
    driver: str
    pool_name: str
    pool_generation: int
    resource_slice_count: int
    node_name: str | None
    node_selector: NodeSelector | None
    all_nodes: bool
    per_device_node_selection: bool
    devices: tuple[Device, ...]
    shared_counters: tuple[CounterSet, ...]
    metadata: Metadata

    @property
    def label(self) -> str:
        return f"ResourceSlice {self.name}"


# Exact types of the plain scalar attribute values, the common case ``_plain_attribute`` takes.
_SCALAR_TYPES: dict[str, type] = {"int": int, "bool": bool, "string": str, "version": str}


def _plain_attribute(value: Any) -> AttributeValue | None:
    """A one-key scalar attribute of the exact type its kind names, without building the error
    paths ``_attribute`` needs (None: anything else, which ``_attribute`` reads or rejects). A
    slice holds a dozen attributes per device and a world thousands of devices."""
    if type(value) is dict and len(value) == 1:
        for kind, v in value.items():
            if type(v) is _SCALAR_TYPES.get(kind):
                return AttributeValue(kind, v)
    return None


def _attribute(r: _Reader, value: Any, path: str) -> AttributeValue:
    if not isinstance(value, dict):
        raise r.fail(path, "expected one of int/bool/string/version")
    m = value
    present = [k for k in ATTRIBUTE_KINDS if m.get(k) is not None]
    if len(present) != 1 or set(m) - set(ATTRIBUTE_KINDS):
        raise r.fail(path, "expected one of int/bool/string/version")
    kind = present[0]
    v = m[kind]
    scalar = kind.rstrip("s") if kind != "bools" else "bool"
    if kind in SCALAR_KINDS:
        _check_scalar(r, kind, v, path + f".{kind}")
        return AttributeValue(kind, v)
    items = r.listing(v, f"{path}.{kind}")
    for i, item in enumerate(items):
        _check_scalar(r, scalar, item, f"{path}.{kind}[{i}]")
    return AttributeValue(kind, tuple(items))


_SCALAR_NAMES = {"int": "an integer", "bool": "a boolean", "string": "a string", "version": "a string"}


def _check_scalar(r: _Reader, kind: str, value: Any, path: str) -> None:
    if kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "bool":
        ok = isinstance(value, bool)
    else:
        ok = isinstance(value, str)
    if not ok:
        raise r.fail(path, f"expected {_SCALAR_NAMES[kind]}, got {_type_name(value)}")


def _capacity(r: _Reader, value: Any, path: str) -> DeviceCapacity:
    m = r.mapping(value, path)
    if "value" not in m:
        raise r.fail(f"{path}.value", "required quantity is missing")
    policy = None
    if m.get("requestPolicy") is not None:
        pp = f"{path}.requestPolicy"
        p = r.mapping(m["requestPolicy"], pp)
        valid_range = None
        if p.get("validRange") is not None:
            vr = r.mapping(p["validRange"], f"{pp}.validRange")
            valid_range = ValidRange(
                min=None if vr.get("min") is None else r.quantity(vr["min"], f"{pp}.validRange.min"),
                max=None if vr.get("max") is None else r.quantity(vr["max"], f"{pp}.validRange.max"),
                step=None if vr.get("step") is None else r.quantity(vr["step"], f"{pp}.validRange.step"),
            )
        policy = RequestPolicy(
            default=None if p.get("default") is None else r.quantity(p["default"], f"{pp}.default"),
            valid_values=tuple(r.quantity(v, f"{pp}.validValues[{i}]")
                               for i, v in enumerate(r.listing(p.get("validValues"), f"{pp}.validValues"))),
            valid_range=valid_range,
        )
    return DeviceCapacity(value=r.quantity(m["value"], f"{path}.value"), request_policy=policy)


def _counters(r: _Reader, value: Any, path: str) -> dict[str, str]:
    out = {}
    for name, counter in r.mapping(value, path).items():
        c = r.mapping(counter, f"{path}.{name}")
        if "value" not in c:
            raise r.fail(f"{path}.{name}.value", "required quantity is missing")
        out[str(name)] = r.quantity(c["value"], f"{path}.{name}.value")
    return out


def _taints(r: _Reader, value: Any, path: str) -> tuple[DeviceTaint, ...]:
    out = []
    for i, item in enumerate(r.listing(value, path)):
        p = f"{path}[{i}]"
        m = r.mapping(item, p)
        out.append(DeviceTaint(
            key=r.string(m.get("key"), f"{p}.key"),
            value=r.string(m.get("value"), f"{p}.value"),
            effect=r.string(m.get("effect"), f"{p}.effect"),
            time_added=r.string(_timestamp(m.get("timeAdded")), f"{p}.timeAdded"),
        ))
    return tuple(out)


# The fields of the common device: a name, scalar attributes and capacities, nothing else.
_PLAIN_DEVICE_FIELDS = frozenset({"name", "attributes", "capacity"})


def _plain_device(r: _Reader, value: Any, path: str) -> Device | None:
    """``_device`` for a device of the common shape, without building the error paths of the
    fields it does not have (a slice holds several devices and a world thousands); None for
    anything else, which ``_device`` reads or rejects. The result is the one ``_device`` makes:
    absent fields take the defaults it gives them."""
    if type(value) is not dict or not _PLAIN_DEVICE_FIELDS.issuperset(value):
        return None
    name = value.get("name")
    attrs_raw = value.get("attributes")
    cap_raw = value.get("capacity")
    if (name is not None and type(name) is not str) or (attrs_raw is not None and type(attrs_raw) is not dict) \
            or (cap_raw is not None and type(cap_raw) is not dict):
        return None
    attributes: dict[str, AttributeValue] = {}
    raw_attributes: dict[str, Any] = {}
    if attrs_raw:
        for k, v in attrs_raw.items():
            plain = _plain_attribute(v)
            if plain is None:
                return None
            key = str(k)
            attributes[key] = plain
            raw_attributes[key] = {plain.kind: plain.value}  # ``to_api`` of a scalar
    capacity = {str(k): _capacity(r, v, f"{path}.capacity.{k}") for k, v in cap_raw.items()} if cap_raw else {}
    return Device(name=name or "", attributes=attributes, capacity=capacity, raw_attributes=raw_attributes,
                  raw_capacity={k: {"value": v.value} for k, v in capacity.items()})


def _device(r: _Reader, value: Any, path: str) -> Device:
    common = _plain_device(r, value, path)
    if common is not None:
        return common
    m = r.mapping(value, path)
    attrs_raw = r.mapping(m.get("attributes"), f"{path}.attributes")
    attributes: dict[str, AttributeValue] = {}
    for k, v in attrs_raw.items():
        plain = _plain_attribute(v)
        attributes[str(k)] = plain if plain is not None else _attribute(r, v, f"{path}.attributes.{k}")
    cap_raw = r.mapping(m.get("capacity"), f"{path}.capacity")
    capacity = {str(k): _capacity(r, v, f"{path}.capacity.{k}") for k, v in cap_raw.items()}
    consumes = []
    for i, item in enumerate(r.listing(m.get("consumesCounters"), f"{path}.consumesCounters")):
        p = f"{path}.consumesCounters[{i}]"
        c = r.mapping(item, p)
        consumes.append(CounterConsumption(
            counter_set=r.string(c.get("counterSet"), f"{p}.counterSet"),
            counters=_counters(r, c.get("counters"), f"{p}.counters"),
        ))
    return Device(
        name=r.string(m.get("name"), f"{path}.name"),
        attributes=attributes,
        capacity=capacity,
        consumes_counters=tuple(consumes),
        taints=_taints(r, m.get("taints"), f"{path}.taints"),
        binds_to_node=bool(r.opt_bool(m.get("bindsToNode"), f"{path}.bindsToNode")),
        binding_conditions=r.strings(m.get("bindingConditions"), f"{path}.bindingConditions"),
        binding_failure_conditions=r.strings(m.get("bindingFailureConditions"), f"{path}.bindingFailureConditions"),
        allow_multiple_allocations=bool(r.opt_bool(m.get("allowMultipleAllocations"), f"{path}.allowMultipleAllocations")),
        node_name=None if m.get("nodeName") is None else r.string(m.get("nodeName"), f"{path}.nodeName"),
        node_selector=_node_selector(r, m.get("nodeSelector"), f"{path}.nodeSelector"),
        all_nodes=bool(r.opt_bool(m.get("allNodes"), f"{path}.allNodes")),
        raw_attributes={k: v.to_api() for k, v in attributes.items()},
        raw_capacity={k: {"value": v.value} for k, v in capacity.items()},
    )


def _resource_slice(r: _Reader, raw: dict[str, Any]) -> ResourceSlice:
    meta = _metadata(r, raw)
    spec = r.mapping(raw.get("spec"), "spec")
    pool = r.mapping(spec.get("pool"), "spec.pool")
    sets = []
    for i, item in enumerate(r.listing(spec.get("sharedCounters"), "spec.sharedCounters")):
        p = f"spec.sharedCounters[{i}]"
        s = r.mapping(item, p)
        sets.append(CounterSet(name=r.string(s.get("name"), f"{p}.name"),
                               counters=_counters(r, s.get("counters"), f"{p}.counters")))
    return ResourceSlice(
        name=meta.name,
        driver=r.string(spec.get("driver"), "spec.driver"),
        pool_name=r.string(pool.get("name"), "spec.pool.name"),
        pool_generation=r.integer(pool.get("generation"), "spec.pool.generation", 0),
        resource_slice_count=r.integer(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount", 0),
        node_name=None if spec.get("nodeName") is None else r.string(spec.get("nodeName"), "spec.nodeName"),
        node_selector=_node_selector(r, spec.get("nodeSelector"), "spec.nodeSelector"),
        all_nodes=bool(r.opt_bool(spec.get("allNodes"), "spec.allNodes")),
        per_device_node_selection=bool(r.opt_bool(spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection")),
        devices=tuple(_device(r, d, f"spec.devices[{i}]") for i, d in enumerate(r.listing(spec.get("devices"), "spec.devices"))),
        shared_counters=tuple(sets),
        metadata=meta,
    )


# --------------------------------------------------------------------------- ResourceClaim


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def to_api(self) -> dict[str, Any]:
        """The defaulted API form (empty fields omitted, as Go's omitempty does)."""
        out: dict[str, Any] = {}
        if self.key:
            out["key"] = self.key
        out["operator"] = self.operator
        if self.value:
            out["value"] = self.value
        if self.effect:
            out["effect"] = self.effect
        if self.toleration_seconds is not None:
            out["tolerationSeconds"] = self.toleration_seconds
        return out


def _tolerations(r: _Reader, value: Any, path: str) -> tuple[Toleration, ...]:
    out = []
    for i, item in enumerate(r.listing(value, path)):
        p = f"{path}[{i}]"
        m = r.mapping(item, p)
        seconds = m.get("tolerationSeconds")
        out.append(Toleration(
            key=r.string(m.get("key"), f"{p}.key"),
            operator=r.string(m.get("operator"), f"{p}.operator") or "Equal",
            value=r.string(m.get("value"), f"{p}.value"),
            effect=r.string(m.get("effect"), f"{p}.effect"),
            toleration_seconds=None if seconds is None else r.integer(seconds, f"{p}.tolerationSeconds", 0),
        ))
    return tuple(out)


@dataclass(frozen=True)
class ExactRequest:
    """The part shared by an ``exactly`` request and a firstAvailable subrequest."""

    device_class_name: str
    selectors: tuple[DeviceSelector, ...] = ()
    allocation_mode: str = "ExactCount"
    count: int = 1
    admin_access: bool | None = None  # None = field not set (matters for the feature-gate check)
    tolerations: tuple[Toleration, ...] = ()
    capacity_requests: Mapping[str, str] | None = None  # None = no capacity stanza


@dataclass(frozen=True)
class SubRequest:
    name: str
    spec: ExactRequest


@dataclass(frozen=True)
class DeviceRequest:
    name: str
    exactly: ExactRequest | None
    first_available: tuple[SubRequest, ...] = ()


@dataclass(frozen=True)
class Constraint:
    requests: tuple[str, ...]
    match_attribute: str | None
    distinct_attribute: str | None


@dataclass(frozen=True)
class ClaimConfig:
    requests: tuple[str, ...]
    raw: Mapping[str, Any]  # the DeviceConfiguration part ({"opaque": {...}}), echoed in results


@dataclass(frozen=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[Constraint, ...]
    config: tuple[ClaimConfig, ...]


@dataclass(frozen=True)
class Allocation:
    results: tuple[Mapping[str, Any], ...]
    node_selector: Mapping[str, Any] | None
    config: tuple[Mapping[str, Any], ...]


@fast_init
@dataclass(frozen=True)
class ResourceClaim:
    name: str
    namespace: str
    uid: str
    spec: ClaimSpec
    allocation: Allocation | None
    metadata: Metadata
    reserved_for: tuple[Mapping[str, Any], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def label(self) -> str:
        return f"ResourceClaim {self.key}"


def _exact(r: _Reader, m: dict[str, Any], path: str, allow_admin: bool) -> ExactRequest:
    mode = r.string(m.get("allocationMode"), f"{path}.allocationMode") or "ExactCount"
    count_default = 1 if mode == "ExactCount" else 0
    cap = None
    if m.get("capacity") is not None:
        c = r.mapping(m["capacity"], f"{path}.capacity")
        reqs = r.mapping(c.get("requests"), f"{path}.capacity.requests")
        cap = {str(k): r.quantity(v, f"{path}.capacity.requests.{k}") for k, v in reqs.items()}
    admin = r.opt_bool(m.get("adminAccess"), f"{path}.adminAccess") if allow_admin else None
    return ExactRequest(
        device_class_name=r.string(m.get("deviceClassName"), f"{path}.deviceClassName"),
        selectors=_selectors(r, m.get("selectors"), f"{path}.selectors"),
        allocation_mode=mode,
        count=r.integer(m.get("count"), f"{path}.count", count_default),
        admin_access=admin,
        tolerations=_tolerations(r, m.get("tolerations"), f"{path}.tolerations"),
        capacity_requests=cap,
    )


def _claim_spec(r: _Reader, spec: dict[str, Any], path: str) -> ClaimSpec:
    devices = r.mapping(spec.get("devices"), f"{path}.devices")
    requests = []
    for i, item in enumerate(r.listing(devices.get("requests"), f"{path}.devices.requests")):
        p = f"{path}.devices.requests[{i}]"
        m = r.mapping(item, p)
        name = r.string(m.get("name"), f"{p}.name")
        exactly = None
        if m.get("exactly") is not None:
            exactly = _exact(r, r.mapping(m["exactly"], f"{p}.exactly"), f"{p}.exactly", allow_admin=True)
        elif "deviceClassName" in m:
            # v1beta1 flattened form: the request itself carries the exact fields.
            exactly = _exact(r, m, p, allow_admin=True)
        subs = []
        for j, sub in enumerate(r.listing(m.get("firstAvailable"), f"{p}.firstAvailable")):
            sp = f"{p}.firstAvailable[{j}]"
            sm = r.mapping(sub, sp)
            subs.append(SubRequest(name=r.string(sm.get("name"), f"{sp}.name"),
                                   spec=_exact(r, sm, sp, allow_admin=False)))
        requests.append(DeviceRequest(name=name, exactly=exactly, first_available=tuple(subs)))
    constraints = []
    for i, item in enumerate(r.listing(devices.get("constraints"), f"{path}.devices.constraints")):
        p = f"{path}.devices.constraints[{i}]"
        m = r.mapping(item, p)
        constraints.append(Constraint(
            requests=r.strings(m.get("requests"), f"{p}.requests"),
            match_attribute=None if m.get("matchAttribute") is None else r.string(m["matchAttribute"], f"{p}.matchAttribute"),
            distinct_attribute=None if m.get("distinctAttribute") is None else r.string(m["distinctAttribute"], f"{p}.distinctAttribute"),
        ))
    configs = []
    for i, item in enumerate(r.listing(devices.get("config"), f"{path}.devices.config")):
        p = f"{path}.devices.config[{i}]"
        m = r.mapping(item, p)
        rest = {k: v for k, v in m.items() if k != "requests"}
        configs.append(ClaimConfig(requests=r.strings(m.get("requests"), f"{p}.requests"), raw=rest))
    return ClaimSpec(requests=tuple(requests), constraints=tuple(constraints), config=tuple(configs))


def _allocation(r: _Reader, status: dict[str, Any]) -> Allocation | None:
    if status.get("allocation") is None:
        return None
    a = r.mapping(status["allocation"], "status.allocation")
    d = r.mapping(a.get("devices"), "status.allocation.devices")
    results = []
    for i, item in enumerate(r.listing(d.get("results"), "status.allocation.devices.results")):
        p = f"status.allocation.devices.results[{i}]"
        m = r.mapping(item, p)
        for key in ("request", "driver", "pool", "device"):
            r.string(m.get(key), f"{p}.{key}")
        r.opt_bool(m.get("adminAccess"), f"{p}.adminAccess")
        r.string(m.get("shareID"), f"{p}.shareID")
        cc = r.mapping(m.get("consumedCapacity"), f"{p}.consumedCapacity")
        for k, v in cc.items():
            r.quantity(v, f"{p}.consumedCapacity.{k}")
        results.append(m)
    ns = a.get("nodeSelector")
    if ns is not None:
        _node_selector(r, ns, "status.allocation.nodeSelector")
    config = tuple(r.mapping(c, f"status.allocation.devices.config[{i}]")
                   for i, c in enumerate(r.listing(d.get("config"), "status.allocation.devices.config")))
    return Allocation(results=tuple(results), node_selector=ns, config=config)


def _resource_claim(r: _Reader, raw: dict[str, Any], specs: dict[bytes, ClaimSpec] | None = None) -> ResourceClaim:
    meta = _metadata(r, raw)
    status = r.mapping(raw.get("status"), "status")
    reserved = tuple(r.mapping(x, f"status.reservedFor[{i}]")
                     for i, x in enumerate(r.listing(status.get("reservedFor"), "status.reservedFor")))
    spec_raw = r.mapping(raw.get("spec"), "spec")
    return ResourceClaim(
        name=meta.name,
        namespace=meta.namespace or "default",
        uid=meta.uid,
        spec=_claim_spec(r, spec_raw, "spec") if specs is None else _known_claim_spec(r, spec_raw, specs),
        allocation=_allocation(r, status),
        metadata=meta,
        reserved_for=reserved,
    )


def _known_claim_spec(r: _Reader, spec: dict[str, Any], specs: dict[bytes, ClaimSpec]) -> ClaimSpec:
    """``_claim_spec`` once per distinct spec: claims made from one template share it. Keyed by the
    spec's ``equality_key`` (equal keys are equal JSON values, and the parse reads nothing else);
    a spec that is not plain JSON is parsed every time, and only parses that succeed are kept."""
    try:
        key = equality_key(spec)
    except (TypeError, ValueError):
        return _claim_spec(r, spec, "spec")
    found = specs.get(key)
    if found is None:
        found = _claim_spec(r, spec, "spec")
        if len(specs) >= MAX_KNOWN_SPECS:
            specs.clear()
        specs[key] = found
    return found


MAX_KNOWN_SPECS = 4096


@dataclass(frozen=True)
class ResourceClaimTemplate:
    name: str
    namespace: str
    spec: ClaimSpec
    claim_labels: Mapping[str, str]
    claim_annotations: Mapping[str, str]
    metadata: Metadata

    def instantiate(self, name: str, uid: str = "", annotations: Mapping[str, str] | None = None) -> ResourceClaim:
        """The claim the resourceclaim controller would create from this template."""
        ann = dict(self.claim_annotations)
        ann.update(annotations or {})
        meta = Metadata(name=name, namespace=self.namespace, uid=uid, labels=dict(self.claim_labels), annotations=ann)
        return ResourceClaim(name=name, namespace=self.namespace, uid=uid, spec=self.spec, allocation=None, metadata=meta)


def _resource_claim_template(r: _Reader, raw: dict[str, Any]) -> ResourceClaimTemplate:
    meta = _metadata(r, raw)
    spec = r.mapping(raw.get("spec"), "spec")
    tmeta = r.mapping(spec.get("metadata"), "spec.metadata")
    return ResourceClaimTemplate(
        name=meta.name,
        namespace=meta.namespace or "default",
        spec=_claim_spec(r, r.mapping(spec.get("spec"), "spec.spec"), "spec.spec"),
        claim_labels=dict(r.mapping(tmeta.get("labels"), "spec.metadata.labels")),
        claim_annotations=dict(r.mapping(tmeta.get("annotations"), "spec.metadata.annotations")),
        metadata=meta,
    )


# --------------------------------------------------------------------------- DeviceTaintRule


@dataclass(frozen=True)
class DeviceTaintRule:
    """Taints ``taint`` onto every device matching driver/pool/device (empty = any)."""

    name: str
    driver: str
    pool: str
    device: str
    device_class_name: str
    selectors: tuple[DeviceSelector, ...]
    taint: DeviceTaint
    api_version: str
    metadata: Metadata


def _device_taint_rule(r: _Reader, raw: dict[str, Any]) -> DeviceTaintRule:
    meta = _metadata(r, raw)
    spec = r.mapping(raw.get("spec"), "spec")
    sel = r.mapping(spec.get("deviceSelector"), "spec.deviceSelector")
    t = r.mapping(spec.get("taint"), "spec.taint")
    return DeviceTaintRule(
        name=meta.name,
        driver=r.string(sel.get("driver"), "spec.deviceSelector.driver"),
        pool=r.string(sel.get("pool"), "spec.deviceSelector.pool"),
        device=r.string(sel.get("device"), "spec.deviceSelector.device"),
        device_class_name=r.string(sel.get("deviceClassName"), "spec.deviceSelector.deviceClassName"),
        selectors=_selectors(r, sel.get("selectors"), "spec.deviceSelector.selectors"),
        taint=DeviceTaint(
            key=r.string(t.get("key"), "spec.taint.key"),
            value=r.string(t.get("value"), "spec.taint.value"),
            effect=r.string(t.get("effect"), "spec.taint.effect"),
            time_added=r.string(_timestamp(t.get("timeAdded")), "spec.taint.timeAdded"),
        ),
        api_version=str(raw.get("apiVersion", "")),
        metadata=meta,
    )


# --------------------------------------------------------------------------- Node and Pod


@dataclass(frozen=True)
class NodeTaint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True)
class Node:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[NodeTaint, ...] = ()
    unschedulable: bool = False

    def with_labels(self, labels: Mapping[str, str]) -> Node:
        merged = dict(self.labels)
        merged.update(labels)
        return Node(name=self.name, labels=merged, taints=self.taints, unschedulable=self.unschedulable)


def _node(r: _Reader, raw: dict[str, Any]) -> Node:
    meta = _metadata(r, raw)
    spec = r.mapping(raw.get("spec"), "spec")
    taints = []
    for i, item in enumerate(r.listing(spec.get("taints"), "spec.taints")):
        p = f"spec.taints[{i}]"
        m = r.mapping(item, p)
        taints.append(NodeTaint(key=r.string(m.get("key"), f"{p}.key"), value=r.string(m.get("value"), f"{p}.value"),
                                effect=r.string(m.get("effect"), f"{p}.effect")))
    return Node(name=meta.name, labels=dict(meta.labels), taints=tuple(taints),
                unschedulable=bool(r.opt_bool(spec.get("unschedulable"), "spec.unschedulable")))


@dataclass(frozen=True)
class PodResourceClaim:
    name: str
    resource_claim_name: str | None
    resource_claim_template_name: str | None


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str
    resource_claims: tuple[PodResourceClaim, ...]
    node_name: str
    node_selector: Mapping[str, str]
    affinity: Mapping[str, Any] | None  # raw core/v1 Affinity, echoed as given
    tolerations: tuple[Toleration, ...]
    gpu_limit: int  # sum of container limits of nvidia.com/gpu (device-plugin track)
    resource_claim_statuses: Mapping[str, str | None]  # pod claim name -> generated claim name
    creation_timestamp: str
    raw_tolerations: tuple[Mapping[str, Any], ...] = ()
    metadata: Metadata | None = None

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def _pod(r: _Reader, raw: dict[str, Any]) -> Pod:
    meta = _metadata(r, raw)
    spec = r.mapping(raw.get("spec"), "spec")
    status = r.mapping(raw.get("status"), "status")
    claims = []
    for i, item in enumerate(r.listing(spec.get("resourceClaims"), "spec.resourceClaims")):
        p = f"spec.resourceClaims[{i}]"
        m = r.mapping(item, p)
        claims.append(PodResourceClaim(
            name=r.string(m.get("name"), f"{p}.name"),
            resource_claim_name=None if m.get("resourceClaimName") is None else r.string(m["resourceClaimName"], f"{p}.resourceClaimName"),
            resource_claim_template_name=None if m.get("resourceClaimTemplateName") is None
            else r.string(m["resourceClaimTemplateName"], f"{p}.resourceClaimTemplateName"),
        ))
    gpus = 0
    for group in ("initContainers", "containers"):
        for i, c in enumerate(r.listing(spec.get(group), f"spec.{group}")):
            cm = r.mapping(c, f"spec.{group}[{i}]")
            res = r.mapping(cm.get("resources"), f"spec.{group}[{i}].resources")
            limits = r.mapping(res.get("limits"), f"spec.{group}[{i}].resources.limits")
            if "nvidia.com/gpu" in limits and group == "containers":
                value = limits["nvidia.com/gpu"]
                path = f"spec.{group}[{i}].resources.limits.nvidia.com/gpu"
                text = r.quantity(value, path)
                if not text.isdigit():
                    raise r.fail(path, f"expected a whole number of GPUs, got {text!r}")
                gpus += int(text)
    statuses: dict[str, str | None] = {}
    for i, item in enumerate(r.listing(status.get("resourceClaimStatuses"), "status.resourceClaimStatuses")):
        p = f"status.resourceClaimStatuses[{i}]"
        m = r.mapping(item, p)
        gen = m.get("resourceClaimName")
        statuses[r.string(m.get("name"), f"{p}.name")] = None if gen is None else r.string(gen, f"{p}.resourceClaimName")
    node_selector = r.mapping(spec.get("nodeSelector"), "spec.nodeSelector")
    for k, v in node_selector.items():
        r.string(v, f"spec.nodeSelector.{k}")
    affinity = spec.get("affinity")
    if affinity is not None:
        r.mapping(affinity, "spec.affinity")
    raw_tol = tuple(r.mapping(t, f"spec.tolerations[{i}]") for i, t in enumerate(r.listing(spec.get("tolerations"), "spec.tolerations")))
    return Pod(
        namespace=meta.namespace or "default",
        name=meta.name,
        uid=meta.uid,
        resource_claims=tuple(claims),
        node_name=r.string(spec.get("nodeName"), "spec.nodeName"),
        node_selector=dict(node_selector),
        affinity=affinity,
        tolerations=_tolerations(r, spec.get("tolerations"), "spec.tolerations"),
        gpu_limit=gpus,
        resource_claim_statuses=statuses,
        creation_timestamp=meta.creation_timestamp,
        raw_tolerations=raw_tol,
        metadata=meta,
    )


# --------------------------------------------------------------------------- entry point

KubeObject = DeviceClass | ResourceSlice | ResourceClaim | ResourceClaimTemplate | DeviceTaintRule | Node | Pod

_PARSERS: dict[str, Callable[[_Reader, dict[str, Any]], KubeObject]] = {
    "DeviceClass": _device_class,
    "ResourceSlice": _resource_slice,
    "ResourceClaim": _resource_claim,
    "ResourceClaimTemplate": _resource_claim_template,
    "DeviceTaintRule": _device_taint_rule,
    "Node": _node,
    "Pod": _pod,
}


def object_label(raw: Mapping[str, Any]) -> str:
    """``Kind namespace/name`` (or ``Kind name``) for messages, tolerant of malformed input."""
    kind = raw.get("kind") if isinstance(raw.get("kind"), str) else "object"
    meta_raw = raw.get("metadata")
    meta: Mapping[str, Any] = meta_raw if isinstance(meta_raw, dict) else {}
    name = meta.get("name") if isinstance(meta.get("name"), str) else "<unnamed>"
    ns = meta.get("namespace") if isinstance(meta.get("namespace"), str) else ""
    if kind in ("ResourceClaim", "ResourceClaimTemplate", "Pod"):
        return f"{kind} {ns or 'default'}/{name}"
    return f"{kind} {name}"


def supported_kind(raw: Mapping[str, Any]) -> bool:
    return raw.get("kind") in _PARSERS


def parse_object(raw: Mapping[str, Any], claim_specs: dict[bytes, ClaimSpec] | None = None) -> KubeObject:
    """Parse and default one raw object; ModelError names the object and field on wrong types.

    ``claim_specs``: a memo the caller keeps, so a ResourceClaim's spec is parsed once per distinct
    spec (``_known_claim_spec``) rather than once per claim."""
    if not isinstance(raw, Mapping):
        raise ModelError(f"object: expected a mapping, got {_type_name(raw)}")
    kind = raw.get("kind")
    parser = _PARSERS.get(kind) if isinstance(kind, str) else None
    label = object_label(raw)
    if parser is None:
        raise ModelError(f"{label}: kind: unsupported kind {kind!r} (expected one of {', '.join(sorted(_PARSERS))})")
    if claim_specs is not None and kind == "ResourceClaim":
        return _resource_claim(_Reader(label), dict(raw), claim_specs)
    return parser(_Reader(label), dict(raw))
