"""Scenario documents: Kubernetes YAML plus a ClaimTrail Policy and a ``Workload`` mix.

A scenario file is a multi-document YAML stream. Kubernetes objects (Node, ResourceSlice,
DeviceClass, ResourceClaimTemplate, DeviceTaintRule) are taken as they are; ``kind: Policy``
(claimtrail.io/v1alpha1) is the initial policy; ``kind: Workload`` (claimtrail.io/v1alpha1)
describes what the simulator generates::

    spec:
      cluster: demo
      start: "2026-11-02T00:00:00Z"
      hours: 24
      nodePools: [{model: H100, nodes: 16, gpusPerNode: 8, driverVersion: "580.105.8", devicePlugin: false}]
      tenants:
        - namespace: team-a
          arrivalsPerHour: 40
          bursts: [{at: 2h, jobs: 200, over: 10m}]
          templates: [{name: train-h100-first, weight: 1}]
          sizes: {"1": 0.6, "2": 0.2, "4": 0.15, "8": 0.05}
          durationMinutes: {median: 45, sigma: 0.8}
          devicePluginFraction: 0.1
      disruptions: {healthFlapsPerHour: 2, flapMinutes: 20, nodeLossesPerDay: 1, nodeRepairHours: 2,
                    driverUpgradesPerDay: 4, bindInterference: 0.01}
      policyChanges: [{at: 12h, policy: {...a Policy document...}}]

Node pools generate Nodes and NVIDIA-shaped ResourceSlices (see ``cluster.py``); pod claims are
instantiated from the named ResourceClaimTemplate with every request's (sub)request ``count`` set to
the job's size. Errors name the document and field path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import yaml

from audit.dra.loader import yaml_problem
from audit.dra.validate import validate_object
from audit.policy import PolicyError, parse_duration_ms, parse_policy, yaml_exponent_hint, yaml_text_hint
from audit.records import cluster_name_problem
from audit.timestamps import parse_zoned_ms, window_problem
from ingest.simulate.cluster import NodePool

WORKLOAD_API = "claimtrail.io/v1alpha1"
K8S_KINDS = ("Node", "ResourceSlice", "DeviceClass", "ResourceClaimTemplate", "DeviceTaintRule")


class ScenarioError(ValueError):
    """A scenario document is invalid; the message names the document and the field."""


@dataclass(frozen=True)
class Burst:
    at_ms: int
    jobs: int
    over_ms: int


@dataclass(frozen=True)
class TenantMix:
    namespace: str
    arrivals_per_hour: float
    bursts: tuple[Burst, ...]
    templates: tuple[tuple[str, float], ...]
    sizes: tuple[tuple[int, float], ...]
    duration_median_min: float
    duration_sigma: float
    device_plugin_fraction: float
    # the GPU models its device-plugin pods pin with a nodeSelector on the node's
    # ``nvidia.com/gpu.product`` label, with weights; empty: they take any device-plugin GPU
    device_plugin_models: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Disruptions:
    health_flaps_per_hour: float = 0.0
    flap_ms: int = 20 * 60_000
    node_losses_per_day: float = 0.0
    node_repair_ms: int = 2 * 3_600_000
    driver_upgrades_per_day: float = 0.0
    bind_interference: float = 0.0


@dataclass
class Scenario:
    name: str
    cluster: str = "sim"
    start: str = "2026-11-02T00:00:00Z"
    hours: float = 24.0
    pools: list[NodePool] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)  # Kubernetes objects, file order
    policy: dict[str, Any] | None = None
    tenants: list[TenantMix] = field(default_factory=list)
    disruptions: Disruptions = field(default_factory=Disruptions)
    policy_changes: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    explicit_jobs: list[Any] = field(default_factory=list)  # trace-driven jobs (see traces.py)

    def templates(self) -> dict[str, dict[str, Any]]:
        return {o["metadata"]["name"]: o for o in self.objects if o.get("kind") == "ResourceClaimTemplate"}


def load_scenario_text(text: str, source: str) -> Scenario:
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{source}: invalid YAML: {yaml_problem(exc)}") from None
    return scenario_from_documents(docs, source)


def scenario_from_documents(docs: list[Any], source: str) -> Scenario:
    sc = Scenario(name=source)
    workload_seen = False
    for i, doc in enumerate(docs):
        where = f"{source}#{i}"
        if not isinstance(doc, dict):
            raise ScenarioError(f"{where}: expected a mapping, got {type(doc).__name__}")
        kind = doc.get("kind")
        if kind in K8S_KINDS:
            if not isinstance(doc.get("metadata"), dict) or not doc["metadata"].get("name"):
                raise ScenarioError(f"{where} {kind}: metadata.name: required field missing")
            # checked as the API server would admit it (claimtrail validate): a template without
            # its spec would otherwise stop the run at its first pod, in a traceback
            findings = validate_object(doc)
            if findings:
                raise ScenarioError(f"{where}: {findings[0]}")
            sc.objects.append(doc)
        elif kind == "Policy":
            try:
                parse_policy(doc)
            except PolicyError as exc:
                raise ScenarioError(f"{where}: {exc}") from None
            sc.policy = doc
        elif kind == "Workload":
            if workload_seen:
                raise ScenarioError(f"{where} Workload: only one Workload document per scenario")
            workload_seen = True
            _workload(sc, doc, where)
        else:
            raise ScenarioError(f"{where}: kind: unsupported kind {kind!r} (expected one of "
                                f"{', '.join(K8S_KINDS)}, Policy, Workload)")
    known = sc.templates()
    for i, t in enumerate(sc.tenants):
        for j, (name, _) in enumerate(t.templates):
            if name not in known:
                raise ScenarioError(f"{source} Workload {sc.name}: spec.tenants[{i}].templates[{j}].name: no "
                                    f"ResourceClaimTemplate {name!r} in the scenario")
    return sc


def parse_workload(doc: dict[str, Any], where: str) -> Scenario:
    """One Workload document alone, checked as a scenario checks it (its templates are not looked for)."""
    sc = Scenario(name=where)
    _workload(sc, doc, where)
    return sc


def _workload(sc: Scenario, doc: dict[str, Any], where: str) -> None:
    metadata = doc.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise ScenarioError(f"{where} Workload: metadata: expected a mapping, got {type(metadata).__name__}")
    name = metadata.get("name")
    name = "?" if name is None or name == "" else name  # name: 0 or false is refused, not made "?"
    if not isinstance(name, str):
        raise ScenarioError(f"{where} Workload: metadata.name: expected a string, got {type(name).__name__}"
                            f"{yaml_text_hint(name)}")
    label = f"{where} Workload {name}"
    if doc.get("apiVersion") != WORKLOAD_API:
        raise ScenarioError(f"{label}: apiVersion: must be {WORKLOAD_API}")
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise ScenarioError(f"{label}: spec: expected a mapping")
    sc.name = name
    allowed = {"cluster", "start", "hours", "nodePools", "tenants", "disruptions", "policyChanges"}
    for key in sorted(set(spec) - allowed):
        raise ScenarioError(f"{label}: spec.{key}: unknown field")
    sc.cluster = _str(spec, "cluster", label, "sim")
    problem = cluster_name_problem(sc.cluster)
    if problem:  # every record and event of the run would be refused by the store
        raise ScenarioError(f"{label}: spec.cluster: {problem}")
    sc.start = _start(spec, label, sc.start)
    sc.hours = _num(spec, "hours", label, 24.0)
    if sc.hours == 0:  # as --hours 0 is refused: a run of no time would write no decision
        raise ScenarioError(f"{label}: spec.hours: must be > 0")
    problem = window_problem(parse_zoned_ms(sc.start), sc.hours)
    if problem:
        raise ScenarioError(f"{label}: spec.hours: {sc.hours:g} from spec.start {sc.start}: {problem}")
    for i, p in enumerate(_list(spec, "nodePools", label)):
        path = f"spec.nodePools[{i}]"
        p = _map(p, label, path)
        sc.pools.append(NodePool(
            model=_str(p, "model", label, None, path), nodes=_int(p, "nodes", label, None, path),
            gpus_per_node=_int(p, "gpusPerNode", label, 8, path, minimum=1),
            driver_version=_str(p, "driverVersion", label, "580.105.8", path),
            prefix=_str(p, "prefix", label, "", path), device_plugin=_bool(p, "devicePlugin", label, False, path),
        ))
    dp_pool_models = {p.model for p in sc.pools if p.device_plugin}
    tenant_of: dict[str, int] = {}  # namespace -> index of the tenant that has it
    for i, t in enumerate(_list(spec, "tenants", label)):
        sc.tenants.append(_tenant(_map(t, label, f"spec.tenants[{i}]"), label, f"spec.tenants[{i}]"))
        # two mixes in one namespace would generate pods no report can tell apart
        ns = sc.tenants[-1].namespace
        if ns in tenant_of:
            raise ScenarioError(f"{label}: spec.tenants[{i}].namespace: {ns!r} is already the namespace of "
                                f"spec.tenants[{tenant_of[ns]}]; give each tenant its own")
        tenant_of[ns] = i
        for model, _ in sc.tenants[-1].device_plugin_models:
            if model not in dp_pool_models:
                raise ScenarioError(f"{label}: spec.tenants[{i}].devicePluginModels.{model}: no devicePlugin node "
                                    "pool has this model")
    d = _map(spec.get("disruptions") or {}, label, "spec.disruptions")
    sc.disruptions = Disruptions(
        health_flaps_per_hour=_num(d, "healthFlapsPerHour", label, 0.0, "spec.disruptions"),
        flap_ms=int(_num(d, "flapMinutes", label, 20, "spec.disruptions") * 60_000),
        node_losses_per_day=_num(d, "nodeLossesPerDay", label, 0.0, "spec.disruptions"),
        node_repair_ms=int(_num(d, "nodeRepairHours", label, 2, "spec.disruptions") * 3_600_000),
        driver_upgrades_per_day=_num(d, "driverUpgradesPerDay", label, 0.0, "spec.disruptions"),
        bind_interference=_share(d, "bindInterference", label, "spec.disruptions"),
    )
    for i, c in enumerate(_list(spec, "policyChanges", label)):
        path = f"spec.policyChanges[{i}]"
        c = _map(c, label, path)
        at = _duration(c, "at", label, path)
        # named here: the policy's own reader would call it a nameless Policy that is no mapping
        if c.get("policy") is None:
            raise ScenarioError(f"{label}: {path}.policy: required field missing")
        policy = _map(c["policy"], label, f"{path}.policy")
        try:
            parse_policy(policy)
        except PolicyError as exc:
            raise ScenarioError(f"{label}: {path}.policy: {exc}") from None
        sc.policy_changes.append((at, policy))


def _tenant(t: dict[str, Any], label: str, path: str) -> TenantMix:
    bursts = []
    for i, b in enumerate(t.get("bursts") or []):
        bp = f"{path}.bursts[{i}]"
        b = _map(b, label, bp)
        bursts.append(Burst(_duration(b, "at", label, bp), _int(b, "jobs", label, None, bp),
                            _duration(b, "over", label, bp, "10m")))
    templates = []
    for i, tp in enumerate(t.get("templates") or []):
        tpp = f"{path}.templates[{i}]"
        tp = _map(tp, label, tpp)
        templates.append((_str(tp, "name", label, None, tpp), _num(tp, "weight", label, 1.0, tpp)))
    if not templates:
        raise ScenarioError(f"{label}: {path}.templates: at least one ResourceClaimTemplate name is required")
    sizes_raw = _map(t.get("sizes") or {"1": 1.0}, label, f"{path}.sizes")
    for k in sizes_raw:
        # every key is checked before any is read as a number (sorting by one would fail first)
        if not str(k).isdigit() or int(k) < 1:
            raise ScenarioError(f"{label}: {path}.sizes.{k}: keys are device counts >= 1")
    sizes = []
    for k, v in sorted(sizes_raw.items(), key=lambda kv: int(kv[0])):
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise ScenarioError(f"{label}: {path}.sizes.{k}: expected a finite non-negative weight"
                                f"{yaml_exponent_hint(v)}")
        sizes.append((int(k), float(v)))
    dur = _map(t.get("durationMinutes") or {}, label, f"{path}.durationMinutes")
    dp_models = []
    for model, w in _map(t.get("devicePluginModels") or {}, label, f"{path}.devicePluginModels").items():
        if not isinstance(model, str):  # str() would make a bare 1.10 the model 1.1
            raise ScenarioError(f"{label}: {path}.devicePluginModels.{model}: expected a string, got "
                                f"{type(model).__name__}{yaml_text_hint(model)}")
        if isinstance(w, bool) or not isinstance(w, int | float) or not math.isfinite(w) or w < 0:
            raise ScenarioError(f"{label}: {path}.devicePluginModels.{model}: expected a finite non-negative weight"
                                f"{yaml_exponent_hint(w)}")
        dp_models.append((model, float(w)))
    # a draw among weights that sum to 0 has nothing to go by: it would take the last choice always
    for field_, choices in (("templates", templates), ("sizes", sizes), ("devicePluginModels", dp_models)):
        if choices and not sum(w for _, w in choices) > 0:
            raise ScenarioError(f"{label}: {path}.{field_}: every weight is 0; give at least one a weight > 0")
    return TenantMix(
        namespace=_str(t, "namespace", label, None, path),
        arrivals_per_hour=_num(t, "arrivalsPerHour", label, 0.0, path),
        bursts=tuple(bursts), templates=tuple(templates), sizes=tuple(sizes),
        duration_median_min=_num(dur, "median", label, 30.0, f"{path}.durationMinutes"),
        duration_sigma=_num(dur, "sigma", label, 0.8, f"{path}.durationMinutes"),
        device_plugin_fraction=_share(t, "devicePluginFraction", label, path),
        device_plugin_models=tuple(dp_models),
    )


_FIELDS = {
    "nodePools": {"model", "nodes", "gpusPerNode", "driverVersion", "prefix", "devicePlugin"},
    "tenants": {"namespace", "arrivalsPerHour", "bursts", "templates", "sizes", "durationMinutes",
                "devicePluginFraction", "devicePluginModels"},
    "bursts": {"at", "jobs", "over"},
    "templates": {"name", "weight"},
    "durationMinutes": {"median", "sigma"},
    "disruptions": {"healthFlapsPerHour", "flapMinutes", "nodeLossesPerDay", "nodeRepairHours",
                    "driverUpgradesPerDay", "bindInterference"},
    "policyChanges": {"at", "policy"},
}


def _map(v: Any, label: str, path: str) -> dict[str, Any]:
    if not isinstance(v, dict):
        raise ScenarioError(f"{label}: {path}: expected a mapping, got {type(v).__name__}")
    section = path.rsplit(".", 1)[-1].split("[", 1)[0]
    allowed = _FIELDS.get(section)
    if allowed is not None:
        for key in sorted(set(v) - allowed):
            raise ScenarioError(f"{label}: {path}.{key}: unknown field")
    return v


def _list(spec: dict[str, Any], key: str, label: str) -> list[Any]:
    v = spec.get(key) or []
    if not isinstance(v, list):
        raise ScenarioError(f"{label}: spec.{key}: expected a list")
    return v


def _start(spec: dict[str, Any], label: str, default: str) -> str:
    """``spec.start``: a quoted RFC 3339 time with its zone (YAML reads an unquoted one as a
    datetime, whose zone it may have dropped)."""
    if not isinstance(spec.get("start", default), str):
        raise ScenarioError(f"{label}: spec.start: expected a quoted RFC 3339 time such as \"2026-11-02T00:00:00Z\", "
                            f"got {type(spec['start']).__name__}")
    start = _str(spec, "start", label, default)
    try:
        parse_zoned_ms(start)
    except ValueError as exc:
        raise ScenarioError(f"{label}: spec.start: {start!r}: {exc}") from None
    return start


def _str(m: dict[str, Any], key: str, label: str, default: str | None, path: str = "spec") -> str:
    v = m.get(key, default)
    if v is None:
        raise ScenarioError(f"{label}: {path}.{key}: required field missing")
    if not isinstance(v, str):
        raise ScenarioError(f"{label}: {path}.{key}: expected a string, got {type(v).__name__}{yaml_text_hint(v)}")
    return v


def _bool(m: dict[str, Any], key: str, label: str, default: bool, path: str = "spec") -> bool:
    """A true or false; a quoted "false" is a string, which read as a truth value would be true."""
    v = m.get(key, default)
    if not isinstance(v, bool):
        raise ScenarioError(f"{label}: {path}.{key}: expected true or false, got {type(v).__name__} {v!r}")
    return v


def _num(m: dict[str, Any], key: str, label: str, default: float | None, path: str = "spec") -> float:
    v = m.get(key, default)
    if v is None:
        raise ScenarioError(f"{label}: {path}.{key}: required field missing")
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise ScenarioError(f"{label}: {path}.{key}: expected a finite non-negative number, got {v!r}"
                            f"{yaml_exponent_hint(v)}")
    return float(v)


def _int(m: dict[str, Any], key: str, label: str, default: int | None, path: str = "spec",
         minimum: int = 0) -> int:
    """A count: a whole number (2.5 nodes would otherwise become 2 without a word) >= ``minimum``."""
    v = m.get(key, default)
    if v is None:
        raise ScenarioError(f"{label}: {path}.{key}: required field missing")
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ScenarioError(f"{label}: {path}.{key}: expected a whole number >= {minimum}, got {v!r}"
                            f"{yaml_exponent_hint(v, whole=True)}")
    return v


def _share(m: dict[str, Any], key: str, label: str, path: str) -> float:
    """A probability, 0 when not given: above 1 it would mean what 1 means without a word."""
    v = _num(m, key, label, 0.0, path)
    if v > 1:
        raise ScenarioError(f"{label}: {path}.{key}: a share between 0 and 1, got {v:g}")
    return v


def _duration(m: dict[str, Any], key: str, label: str, path: str, default: str | None = None) -> int:
    v = m.get(key, default)
    if v is None:
        raise ScenarioError(f"{label}: {path}.{key}: required field missing")
    try:
        return parse_duration_ms(v)
    except ValueError as exc:
        raise ScenarioError(f"{label}: {path}.{key}: {exc}") from None
