"""Query-parameter checks shared by the endpoints: every bad value is a 400 naming the parameter.

Values that reach the store are validated here first (ids, model names, times, enums), so
garbage never gets further than a problem document; the store binds every value server-side.
Names the store keeps as they were ingested (clusters, tenants, policy versions) are checked by
the rules ingest takes them in by (``audit.records``), not by a narrower pattern: a filter must
be able to name anything that can be stored, or a cluster stored as ``prod eu`` could never be
resumed nor its decisions listed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC

from audit.api.problems import Problem
from audit.records import (
    Outcome,
    Track,
    cluster_name_problem,
    policy_version_problem,
    tenant_name_problem,
)
from audit.timestamps import ZONE_REQUIRED, format_utc, parse_rfc3339

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$")
# Kubernetes names: DNS subdomains for pods and namespaces (tenants, clusters and policy versions: below).
_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?$")


def decision_id(value: str) -> str:
    if not _ID.match(value):
        raise Problem("invalid-parameter", f"decision id {value[:80]!r}: expected letters, digits, '-', '.', ':' or '_'"
                      " (at most 128)")
    return value


def model(value: str | None, name: str = "model") -> str | None:
    if value is None or value == "":
        return None
    if not _MODEL.match(value):
        raise Problem("invalid-parameter", f"{name} {value[:80]!r}: expected a device model name such as H100")
    return value


def k8s_name(value: str | None, name: str) -> str | None:
    if value is None or value == "":
        return None
    if not _NAME.match(value):
        raise Problem("invalid-parameter", f"{name} {value[:80]!r}: expected a Kubernetes name (lowercase DNS subdomain)")
    return value


def cluster(value: str | None, name: str = "cluster") -> str | None:
    """A cluster name as ingest takes one in (``cluster_name_problem``)."""
    return _stored_name(value, name, cluster_name_problem)


def tenant(value: str | None, name: str = "tenant") -> str | None:
    """A tenant name as ingest takes one in (``tenant_name_problem``)."""
    return _stored_name(value, name, tenant_name_problem)


def policy_version(value: str | None, name: str = "policy_version") -> str | None:
    """A policy version as records carry one: any text without control characters."""
    return _stored_name(value, name, policy_version_problem)


def _stored_name(value: str | None, name: str, problem_of: Callable[[str], str]) -> str | None:
    if value is None or value == "":
        return None
    problem = problem_of(value)
    if problem:
        raise Problem("invalid-parameter", f"{name}: {problem[:200]}")
    return value


def timestamp(value: str | None, name: str) -> str | None:
    """RFC 3339 time, returned normalised to UTC ``YYYY-MM-DDTHH:MM:SS.ffffffZ``."""
    if value is None or value == "":
        return None
    try:
        parsed = parse_rfc3339(value, naive_is_utc=False)
    except ValueError:
        raise Problem("invalid-parameter", f"{name} {value[:80]!r}: expected an RFC 3339 time such as "
                      "2026-05-01T00:00:00Z") from None
    if parsed.tzinfo is None:
        raise Problem("invalid-parameter", f"{name} {value[:80]!r}: {ZONE_REQUIRED}")
    if not 1970 <= parsed.astimezone(UTC).year < 2300:  # the store keeps 1970..2299 (DateTime64)
        raise Problem("invalid-parameter", f"{name} {value[:80]!r}: outside 1970..2299, the times the store keeps")
    return format_utc(parsed, digits=6)


def outcome(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    if value not in {o.value for o in Outcome}:
        raise Problem("invalid-parameter", f"outcome {value[:80]!r}: expected one of "
                      f"{', '.join(o.value for o in Outcome)}")
    return value


def track(value: str | None) -> str | None:
    if value is None or value == "":
        return None
    if value not in {t.value for t in Track}:
        raise Problem("invalid-parameter", f"track {value[:80]!r}: expected one of {', '.join(t.value for t in Track)}")
    return value


def boolean(value: str | None, name: str) -> bool | None:
    if value is None or value == "":
        return None
    lowered = value.lower()
    if lowered in ("true", "1", "yes"):
        return True
    if lowered in ("false", "0", "no"):
        return False
    raise Problem("invalid-parameter", f"{name} {value[:80]!r}: expected true or false")


def group_by(value: str | None, default: tuple[str, ...], choices: tuple[str, ...]) -> list[str]:
    if value is None or value.strip() == "":
        return list(default)
    keys = [k.strip() for k in value.split(",") if k.strip()]
    for k in keys:
        if k not in choices:
            raise Problem("invalid-parameter", f"group_by {k[:80]!r}: expected any of {', '.join(choices)}")
    if len(set(keys)) != len(keys):
        raise Problem("invalid-parameter", "group_by: a key is repeated")
    return keys
