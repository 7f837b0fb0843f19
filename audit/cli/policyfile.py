"""Reading a ``--policy FILE`` argument: the one Policy document in a YAML file, checked.

Commands that take a policy (simulate, replay, why) accept a file holding exactly one
``kind: Policy`` document, possibly among other documents (a scenario file, say). Every problem
comes back as a one-line ``UserError`` naming the flag, the file and, for invalid policies, the
field.
"""

from __future__ import annotations

from typing import Any

import yaml

from audit.dra.loader import LoadError, read_text, yaml_problem
from audit.errors import UserError
from audit.policy import Policy, PolicyError, parse_policy


def yaml_documents(path: str, flag: str = "") -> list[Any]:
    """Every non-empty YAML document in ``path``."""
    where = f"{flag} {path}" if flag else path
    try:
        text = read_text(path)
    except LoadError as exc:
        raise UserError(f"{flag} {exc}" if flag else str(exc)) from None
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        raise UserError(f"{where}: invalid YAML: {yaml_problem(exc)}") from None


def policy_document(path: str, flag: str = "--policy") -> dict[str, Any]:
    """The file's single Policy document, after checking that it parses as a policy."""
    policies = [d for d in yaml_documents(path, flag) if isinstance(d, dict) and d.get("kind") == "Policy"]
    if len(policies) != 1:
        raise UserError(f"{flag} {path}: expected exactly one kind: Policy document, found {len(policies)}")
    load_policy(policies[0], f"{flag} {path}")
    return policies[0]


def load_policy(document: dict[str, Any], where: str) -> Policy:
    try:
        return parse_policy(document)
    except PolicyError as exc:
        raise UserError(f"{where}: {exc}") from None
