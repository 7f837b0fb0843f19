"""Redaction applied to a decision before any byte of it leaves the process.

Settings: hash pod names (every occurrence of the pod name in the strings that carry pod-derived
text, the pod, its claim names, the message, free-form details and labels, becomes a keyed hash,
so claim names derived from pod names do not leak it), drop pod labels, drop the tenant. Every
other field is left verbatim: closed vocabularies (outcome, track, codes), the time, digests and
uids, and the names that place the decision in the world (cluster, namespace, tenant, policy
version, node, device, model, request). Rewriting them could only corrupt the record (a pod named
``a`` must not turn ``allocated`` into garbage, one named ``0`` the time into one no store takes,
nor one named ``gpu`` its device into one no slice publishes), and they identify no pod. The
redacted record keeps its original ``output_digest``: the
digest still names the decision the engine made, and replaying the original inputs reproduces
it. The changed paths travel with the record (like OPA's ``masked``/``erased`` lists) so a reader
can tell what was redacted.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit.records import OBJECT_KEYS, DecisionRecord, record_dict
from audit.telemetry.errors import TelemetryConfigError

ENV_REDACT = "CLAIMTRAIL_OTEL_REDACT"
ENV_REDACT_SALT = "CLAIMTRAIL_OTEL_REDACT_SALT"
OPTIONS = ("hash_pod_names", "drop_labels", "drop_tenant")
SALT_FILE = "redaction.salt"


def stored_salt(directory: str | os.PathLike[str]) -> str:
    """The salt kept in ``<directory>/redaction.salt``, made (random, readable by its owner only) on
    first use. Pod names are few and guessable: hashed without a key, every one of them was
    recovered by hashing likely names, so hashing is keyed by default; keeping the key in the data
    directory keeps a pod's hash the same across restarts and across the processes sharing it."""
    path = Path(directory) / SALT_FILE
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    salt = secrets.token_hex(32)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it meanwhile: use theirs
        return path.read_text().strip()
    with os.fdopen(fd, "w") as fh:
        fh.write(salt + "\n")
    return salt


@dataclass(frozen=True)
class Redaction:
    hash_pod_names: bool = False
    drop_labels: bool = False
    drop_tenant: bool = False
    salt: str = ""

    @property
    def active(self) -> bool:
        return self.hash_pod_names or self.drop_labels or self.drop_tenant

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> Redaction:
        raw = environ.get(ENV_REDACT, "")
        chosen = {part.strip() for part in raw.split(",") if part.strip()}
        unknown = sorted(chosen - set(OPTIONS))
        if unknown:
            raise TelemetryConfigError(
                f"{ENV_REDACT}: unknown option {unknown[0]!r} (expected a comma list of {', '.join(OPTIONS)})"
            )
        salt = environ.get(ENV_REDACT_SALT, "")
        if "hash_pod_names" in chosen and not salt:  # keyed by default; see stored_salt
            salt = stored_salt(environ.get("CLAIMTRAIL_DATA_DIR", ".claimtrail"))
        return cls(
            hash_pod_names="hash_pod_names" in chosen,
            drop_labels="drop_labels" in chosen,
            drop_tenant="drop_tenant" in chosen,
            salt=salt,
        )

    def pod_token(self, pod: str) -> str:
        """With a salt (the default wherever settings are read: ``stored_salt``) a keyed HMAC that
        a dictionary of likely pod names cannot reverse; a pod reads the same in trace explorers
        and API answers when both use the same salt (the same data directory, or the same
        configured salt). Without one, ``sha256:`` + 16 hex of sha256(pod)."""
        if self.salt:
            h = hmac.new(self.salt.encode(), pod.encode(), hashlib.sha256).hexdigest()[:16]
        else:
            h = hashlib.sha256(pod.encode()).hexdigest()[:16]
        return f"sha256:{h}"


@dataclass(frozen=True)
class Scrubber:
    """Rewrites pod-derived text for one decision: the pod name, wherever it appears, becomes its token."""

    secret: str = ""
    token: str = ""

    def text(self, value: str) -> str:
        if self.secret and self.secret in value:
            return value.replace(self.secret, self.token)
        return value

    def object_key(self, key: str) -> str:
        """A ``namespace/name`` with the name scrubbed: a namespace named like the pod stays."""
        namespace, slash, name = key.rpartition("/")
        return f"{namespace}{slash}{self.text(name)}"

    def detail(self, detail: Mapping[str, Any]) -> dict[str, Any]:
        """Pods and claims named by ``OBJECT_KEYS`` and the prose of ``by`` scrubbed; every other
        value is a code, a count, a model, a node or a tenant, which ``why`` and replay read back
        as the engine wrote it."""
        return {k: self._detail_value(k, v) for k, v in detail.items()}

    def _detail_value(self, key: str, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        if key in OBJECT_KEYS:
            return self.object_key(value)
        return self.text(value) if key == "by" else value


_NO_SCRUB = Scrubber()


@dataclass
class RedactedDecision:
    record: DecisionRecord
    labels: dict[str, str]
    scrubber: Scrubber
    paths: list[str]
    _data: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def data(self) -> dict[str, Any]:
        """The redacted record as a plain dict; built on first use when nothing was redacted
        (export encodes the record's JSON straight from the record and never needs it)."""
        if self._data is None:
            self._data = record_dict(self.record)
        return self._data


def redact(record: DecisionRecord, labels: Mapping[str, str], settings: Redaction) -> RedactedDecision:
    """Return a redacted copy; the input record is never modified."""
    if not settings.active:
        return RedactedDecision(record, dict(labels) if labels else {}, _NO_SCRUB, [])
    original = record_dict(record)
    scrubber = (
        Scrubber(record.pod, settings.pod_token(record.pod))
        if settings.hash_pod_names and record.pod
        else Scrubber()
    )
    data = _scrub_fields(original, scrubber)
    if settings.drop_tenant:
        data["tenant"] = ""
    kept_labels = {} if settings.drop_labels else {scrubber.text(k): scrubber.text(v) for k, v in labels.items()}
    paths = sorted(_changed_paths(original, data, ""))
    if settings.drop_labels and labels:
        paths.append("/labels")
    return RedactedDecision(DecisionRecord.from_dict(data), kept_labels, scrubber, paths, data)


# nested record parts, which hold details of their own
_PARTS = frozenset({"devices", "tiers", "exemplars", "blockers"})


def _scrub_fields(fields: dict[str, Any], scrubber: Scrubber) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if key in ("pod", "message"):
            out[key] = scrubber.text(value)
        elif key == "claims":  # a claim is usually named after its pod
            out[key] = [scrubber.object_key(claim) for claim in value]
        elif key == "detail":
            out[key] = scrubber.detail(value)
        elif key in _PARTS:
            out[key] = [_scrub_fields(part, scrubber) for part in value]
        else:
            out[key] = value
    return out


def _changed_paths(before: Any, after: Any, path: str) -> list[str]:
    """JSON-pointer paths whose values differ (key renames report the parent object)."""
    if isinstance(before, dict) and isinstance(after, dict) and before.keys() == after.keys():
        return [p for k in before for p in _changed_paths(before[k], after[k], f"{path}/{k}")]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [p for i, (b, a) in enumerate(zip(before, after, strict=True)) for p in _changed_paths(b, a, f"{path}/{i}")]
    return [] if before == after else [path or "/"]
