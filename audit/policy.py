"""ClaimTrail policy documents: parse, validate, default, canonicalise and digest.

A policy (``apiVersion: claimtrail.io/v1alpha1``, ``kind: Policy``) is the versioned rule set every
decision names: tenants (namespace -> tenant), per-tenant quotas per device model (nominal and
borrowing limit), fairness weights and mode, queueing (best-effort or strict FIFO per tenant, reservations), retry/backoff, timeouts, which taints mean
"unhealthy", the device-model table (how a device's model is derived from its attributes, and its
H100-equivalent weight), the fallback mode, whether one pod may mix models, and topology
constraints. ``Policy.digest`` is the sha256 of the canonical form (defaults filled, durations in
milliseconds) less whatever equals the defaults (``digest_input``), so two documents that mean
the same thing have the same digest, and adding a defaulted field to the schema changes no
existing digest.

Pure: no I/O. Loading YAML from a file is the caller's job.
"""

from __future__ import annotations

import datetime
import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from audit.canonical import digest
from audit.records import policy_version_problem, tenant_name_problem

API_VERSION = "claimtrail.io/v1alpha1"
KIND = "Policy"

# adaptive: hold out for the first choice only while its devices are expected free in time
# (audit.scheduler.release_estimate), within spec.fallback.maxWait.
FALLBACK_MODES = ("immediate", "strict", "wait-for-preferred", "adaptive")
FAIRNESS_MODES = ("drf", "off")
# best-effort: a tenant's pod that cannot be placed does not hold back its later pods (Kueue's
# BestEffortFIFO); strict: it does, until capacity changes (Kueue's StrictFIFO).
QUEUEING_MODES = ("best-effort", "strict")
# spec.preemption.minRuntime when the policy does not say: 10m
DEFAULT_MIN_RUNTIME_MS = 600_000
# What a reclaim takes back (audit.scheduler.reclaim): quota, a tenant's nominal quota lent to
# borrowers (Kueue's reclaimWithinCohort); fairShare, its DRF entitlement from tenants holding more
# than theirs (Kueue's fair sharing preemption).
PREEMPTION_BASES = ("quota", "fairShare")
# Classes a policy may declare retryable; the rest of audit.records.RetryClass are terminal by nature.
RETRYABLE_CHOICES = ("binding_conflict", "stale_slice", "unhealthy", "node_lost", "unschedulable", "quota", "fair_share")
DEFAULT_RETRYABLE = ("binding_conflict", "stale_slice", "unhealthy", "node_lost", "unschedulable", "quota", "fair_share")

# The default model table for NVIDIA's DRA driver (gpu.nvidia.com publishes productName, e.g.
# "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"). The H100-equivalent weights are a policy
# choice (relative throughput a site assigns), not a measured fact; sites override them.
DEFAULT_MODEL_RULES: tuple[dict[str, Any], ...] = (
    {"model": "H100", "driver": "gpu.nvidia.com", "attribute": "productName", "match": r"^NVIDIA H100\b", "h100Equivalent": 1.0},
    {"model": "A100", "driver": "gpu.nvidia.com", "attribute": "productName", "match": r"^NVIDIA A100\b", "h100Equivalent": 0.5},
    {"model": "L40S", "driver": "gpu.nvidia.com", "attribute": "productName", "match": r"^NVIDIA L40S\b", "h100Equivalent": 0.35},
    {"model": "L4", "driver": "gpu.nvidia.com", "attribute": "productName", "match": r"^NVIDIA L4$", "h100Equivalent": 0.12},
)

UNKNOWN_MODEL = "unknown"

_DURATION_RE = re.compile(r"^(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$")


class PolicyError(ValueError):
    """A policy document is invalid; ``path`` names the field (``spec.tenants[1].weight``)."""

    def __init__(self, name: str, path: str, message: str) -> None:
        super().__init__(f"Policy {name}: {path}: {message}")
        self.path = path
        self.message = message


@dataclass(frozen=True)
class Quota:
    nominal: int
    borrowing_limit: int | None  # None: may borrow any unused nominal quota of other tenants

    @property
    def limit(self) -> int | None:
        return None if self.borrowing_limit is None else self.nominal + self.borrowing_limit


@dataclass(frozen=True)
class Tenant:
    name: str
    namespaces: tuple[str, ...]
    weight: float
    quotas: Mapping[str, Quota] = field(default_factory=dict)


@dataclass(frozen=True)
class ModelRule:
    model: str  # may use regex group references (\1) to keep the attribute's own text
    driver: str
    attribute: str
    match: str
    h100_equivalent: float
    pattern: re.Pattern[str] = field(compare=False, repr=False, default=re.compile(""))


