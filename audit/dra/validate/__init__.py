"""API-server validation of DRA objects, on raw dicts as a user wrote them.

``validate_object`` reports every violation the Kubernetes API server would refuse for
resource.k8s.io/v1 DeviceClass, ResourceSlice, ResourceClaim and ResourceClaimTemplate,
DeviceTaintRule (v1alpha3 and v1), and the DRA-relevant parts of Node and Pod. Rules, limits and
message texts follow ``pkg/apis/resource/validation`` and apimachinery's ``field`` errors
(``Required value``, ``Invalid value: "x": …``), one ``Finding`` per error, in field order, with
the field path as the API server prints it. Over-long lists are reported at their last item as
``too many subrequests (max 8)``, so the path shows how far past the limit the list goes.
Validation runs after API defaulting, as on the server (allocationMode ExactCount, count 1,
toleration operator Equal). Selectors are compiled in ``audit.dra.cel`` with the gates the API
server uses for validation (consumable capacity and list-type attributes on).

Not checked, because a single file cannot show it: the admin-access namespace label, counter
sets referenced across the slices of a pool, name uniqueness across objects, and CEL cost.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from audit.dra.cel import CelEnvironment, CelOptions
from audit.dra.model import object_label
from audit.dra.validate.check import Check, Finding, kind_of, show
from audit.dra.validate.claims import check_resource_claim, check_resource_claim_template
from audit.dra.validate.common import check_metadata
from audit.dra.validate.kinds import check_device_class, check_device_taint_rule, check_node, check_pod
from audit.dra.validate.rules import API_VERSIONS, TOP_FIELDS
from audit.dra.validate.slices import check_resource_slice

__all__ = ["Finding", "VALIDATED_KINDS", "is_validated", "validate_object", "validate_objects"]

_VALIDATORS: dict[str, tuple[Callable[[Check, Mapping[str, Any]], None], bool]] = {
    "DeviceClass": (check_device_class, False),
    "ResourceSlice": (check_resource_slice, False),
    "ResourceClaim": (check_resource_claim, True),
    "ResourceClaimTemplate": (check_resource_claim_template, True),
    "DeviceTaintRule": (check_device_taint_rule, False),
    "Node": (check_node, False),
    "Pod": (check_pod, True),
}

# The API server validates selectors with every CEL feature of the release enabled.
_VALIDATION_CEL = CelEnvironment(CelOptions(consumable_capacity=True, list_type_attributes=True))


VALIDATED_KINDS = tuple(sorted(_VALIDATORS))


def is_validated(obj: Mapping[str, Any]) -> bool:
    """Whether ``validate_object`` checks this object's kind (other kinds yield no findings)."""
    return isinstance(obj, Mapping) and obj.get("kind") in _VALIDATORS


def validate_object(obj: Mapping[str, Any]) -> list[Finding]:
    """Every violation in one raw object, in field order (empty when the API server would admit it).

    Objects of kinds outside DRA (see ``VALIDATED_KINDS``) are not checked beyond having a kind and
    an apiVersion; ``is_validated`` tells them apart."""
    if not isinstance(obj, Mapping):
        return [Finding("object", "", f"Invalid value: {show(obj)}: must be an object, got {kind_of(obj)}")]
    c = Check(object_label(obj), _VALIDATION_CEL)
    kind = obj.get("kind")
    if not isinstance(kind, str) or not kind:
        c.required("kind")
        return c.findings
    if not isinstance(obj.get("apiVersion"), str) or not obj.get("apiVersion"):
        c.required("apiVersion")
        return c.findings
    if kind not in _VALIDATORS:
        return c.findings  # outside DRA; callers learn this from is_validated()
    validator, namespaced = _VALIDATORS[kind]
    api_version = obj.get("apiVersion")
    if api_version not in API_VERSIONS[kind]:
        c.not_supported("apiVersion", api_version, API_VERSIONS[kind])
        return c.findings
    c.mapping(dict(obj), "", TOP_FIELDS)
    check_metadata(c, obj, namespaced)
    validator(c, obj)
    return c.findings


def validate_objects(objects: list[Mapping[str, Any]]) -> list[Finding]:
    """Findings of several objects, in input order."""
    return [finding for obj in objects for finding in validate_object(obj)]
