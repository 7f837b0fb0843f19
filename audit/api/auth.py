"""Bearer tokens, tenants and response redaction for the audit API.

The tokens file is YAML: either a list of entries or a mapping with ``tokens:`` (that list)
and an optional ``redaction:`` block. Each entry names a token by its SHA-256 hex digest
(``token_sha256``; ``claimtrail serve --hash-token`` prints it) or, for local setups, in clear
(``token``, hashed when loaded and never kept), and grants either one ``tenant`` or
``admin: true``. Only digests are held in memory, so a memory dump or a log never shows a token.

Example::

    tokens:
      - token_sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
        tenant: team-a
      - token_sha256: 60303ae22b998861bce3b28f33eec1be758a213c86c93c076dbe9f558c11c752
        admin: true
    redaction:               # what non-admins see; the same settings as OTLP export
      hash_pod_names: true   # pod names, wherever they appear, become sha256:<16 hex>
      drop_labels: true      # no per-device details (they carry node labels, selectors, taints)
      salt: "..."            # optional: the key of pod-name hashes; by default one kept in the data
                             # directory (redaction.salt), so a dictionary of pod names cannot reverse them
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from audit.api.stored import record_data
from audit.api.tenant_view import tenant_explanation, tenant_view
from audit.dra.loader import yaml_problem
from audit.errors import UserError
from audit.records import DecisionRecord, record_dict, tenant_name_problem
from audit.telemetry.redaction import OPTIONS as REDACTION_OPTIONS
from audit.telemetry.redaction import Redaction, Scrubber, redact

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    """Who is calling: an admin (sees every tenant) or exactly one tenant."""

    tenant: str | None
    admin: bool = False

    @property
    def scope(self) -> str | None:
        """The tenant every query is restricted to; None means all tenants (admin)."""
        return None if self.admin else self.tenant


ADMIN = Principal(tenant=None, admin=True)


@dataclass(frozen=True)
class AuthConfig:
    """Token digests → principals; ``insecure_local`` makes every caller an admin."""

    principals: dict[str, Principal] = field(default_factory=dict)
    redaction: Redaction = Redaction()
    insecure_local: bool = False

    def authenticate(self, authorization: str | None) -> Principal | None:
        if self.insecure_local:
            return ADMIN
        if not authorization:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.principals.get(hash_token(token.strip()))


def _entry(index: int, raw: Any, source: str) -> tuple[str, Principal]:
    where = f"tokens file {source}: tokens[{index}]"
    if not isinstance(raw, dict):
        raise UserError(f"{where}: expected a mapping with token_sha256 (or token) and tenant or admin")
    unknown = sorted(set(raw) - {"token_sha256", "token", "tenant", "admin", "name"})
    if unknown:
        raise UserError(f"{where}.{unknown[0]}: unknown field")
    if ("token_sha256" in raw) == ("token" in raw):
        raise UserError(f"{where}: exactly one of token_sha256 or token is required")
    if "token" in raw:
        if not isinstance(raw["token"], str) or not raw["token"]:
            raise UserError(f"{where}.token: expected a non-empty string")
        digest = hash_token(raw["token"])
    else:
        digest = str(raw["token_sha256"]).lower()
        if not _HEX64.match(digest):
            raise UserError(f"{where}.token_sha256: expected 64 hex characters (sha256 of the token)")
    admin = raw.get("admin", False)
    if not isinstance(admin, bool):
        raise UserError(f"{where}.admin: expected true or false")
    tenant = raw.get("tenant")
    if admin == (tenant is not None):
        raise UserError(f"{where}: give exactly one of tenant or admin: true")
    if tenant is not None and (not isinstance(tenant, str) or not tenant):
        raise UserError(f"{where}.tenant: expected a non-empty string")
    if tenant is not None and tenant_name_problem(tenant):
        raise UserError(f"{where}.tenant: {tenant_name_problem(tenant)}")
    return digest, Principal(tenant=tenant, admin=admin)


def _redaction(raw: Any, source: str) -> Redaction:
    if raw is None:
        return Redaction()
    if not isinstance(raw, dict):
        raise UserError(f"tokens file {source}: redaction: expected a mapping")
    for key, value in raw.items():
        if key not in (*REDACTION_OPTIONS, "salt"):
            raise UserError(f"tokens file {source}: redaction.{key}: unknown field")
        if key == "salt" and not isinstance(value, str):
            raise UserError(f"tokens file {source}: redaction.salt: expected a string")
        if key != "salt" and not isinstance(value, bool):
            raise UserError(f"tokens file {source}: redaction.{key}: expected true or false")
    return Redaction(**raw)


def parse_tokens(doc: Any, source: str = "<tokens>") -> AuthConfig:
    if isinstance(doc, list):
        entries, redaction = doc, None
    elif isinstance(doc, dict):
        unknown = sorted(set(doc) - {"tokens", "redaction"})
        if unknown:
            raise UserError(f"tokens file {source}: {unknown[0]}: unknown field")
        entries, redaction = doc.get("tokens") or [], doc.get("redaction")
        if not isinstance(entries, list):
            raise UserError(f"tokens file {source}: tokens: expected a list")
    else:
        raise UserError(f"tokens file {source}: expected a list of tokens or a mapping with tokens:")
    principals: dict[str, Principal] = {}
    for i, raw in enumerate(entries):
        digest, principal = _entry(i, raw, source)
        if digest in principals:
            raise UserError(f"tokens file {source}: tokens[{i}]: the same token is listed twice")
        principals[digest] = principal
    if not principals:
        raise UserError(f"tokens file {source}: no tokens defined (use --insecure-local for a local demo)")
    return AuthConfig(principals=principals, redaction=_redaction(redaction, source))


def with_default_salt(config: AuthConfig, salt: str) -> AuthConfig:
    """``config`` with ``salt`` keying pod-name hashes when the tokens file sets none."""
    if not config.redaction.hash_pod_names or config.redaction.salt:
        return config
    return replace(config, redaction=replace(config.redaction, salt=salt))


def load_tokens(path: str) -> AuthConfig:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UserError(f"tokens file {path}: cannot read: {exc.strerror}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise UserError(f"tokens file {path}: invalid YAML: {yaml_problem(exc)}") from None
    return parse_tokens(doc, path)


def pod_hash(name: str, salt: str = "") -> str:
    """How a pod name reads for non-admins under ``salt`` (the same token OTLP export uses with it)."""
    return Redaction(salt=salt).pod_token(name)


def redact_record(record: DecisionRecord, redaction: Redaction) -> dict[str, Any]:
    """The record as a non-admin may see it: the tenant allow-list (``audit.api.tenant_view``),
    always, after telemetry's redaction and ``drop_labels`` clearing exemplar details (they carry
    node labels and selector values) when the tokens file asks for them."""
    return _tenant_record(redact(record, {}, redaction).data if redaction.active else record_dict(record), redaction)


def redact_stored(text: str, redaction: Redaction) -> dict[str, Any]:
    """``redact_record`` of a record as the store keeps it (``audit.api.stored``), built as a
    record only when telemetry's redaction asks for one."""
    data = record_data(text)
    return _tenant_record(redact(DecisionRecord.from_dict(data), {}, redaction).data if redaction.active else data,
                          redaction)