@dataclass(frozen=True)
class Policy:
    name: str
    version: str
    tenants: tuple[Tenant, ...]
    fairness_mode: str
    usage_half_life_ms: int
    wait_aging_per_hour: float
    defer_above_share: bool
    preemption: bool
    backoff_base_ms: int
    backoff_cap_ms: int
    max_attempts: int
    retryable: tuple[str, ...]
    allocation_timeout_ms: int
    binding_timeout_ms: int
    starvation_ms: int
    unhealthy_taint_keys: tuple[str, ...]
    unhealthy_taint_suffixes: tuple[str, ...]
    model_rules: tuple[ModelRule, ...]
    fallback_mode: str
    fallback_wait_ms: int
    fallback_max_wait_ms: int
    queueing_mode: str
    mixed_models: bool
    topology_match_attributes: tuple[str, ...]
    regret_window_ms: int
    # queueing.reserveAfter (None: no reservations) and how many a tenant may hold at once
    reserve_after_ms: int | None = None
    max_reservations_per_tenant: int = 1
    # queueing.soleChoiceFirst: a tenant's pods with no other choice go ahead of its flexible ones
    sole_choice_first: bool = False
    # preemption.minRuntime: a running pod younger than this is never a reclaim victim
    preemption_min_runtime_ms: int = DEFAULT_MIN_RUNTIME_MS
    # preemption.basis: what a reclaim takes back (PREEMPTION_BASES)
    preemption_basis: str = "quota"
    canonical: Mapping[str, Any] = field(compare=False, repr=False, default_factory=dict)
    digest: str = ""

    # ---- lookups the engine and metrics use -------------------------------------------------

    def tenant_for(self, namespace: str) -> str:
        """Namespaces not listed by any tenant form a tenant of their own name (weight 1, no quota)."""
        return _tenant_index(self).get(namespace, namespace)

    def tenant(self, name: str) -> Tenant | None:
        for t in self.tenants:
            if t.name == name:
                return t
        return None

    def weight(self, tenant: str) -> float:
        t = self.tenant(tenant)
        return t.weight if t else 1.0

    def quota(self, tenant: str, model: str) -> Quota | None:
        t = self.tenant(tenant)
        return t.quotas.get(model) if t else None

    def model_of(self, driver: str, attributes: Mapping[str, Any]) -> str:
        """The device's model by the first matching rule; devices no rule matches are ``unknown``."""
        for rule in self.model_rules:
            if rule.driver != driver:
                continue
            value = attribute_text(driver, attributes, rule.attribute)
            if value is None:
                continue
            m = rule.pattern.search(value)
            if m:
                return m.expand(rule.model) if "\\" in rule.model else rule.model
        return UNKNOWN_MODEL

    def model_attribute(self) -> str:
        """Fully qualified attribute the model table reads (for the no-mixed-models constraint)."""
        if not self.model_rules:
            return ""
        rule = self.model_rules[0]
        return rule.attribute if "/" in rule.attribute else f"{rule.driver}/{rule.attribute}"

    def h100_equivalent(self, model: str) -> float:
        for rule in self.model_rules:
            if rule.model == model:
                return rule.h100_equivalent
        return 1.0

    def is_unhealthy_taint(self, key: str) -> bool:
        return key in self.unhealthy_taint_keys or any(key.endswith(s) for s in self.unhealthy_taint_suffixes)

    def backoff_ms(self, attempt: int) -> int:
        """Capped exponential backoff after failed attempt number ``attempt`` (1-based)."""
        return min(self.backoff_cap_ms, self.backoff_base_ms * (2 ** max(0, attempt - 1)))

    def is_retryable(self, retry_class: str) -> bool:
        return retry_class in self.retryable


_TENANT_INDEX_CACHE: dict[str, dict[str, str]] = {}


def _tenant_index(policy: Policy) -> dict[str, str]:
    idx = _TENANT_INDEX_CACHE.get(policy.digest)
    if idx is None:
        idx = {ns: t.name for t in policy.tenants for ns in t.namespaces}
        _TENANT_INDEX_CACHE[policy.digest] = idx
    return idx


def attribute_text(driver: str, attributes: Mapping[str, Any], name: str) -> str | None:
    """An attribute's value as text, looked up the way upstream does (qualified, then driver-local)."""
    raw = attributes.get(name)
    if raw is None and "/" in name:
        domain, _, ident = name.partition("/")
        if domain == driver:
            raw = attributes.get(ident)
    if raw is None and "/" not in name:
        raw = attributes.get(f"{driver}/{name}")
    if not isinstance(raw, Mapping):
        return None
    for key in ("string", "version", "int", "bool"):
        if key in raw:
            return str(raw[key])
    return None


# ---- parsing ----------------------------------------------------------------------------------


def parse_duration_ms(value: Any) -> int:
    """``90`` (seconds), ``"90s"``, ``"10m"``, ``"1h30m"``, ``"250ms"`` -> milliseconds."""
    if isinstance(value, bool):
        raise ValueError("expected a duration like 90s, 10m or 1h")
    if isinstance(value, int):
        if value < 0:
            raise ValueError("must not be negative")
        return value * 1000
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("must be a finite number")
        if value < 0:
            raise ValueError("must not be negative")
        return round(value * 1000)
    if not isinstance(value, str) or not value:
        raise ValueError("expected a duration like 90s, 10m or 1h")
    m = _DURATION_RE.match(value.strip())
    if not m or not any(m.groups()):
        raise ValueError(f"invalid duration {value!r} (expected e.g. 90s, 10m, 1h30m, 250ms){yaml_exponent_hint(value)}")
    h, mi, s, ms = (int(g) if g else 0 for g in m.groups())
    return ((h * 60 + mi) * 60 + s) * 1000 + ms


