"""The migration thresholds shipped with the canary (``deploy/migration/thresholds.yaml``): where
the file is and how it is read. ``claimtrail migration report|plan`` and the audit API's
``/v1/stats/migration`` both default to it, so the two judge a canary by the same rules.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from typing import Any

import yaml

from audit.dra.loader import yaml_problem
from audit.migration import MigrationError, Thresholds

SHIPPED = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy", "migration", "thresholds.yaml")
)


def load(path: str, overrides: Mapping[str, Any] | None = None) -> Thresholds:
    """The thresholds in ``path``, with ``overrides`` put over the file's top-level fields before
    the whole is validated; every problem is a MigrationError naming the file."""
    try:
        with open(path) as fh:
            doc = yaml.safe_load(fh)
    except OSError as exc:
        raise MigrationError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise MigrationError(f"{path}: invalid YAML: {yaml_problem(exc)}") from None
    if isinstance(doc, dict) and overrides:
        doc = {**doc, **overrides}
    try:
        return Thresholds.from_dict(doc)
    except MigrationError as exc:
        raise MigrationError(f"{path}: {exc}") from None


@functools.cache
def shipped() -> Thresholds:
    """The shipped file's thresholds, read once (an install without ``deploy/`` raises, naming it)."""
    return load(SHIPPED)