def _tenant_record(data: dict[str, Any], redaction: Redaction) -> dict[str, Any]:
    if redaction.drop_labels:
        data["tiers"] = [{**t, "exemplars": [{**e, "detail": {}} for e in t.get("exemplars", [])]}
                         for t in data.get("tiers", [])]
    return tenant_view(data)


def redact_explanation(body: dict[str, Any], pod: str, redaction: Redaction,
                       record: DecisionRecord | None = None) -> dict[str, Any]:
    """An explanation document as a non-admin may see it (with ``record``, the decision it explains,
    also through the tenant allow-list)."""
    if record is not None:
        body = tenant_explanation(body, record_dict(record))
    if not redaction.active:
        return body
    out = dict(body)
    if redaction.hash_pod_names and pod:
        scrub = Scrubber(pod, redaction.pod_token(pod))
        ns, _, name = str(out.get("pod", "")).partition("/")
        out["pod"] = f"{ns}/{scrub.text(name)}"
        out["summary"] = scrub.text(str(out.get("summary", "")))
    if "devices" in out:
        out["devices"] = [{**d, "detail": _device_detail(d, redaction)} for d in out["devices"]]
    return out


# Who holds an in-use device (already limited to the caller's tenant by the explanation): not a
# label, so it stays when labels are dropped; its pod names are hashed like the asked pod's.
_HOLDER_KEYS = ("by", "claim", "pod")


def _device_detail(row: dict[str, Any], redaction: Redaction) -> dict[str, Any]:
    detail = dict(row.get("detail") or {})
    # in use, or in use beneath a tier the policy closed (its own ``verdict``, audit.explain.verdicts)
    if detail.get("verdict", row.get("reason")) != "in_use":
        return {} if redaction.drop_labels else detail
    if redaction.drop_labels:
        detail = {k: v for k, v in detail.items() if k in _HOLDER_KEYS}
    if redaction.hash_pod_names and detail.get("pod"):
        hashed = []
        for holder in str(detail["pod"]).split(","):
            ns, _, name = holder.partition("/")
            hashed.append(f"{ns}/{redaction.pod_token(name)}")
            detail["by"] = str(detail.get("by", "")).replace(f"pod {holder} (", f"pod {hashed[-1]} (")
        detail["pod"] = ",".join(hashed)
    return detail