# YAML 1.1 reads a bare off, on, yes or no as a boolean, and `mode: off` is the natural spelling:
# added to the message of every text field that got a boolean
YAML_BOOLEAN_HINT = " (YAML reads a bare off/on/yes/no as a boolean: quote it)"
# ...and a bare 1.10 as the number 1.1, 010 as 8 and 2026-01-02 as a date: a name, version or model
# written so has lost its text by the time it is read, so it is refused rather than turned back
YAML_NUMBER_HINT = ' (YAML reads a bare number as a number, 1.10 as 1.1: quote it, as in "1.10")'
YAML_DATE_HINT = ' (YAML reads a bare date as a date: quote it, as in "2026-01-02")'


def yaml_text_hint(value: Any) -> str:
    """The hint for a text field that YAML read as another type, or "" when quoting would not help."""
    if isinstance(value, bool):
        return YAML_BOOLEAN_HINT
    if isinstance(value, int | float):
        return YAML_NUMBER_HINT
    if isinstance(value, datetime.date):
        return YAML_DATE_HINT
    return ""


# YAML 1.1 (PyYAML) reads a number in exponent notation only with a dot and a signed exponent:
# 1e9 and even 1.0e9 are text, 1.0e+9 is the number
_EXPONENT_RE = re.compile(r"^([-+]?)([0-9]*)(?:\.([0-9]*))?[eE]([-+]?)([0-9]+)$")


def yaml_exponent_hint(value: Any, whole: bool = False) -> str:
    """The hint for a number field that got text YAML did not read as a number but Python would
    (``1e9``): how to write it so that YAML reads it; a ``whole`` number is written out in full."""
    if not isinstance(value, str):
        return ""
    m = _EXPONENT_RE.match(value.strip())
    if not m or not (m.group(2) or m.group(3)):
        return ""
    number = float(value)
    if not math.isfinite(number):
        return ""
    if whole:
        if not number.is_integer() or abs(number) >= 1e15:
            return ""
        written = str(int(number))
    else:
        sign, units, fraction, exp_sign, exponent = m.groups()
        written = f"{sign}{units or '0'}.{fraction or '0'}e{exp_sign or '+'}{exponent}"
    return f" (YAML reads {value.strip()} as text, not a number: write {written})"


class _Reader:
    """Walks a raw dict, collecting every problem with its field path."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.errors: list[PolicyError] = []

    def fail(self, path: str, message: str) -> None:
        self.errors.append(PolicyError(self.name, path, message))

    def mapping(self, obj: Any, path: str) -> dict[str, Any]:
        if obj is None:
            return {}
        if not isinstance(obj, dict):
            self.fail(path, f"expected a mapping, got {type(obj).__name__}")
            return {}
        return obj

    def unknown(self, obj: dict[str, Any], allowed: set[str], path: str) -> None:
        for key in sorted(set(obj) - allowed):
            self.fail(f"{path}.{key}" if path else key, "unknown field")

    def number(self, obj: dict[str, Any], key: str, path: str, default: float, minimum: float = 0.0,
               exclusive: bool = False) -> float:
        v = obj.get(key, default)
        if isinstance(v, bool) or not isinstance(v, int | float):
            self.fail(f"{path}.{key}", f"expected a number, got {type(v).__name__}{yaml_exponent_hint(v)}")
            return default
        # YAML's .nan and .inf are floats, but no weight or rate means them and the digest's JSON cannot hold them
        if not math.isfinite(v):
            self.fail(f"{path}.{key}", "must be a finite number")
            return default
        if v < minimum or (exclusive and v == minimum):
            self.fail(f"{path}.{key}", f"must be {'>' if exclusive else '>='} {minimum:g}")
            return default
        return float(v)

    def integer(self, obj: dict[str, Any], key: str, path: str, default: int | None, minimum: int = 0) -> int | None:
        v = obj.get(key, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(f"{path}.{key}", f"expected an integer, got {type(v).__name__}{yaml_exponent_hint(v, whole=True)}")
            return default
        if v < minimum:
            self.fail(f"{path}.{key}", f"must be >= {minimum}")
            return default
        return v

    def duration(self, obj: dict[str, Any], key: str, path: str, default: str) -> int:
        try:
            return parse_duration_ms(obj.get(key, default))
        except ValueError as exc:
            self.fail(f"{path}.{key}", str(exc))
            return parse_duration_ms(default)

    def string(self, obj: dict[str, Any], key: str, path: str, default: str | None = None,
               choices: tuple[str, ...] = ()) -> str:
        v = obj.get(key, default)
        if v is None:
            self.fail(f"{path}.{key}", "required field missing")
            return ""
        if not isinstance(v, str):
            # a mode of 5 is no better quoted; a name or model of 5 is
            hint = yaml_text_hint(v) if not choices or isinstance(v, bool) else ""
            self.fail(f"{path}.{key}", f"expected a string, got {type(v).__name__}{hint}")
            return default or ""
        if choices and v not in choices:
            self.fail(f"{path}.{key}", f"must be one of {', '.join(choices)} (got {v!r})")
            return default or choices[0]
        return v

    def boolean(self, obj: dict[str, Any], key: str, path: str, default: bool) -> bool:
        v = obj.get(key, default)
        if not isinstance(v, bool):
            self.fail(f"{path}.{key}", f"expected true or false, got {type(v).__name__}")
            return default
        return v

    def strings(self, obj: dict[str, Any], key: str, path: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        v = obj.get(key, list(default))
        if not isinstance(v, list):
            self.fail(f"{path}.{key}", "expected a list of strings")
            return default
        for i, x in enumerate(v):
            if not isinstance(x, str):
                self.fail(f"{path}.{key}[{i}]", f"expected a string, got {type(x).__name__}{yaml_text_hint(x)}")
        if not all(isinstance(x, str) for x in v):
            return default
        return tuple(v)


def parse_policy(raw: Any) -> Policy:
    """Parse and validate a policy document; raises ``PolicyError`` naming the first bad field."""
    policy, errors = _parse(raw)
    if errors:
        raise errors[0]
    assert policy is not None
    return policy


def policy_findings(raw: Any) -> list[PolicyError]:
    """Every validation problem of a document (empty when it parses)."""
    return _parse(raw)[1]


def default_policy(name: str = "default", version: str = "1") -> Policy:
    return parse_policy({"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": {"version": version}})


def _parse(raw: Any) -> tuple[Policy | None, list[PolicyError]]:
    fields, errors = _fields(raw)
    if fields is None:
        return None, errors
    canonical = _canonical(fields)
    return Policy(**fields, canonical=canonical, digest=digest(digest_input(canonical, _default_canonical()))), []


def _fields(raw: Any) -> tuple[dict[str, Any] | None, list[PolicyError]]:
    if not isinstance(raw, dict):
        return None, [PolicyError("?", "", f"expected a mapping, got {type(raw).__name__}")]
    meta_raw = raw.get("metadata")
    meta: dict[str, Any] = meta_raw if isinstance(meta_raw, dict) else {}
    name_raw = meta.get("name")
    name: str = name_raw if isinstance(name_raw, str) and name_raw else "?"
    r = _Reader(name)
    if name_raw is not None and not isinstance(name_raw, str):
        r.fail("metadata.name", f"expected a string, got {type(name_raw).__name__}{yaml_text_hint(name_raw)}")
    r.unknown(raw, {"apiVersion", "kind", "metadata", "spec"}, "")
    if raw.get("apiVersion") != API_VERSION:
        r.fail("apiVersion", f"must be {API_VERSION} (got {raw.get('apiVersion')!r})")
    if raw.get("kind") != KIND:
        r.fail("kind", f"must be {KIND} (got {raw.get('kind')!r})")
    if name == "?" and (name_raw is None or isinstance(name_raw, str)):
        r.fail("metadata.name", "required field missing")
    spec = r.mapping(raw.get("spec"), "spec")
    r.unknown(spec, {"version", "tenants", "fairness", "preemption", "retry", "timeouts", "health", "deviceModels",
                     "fallback", "queueing", "mixedModels", "topology"}, "spec")
    version = spec.get("version")
    # not turned back into text: YAML has read version: 1.10 as 1.1 already
    if version is not None and not isinstance(version, str):
        r.fail("spec.version", f"expected a string, got {type(version).__name__}{yaml_text_hint(version)}")
        version = ""
    elif not version:
        r.fail("spec.version", "required: a non-empty string")
        version = ""
    elif policy_version_problem(version):  # every record carries it, and the store refuses it
        r.fail("spec.version", policy_version_problem(version))

    tenants = _tenants(r, spec.get("tenants", []))
    fairness = r.mapping(spec.get("fairness"), "spec.fairness")
    r.unknown(fairness, {"mode", "usageHalfLife", "waitAgingPerHour", "deferAboveShare"}, "spec.fairness")
    preemption = r.mapping(spec.get("preemption"), "spec.preemption")
    r.unknown(preemption, {"enabled", "minRuntime", "basis"}, "spec.preemption")
    retry = r.mapping(spec.get("retry"), "spec.retry")
    r.unknown(retry, {"backoffBase", "backoffCap", "maxAttempts", "retryable"}, "spec.retry")
    timeouts = r.mapping(spec.get("timeouts"), "spec.timeouts")
    r.unknown(timeouts, {"allocation", "bindingConditions", "starvation"}, "spec.timeouts")
    health = r.mapping(spec.get("health"), "spec.health")
    r.unknown(health, {"unhealthyTaintKeys", "unhealthyTaintSuffixes"}, "spec.health")
    fallback = r.mapping(spec.get("fallback"), "spec.fallback")
    r.unknown(fallback, {"mode", "wait", "maxWait", "regretWindow"}, "spec.fallback")
    queueing = r.mapping(spec.get("queueing"), "spec.queueing")
    r.unknown(queueing, {"mode", "reserveAfter", "maxReservationsPerTenant", "soleChoiceFirst"}, "spec.queueing")
    topology = r.mapping(spec.get("topology"), "spec.topology")
    r.unknown(topology, {"matchAttributes"}, "spec.topology")

    retryable = r.strings(retry, "retryable", "spec.retry", DEFAULT_RETRYABLE)
    for i, cls in enumerate(retryable):
        if cls not in RETRYABLE_CHOICES:
            r.fail(f"spec.retry.retryable[{i}]", f"unknown class {cls!r} (one of {', '.join(RETRYABLE_CHOICES)})")
    rules = _model_rules(r, spec.get("deviceModels", [dict(x) for x in DEFAULT_MODEL_RULES]))
    base_ms = r.duration(retry, "backoffBase", "spec.retry", "1s")
    cap_ms = r.duration(retry, "backoffCap", "spec.retry", "5m")
    if cap_ms < base_ms:
        r.fail("spec.retry.backoffCap", "must be >= backoffBase")
    max_attempts = r.integer(retry, "maxAttempts", "spec.retry", 8, minimum=1) or 8
    half_life = r.duration(fairness, "usageHalfLife", "spec.fairness", "1h")
    if half_life == 0:
        r.fail("spec.fairness.usageHalfLife", "must be > 0")
        half_life = 3_600_000

    # a quota for a model no rule yields never applies: with no rule at all, every device is
    # unknown, so a quota is refused then too (a rule with a group reference may yield any model)
    known_models = {rule.model for rule in rules}
    any_model = any("\\" in x.model for x in rules)
    table_is_list = isinstance(spec.get("deviceModels", []), list)
    for ti, t in enumerate(tenants):
        for model in t.quotas:
            if table_is_list and model not in known_models and not any_model:
                r.fail(f"spec.tenants[{ti}].quotas.{model}",
                       "model is not produced by any spec.deviceModels rule" if rules else
                       f"model is not produced by any spec.deviceModels rule (the table is empty: every device is "
                       f"model {UNKNOWN_MODEL})")
    seen_ns: dict[str, str] = {}
    for ti, t in enumerate(tenants):
        for ns in t.namespaces:
            if ns in seen_ns:
                r.fail(f"spec.tenants[{ti}].namespaces", f"namespace {ns!r} already belongs to tenant {seen_ns[ns]!r}")
            seen_ns[ns] = t.name

    fields: dict[str, Any] = dict(
        name=name,
        version=version,
        tenants=tuple(sorted(tenants, key=lambda t: t.name)),
        fairness_mode=r.string(fairness, "mode", "spec.fairness", "drf", FAIRNESS_MODES),
        usage_half_life_ms=half_life,
        wait_aging_per_hour=r.number(fairness, "waitAgingPerHour", "spec.fairness", 0.5),
        defer_above_share=r.boolean(fairness, "deferAboveShare", "spec.fairness", False),
        preemption=r.boolean(preemption, "enabled", "spec.preemption", False),
        preemption_min_runtime_ms=r.duration(preemption, "minRuntime", "spec.preemption", "10m"),
        preemption_basis=r.string(preemption, "basis", "spec.preemption", "quota", PREEMPTION_BASES),
        backoff_base_ms=base_ms,
        backoff_cap_ms=cap_ms,
        max_attempts=max_attempts,
        retryable=tuple(sorted(set(retryable))),
        # Upstream's DRA filter timeout default is 10 s (DynamicResourcesArgs); binding conditions 600 s.
        allocation_timeout_ms=r.duration(timeouts, "allocation", "spec.timeouts", "10s"),
        binding_timeout_ms=r.duration(timeouts, "bindingConditions", "spec.timeouts", "600s"),
        starvation_ms=r.duration(timeouts, "starvation", "spec.timeouts", "1h"),
        unhealthy_taint_keys=tuple(sorted(set(r.strings(health, "unhealthyTaintKeys", "spec.health")))),
        unhealthy_taint_suffixes=tuple(sorted(set(r.strings(health, "unhealthyTaintSuffixes", "spec.health",
                                                             ("/unhealthy",))))),
        model_rules=rules,
        fallback_mode=r.string(fallback, "mode", "spec.fallback", "immediate", FALLBACK_MODES),
        fallback_wait_ms=r.duration(fallback, "wait", "spec.fallback", "10m"),
        fallback_max_wait_ms=r.duration(fallback, "maxWait", "spec.fallback", "10m"),
        # how long after a fallback the first choice becoming allocatable still counts as regret
        regret_window_ms=r.duration(fallback, "regretWindow", "spec.fallback", "10m"),
        queueing_mode=r.string(queueing, "mode", "spec.queueing", "best-effort", QUEUEING_MODES),
        reserve_after_ms=(r.duration(queueing, "reserveAfter", "spec.queueing", "0s")
                          if queueing.get("reserveAfter") is not None else None),
        max_reservations_per_tenant=r.integer(queueing, "maxReservationsPerTenant", "spec.queueing", 1,
                                              minimum=1) or 1,
        sole_choice_first=r.boolean(queueing, "soleChoiceFirst", "spec.queueing", False),
        mixed_models=r.boolean(spec, "mixedModels", "spec", True),
        topology_match_attributes=tuple(sorted(set(r.strings(topology, "matchAttributes", "spec.topology")))),
    )
    if r.errors:
        return None, r.errors
    return fields, []


# What the digest covers is what a document says beyond the defaults, so that a field added to
# policies later, whose default keeps today's behaviour, leaves every existing digest unchanged:
# decisions recorded under a policy still verify after an upgrade. Changing what a default *is*
# changes what documents relying on it mean, and must bump this number (which changes every
# digest, as it should).
DIGEST_DEFAULTS_VERSION = 1


@functools.cache
def _default_canonical() -> dict[str, Any]:
    fields, errors = _fields({"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "default"}, "spec": {"version": "1"}})
    assert fields is not None, errors
    return _canonical(fields)


def digest_input(canonical: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The canonical form without what equals ``defaults`` (nested mappings compared key by key,
    everything else whole), tagged with ``DIGEST_DEFAULTS_VERSION``."""
    return {"digestDefaults": DIGEST_DEFAULTS_VERSION, **_beyond(canonical, defaults)}


_ABSENT = object()


def _beyond(value: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        default = defaults.get(key, _ABSENT)
        if isinstance(item, Mapping) and isinstance(default, Mapping):
            inner = _beyond(item, default)
            if inner:
                out[key] = inner
        elif default is _ABSENT or type(item) is not type(default) or item != default:
            out[key] = item
    return out


def _tenants(r: _Reader, raw: Any) -> list[Tenant]:
    if not isinstance(raw, list):
        r.fail("spec.tenants", "expected a list")
        return []
    out: list[Tenant] = []
    names: set[str] = set()
    for i, item in enumerate(raw):
        path = f"spec.tenants[{i}]"
        t = r.mapping(item, path)
        r.unknown(t, {"name", "namespaces", "weight", "quotas"}, path)
        name = r.string(t, "name", path)
        # a tenant's name goes into every record of its pods, which the store refuses with a
        # name it cannot hold: refused here, before any decision is made under it
        problem = tenant_name_problem(name)
        if problem:
            r.fail(f"{path}.name", problem)
        if name in names:
            r.fail(f"{path}.name", f"duplicate tenant {name!r}")
        names.add(name)
        namespaces = r.strings(t, "namespaces", path, (name,) if name else ())
        weight = r.number(t, "weight", path, 1.0, minimum=0.0, exclusive=True)
        quotas: dict[str, Quota] = {}
        qraw = r.mapping(t.get("quotas"), f"{path}.quotas")
        for model in [k for k in qraw if not isinstance(k, str)]:
            r.fail(f"{path}.quotas.{model}", f"expected a string, got {type(model).__name__}{yaml_text_hint(model)}")
        for model in sorted(k for k in qraw if isinstance(k, str)):
            qpath = f"{path}.quotas.{model}"
            q = r.mapping(qraw[model], qpath)
            r.unknown(q, {"nominal", "borrowingLimit"}, qpath)
            if q.get("nominal") is None:
                r.fail(f"{qpath}.nominal", "required field missing")
            # a nominal given but refused is named once, for what is wrong with it
            nominal = r.integer(q, "nominal", qpath, 0) or 0
            borrowing = r.integer(q, "borrowingLimit", qpath, 0) if "borrowingLimit" in q else 0
            quotas[model] = Quota(nominal=nominal, borrowing_limit=borrowing)
        out.append(Tenant(name=name, namespaces=tuple(sorted(set(namespaces))), weight=weight, quotas=quotas))
    return out


def _model_rules(r: _Reader, raw: Any) -> tuple[ModelRule, ...]:
    if not isinstance(raw, list):
        r.fail("spec.deviceModels", "expected a list")
        return ()
    rules: list[ModelRule] = []
    for i, item in enumerate(raw):
        path = f"spec.deviceModels[{i}]"
        m = r.mapping(item, path)
        r.unknown(m, {"model", "driver", "attribute", "match", "prefix", "h100Equivalent"}, path)
        if "match" in m and "prefix" in m:
            r.fail(path, "set either match (regex) or prefix, not both")
        if "prefix" in m:
            prefix = r.string(m, "prefix", path)
            match = "^" + re.escape(prefix)
        else:
            match = r.string(m, "match", path)
        try:
            pattern = re.compile(match)
        except re.error as exc:
            r.fail(f"{path}.match", f"invalid regular expression: {exc}")
            pattern = re.compile("(?!)")
        model = r.string(m, "model", path)
        if "\\" in model and pattern.groups == 0:
            r.fail(f"{path}.model", "uses a group reference but match has no groups")
        rules.append(ModelRule(
            model=model,
            driver=r.string(m, "driver", path, "gpu.nvidia.com"),
            attribute=r.string(m, "attribute", path, "productName"),
            match=match,
            h100_equivalent=r.number(m, "h100Equivalent", path, 1.0),
            pattern=pattern,
        ))
    return tuple(rules)


def _canonical(f: dict[str, Any]) -> dict[str, Any]:
    """The digest's input: every field, defaults filled, durations in ms, unordered lists sorted."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": f["name"],
        "version": f["version"],
        "tenants": [
            {"name": t.name, "namespaces": list(t.namespaces), "weight": t.weight,
             "quotas": {m: {"nominal": q.nominal, "borrowingLimit": q.borrowing_limit} for m, q in sorted(t.quotas.items())}}
            for t in f["tenants"]
        ],
        "fairness": {"mode": f["fairness_mode"], "usageHalfLifeMs": f["usage_half_life_ms"],
                     "waitAgingPerHour": f["wait_aging_per_hour"], "deferAboveShare": f["defer_above_share"]},
        # basis only when not quota: policies that do not use it keep the digest they had
        "preemption": {"enabled": f["preemption"], "minRuntimeMs": f["preemption_min_runtime_ms"],
                       **({"basis": f["preemption_basis"]} if f["preemption_basis"] != "quota" else {})},
        "retry": {"backoffBaseMs": f["backoff_base_ms"], "backoffCapMs": f["backoff_cap_ms"],
                  "maxAttempts": f["max_attempts"], "retryable": list(f["retryable"])},
        "timeouts": {"allocationMs": f["allocation_timeout_ms"], "bindingConditionsMs": f["binding_timeout_ms"],
                     "starvationMs": f["starvation_ms"]},
        "health": {"unhealthyTaintKeys": list(f["unhealthy_taint_keys"]),
                   "unhealthyTaintSuffixes": list(f["unhealthy_taint_suffixes"])},
        "deviceModels": [
            {"model": x.model, "driver": x.driver, "attribute": x.attribute, "match": x.match,
             "h100Equivalent": x.h100_equivalent}
            for x in f["model_rules"]
        ],
        "fallback": {"mode": f["fallback_mode"], "waitMs": f["fallback_wait_ms"],
                     "maxWaitMs": f["fallback_max_wait_ms"], "regretWindowMs": f["regret_window_ms"]},
        # soleChoiceFirst only when on: policies that do not use it keep the digest they had
        "queueing": {"mode": f["queueing_mode"], "reserveAfterMs": f["reserve_after_ms"],
                     "maxReservationsPerTenant": f["max_reservations_per_tenant"],
                     **({"soleChoiceFirst": True} if f["sole_choice_first"] else {})},
        "mixedModels": f["mixed_models"],
        "topology": {"matchAttributes": list(f["topology_match_attributes"])},
    }


def _preemption_document(policy: Policy) -> dict[str, Any]:
    out: dict[str, Any] = {"enabled": policy.preemption}
    if policy.preemption or policy.preemption_min_runtime_ms != DEFAULT_MIN_RUNTIME_MS:
        out["minRuntime"] = f"{policy.preemption_min_runtime_ms}ms"
    if policy.preemption_basis != "quota":
        out["basis"] = policy.preemption_basis
    return out


def policy_document(policy: Policy) -> dict[str, Any]:
    """A document that parses back to an equal policy (the payload of a Policy world event)."""
    c = policy.canonical
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": policy.name},
        "spec": {
            "version": policy.version,
            "tenants": [
                {"name": t["name"], "namespaces": t["namespaces"], "weight": t["weight"], "quotas": t["quotas"]}
                for t in c["tenants"]
            ],
            "fairness": {"mode": policy.fairness_mode, "usageHalfLife": f"{policy.usage_half_life_ms}ms",
                         "waitAgingPerHour": policy.wait_aging_per_hour,
                         "deferAboveShare": policy.defer_above_share},
            # minRuntime when on or not the default, and basis when not quota, so the documents of
            # policies without reclaim stay as they were and every document still parses back to the
            # policy's digest
            "preemption": _preemption_document(policy),
            "retry": {"backoffBase": f"{policy.backoff_base_ms}ms", "backoffCap": f"{policy.backoff_cap_ms}ms",
                      "maxAttempts": policy.max_attempts, "retryable": list(policy.retryable)},
            "timeouts": {"allocation": f"{policy.allocation_timeout_ms}ms",
                         "bindingConditions": f"{policy.binding_timeout_ms}ms",
                         "starvation": f"{policy.starvation_ms}ms"},
            "health": {"unhealthyTaintKeys": list(policy.unhealthy_taint_keys),
                       "unhealthyTaintSuffixes": list(policy.unhealthy_taint_suffixes)},
            "deviceModels": c["deviceModels"],
            "fallback": {"mode": policy.fallback_mode, "wait": f"{policy.fallback_wait_ms}ms",
                         "maxWait": f"{policy.fallback_max_wait_ms}ms",
                         "regretWindow": f"{policy.regret_window_ms}ms"},
            "queueing": {"mode": policy.queueing_mode, **({} if policy.reserve_after_ms is None else {
                "reserveAfter": f"{policy.reserve_after_ms}ms",
                "maxReservationsPerTenant": policy.max_reservations_per_tenant}),
                **({"soleChoiceFirst": True} if policy.sole_choice_first else {})},
            "mixedModels": policy.mixed_models,
            "topology": {"matchAttributes": list(policy.topology_match_attributes)},
        },
    }


def contradictions(raw: Mapping[str, Any], policy: Policy) -> list[PolicyError]:
    """Settings the document states that other settings make meaningless, one error each.

    Read from what the document says (not from defaults, which never contradict): a setting that
    silently does nothing is a misunderstanding the author should hear about before rollout."""
    spec = raw.get("spec") if isinstance(raw.get("spec"), Mapping) else {}
    assert isinstance(spec, Mapping)

    def said(section: str) -> Mapping[str, Any]:
        value = spec.get(section)
        return value if isinstance(value, Mapping) else {}

    out: list[PolicyError] = []
    fairness, fallback = said("fairness"), said("fallback")
    if policy.fairness_mode == "off":
        if fairness.get("deferAboveShare") is True:
            out.append(PolicyError(policy.name, "spec.fairness.deferAboveShare",
                                   "has no effect with spec.fairness.mode off (no shares are computed)"))
        if fairness.get("waitAgingPerHour") not in (None, 0, 0.0):
            out.append(PolicyError(policy.name, "spec.fairness.waitAgingPerHour",
                                   "has no effect with spec.fairness.mode off (the order is plain FIFO)"))
        if "usageHalfLife" in fairness:
            out.append(PolicyError(policy.name, "spec.fairness.usageHalfLife",
                                   "has no effect with spec.fairness.mode off (no usage is weighed)"))
    queueing = said("queueing")
    if "maxReservationsPerTenant" in queueing and policy.reserve_after_ms is None:
        out.append(PolicyError(policy.name, "spec.queueing.maxReservationsPerTenant",
                               "has no effect without spec.queueing.reserveAfter (no pod is ever reserved for)"))
    if "wait" in fallback and policy.fallback_mode != "wait-for-preferred":
        out.append(PolicyError(policy.name, "spec.fallback.wait",
                               f"only applies to mode wait-for-preferred (mode is {policy.fallback_mode})"))
    if "regretWindow" in fallback and policy.fallback_mode == "strict":
        out.append(PolicyError(policy.name, "spec.fallback.regretWindow",
                               "has no effect with mode strict (no pod falls back, so none is regretted)"))
    if "maxWait" in fallback and policy.fallback_mode != "adaptive":
        out.append(PolicyError(policy.name, "spec.fallback.maxWait",
                               f"only applies to mode adaptive (mode is {policy.fallback_mode})"))
    preemption = said("preemption")
    if "minRuntime" in preemption and not policy.preemption:
        out.append(PolicyError(policy.name, "spec.preemption.minRuntime",
                               "has no effect without spec.preemption.enabled true (nothing is ever preempted)"))
    if "basis" in preemption and not policy.preemption:
        out.append(PolicyError(policy.name, "spec.preemption.basis",
                               "has no effect without spec.preemption.enabled true (nothing is ever preempted)"))
    if policy.preemption and policy.preemption_basis == "fairShare" and policy.fairness_mode != "drf":
        out.append(PolicyError(policy.name, "spec.preemption.basis",
                               "fairShare reclaims DRF entitlements, but spec.fairness.mode is off (no entitlement "
                               "is computed)"))
    if (policy.preemption and policy.preemption_basis == "quota"
            and not any(q.nominal > 0 for t in policy.tenants for q in t.quotas.values())):
        out.append(PolicyError(policy.name, "spec.preemption.enabled",
                               "reclaim needs nominal quota, but no tenant has a nominal quota above 0 for any model "
                               "(spec.tenants[*].quotas; spec.preemption.basis: fairShare reclaims fair shares "
                               "instead)"))
    raw_tenants = spec.get("tenants") if isinstance(spec.get("tenants"), list) else []
    assert isinstance(raw_tenants, list)
    index = {str(x.get("name")): i for i, x in enumerate(raw_tenants) if isinstance(x, Mapping)}
    for t in policy.tenants:
        for model, q in sorted(t.quotas.items()):
            if q.borrowing_limit == 0:
                continue
            lenders = [o.name for o in policy.tenants if o.name != t.name and o.quotas.get(model, Quota(0, 0)).nominal > 0]
            if not lenders:
                out.append(PolicyError(policy.name, f"spec.tenants[{index.get(t.name, '?')}].quotas.{model}.borrowingLimit",
                                       f"no other tenant has nominal {model} quota to lend"))
    return out


def capacity_findings(policy: Policy, devices_per_model: Mapping[str, int]) -> list[str]:
    """Promises the cluster cannot keep: Σ nominal quota of a model above its device count."""
    out: list[str] = []
    totals: dict[str, int] = {}
    for t in policy.tenants:
        for model, q in t.quotas.items():
            totals[model] = totals.get(model, 0) + q.nominal
    for model in sorted(totals):
        have = devices_per_model.get(model, 0)
        if totals[model] > have:
            out.append(f"Policy {policy.name}: spec.tenants[*].quotas.{model}.nominal: sum of nominal quota "
                       f"{totals[model]} exceeds the {have} {model} devices in the cluster")
    return out
