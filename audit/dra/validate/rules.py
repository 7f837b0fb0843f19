"""Limits, served API versions and field names of the validated types (resource.k8s.io/v1 types.go)."""

from __future__ import annotations

# Limits from resource.k8s.io/v1 types.go.
DEVICE_REQUESTS_MAX = 32
FIRST_AVAILABLE_MAX = 8
SELECTORS_MAX = 32
TOLERATIONS_MAX = 16
CONSTRAINTS_MAX = 32
CONFIG_MAX = 32
SLICE_DEVICES_MAX = 128
SLICE_DEVICES_ADVANCED_MAX = 64
ATTRIBUTES_AND_CAPACITIES_MAX = 32
ATTRIBUTE_VALUES_MAX = 48
ATTRIBUTE_STRING_MAX = 64
ATTRIBUTE_VERSION_MAX = 64
ID_MAX = 32
DRIVER_NAME_MAX = 63
POOL_NAME_MAX = 253
COUNTER_SETS_MAX = 8
COUNTERS_PER_SET_MAX = 32
CONSUMES_COUNTERS_MAX = 2
TAINTS_MAX = 16
BINDING_CONDITIONS_MAX = 4
VALID_VALUES_MAX = 10
OPAQUE_PARAMETERS_MAX = 10 * 1024
RESERVED_FOR_MAX = 256
ALLOCATION_RESULTS_MAX = 32


RESOURCE_V1 = "resource.k8s.io/v1"
API_VERSIONS = {
    "DeviceClass": (RESOURCE_V1,),
    "ResourceSlice": (RESOURCE_V1,),
    "ResourceClaim": (RESOURCE_V1,),
    "ResourceClaimTemplate": (RESOURCE_V1,),
    "DeviceTaintRule": ("resource.k8s.io/v1alpha3", RESOURCE_V1),
    "Node": ("v1",),
    "Pod": ("v1",),
}
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")
TOLERATION_EFFECTS = ("NoExecute", "NoSchedule", "None")


def field_set(*names: str) -> frozenset[str]:
    return frozenset(names)


# Field names of the served types (resource.k8s.io/v1, core/v1 ObjectMeta), for strict decoding.
TOP_FIELDS = field_set("apiVersion", "kind", "metadata", "spec", "status")
METADATA_FIELDS = field_set("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
                    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
                    "annotations", "ownerReferences", "finalizers", "managedFields")
CLASS_SPEC_FIELDS = field_set("selectors", "config", "extendedResourceName")
SELECTOR_FIELDS = field_set("cel")
CEL_FIELDS = field_set("expression")
CLASS_CONFIG_FIELDS = field_set("opaque")
CLAIM_CONFIG_FIELDS = field_set("requests", "opaque")
OPAQUE_FIELDS = field_set("driver", "parameters")
CLAIM_SPEC_FIELDS = field_set("devices")
DEVICE_CLAIM_FIELDS = field_set("requests", "constraints", "config")
REQUEST_FIELDS = field_set("name", "exactly", "firstAvailable")
EXACT_FIELDS = field_set("deviceClassName", "selectors", "allocationMode", "count", "adminAccess", "tolerations", "capacity")
SUBREQUEST_FIELDS = field_set("name", "deviceClassName", "selectors", "allocationMode", "count", "tolerations", "capacity")
TOLERATION_FIELDS = field_set("key", "operator", "value", "effect", "tolerationSeconds")
CAPACITY_REQUIREMENTS_FIELDS = field_set("requests")
CONSTRAINT_FIELDS = field_set("requests", "matchAttribute", "distinctAttribute")
TEMPLATE_SPEC_FIELDS = field_set("metadata", "spec")
SLICE_SPEC_FIELDS = field_set("driver", "pool", "nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection",
                      "devices", "sharedCounters")
POOL_FIELDS = field_set("name", "generation", "resourceSliceCount")
DEVICE_FIELDS = field_set("name", "attributes", "capacity", "consumesCounters", "nodeName", "nodeSelector", "allNodes",
                  "taints", "bindsToNode", "bindingConditions", "bindingFailureConditions",
                  "allowMultipleAllocations", "nodeAllocatableResourceMappings")
DEVICE_CAPACITY_FIELDS = field_set("value", "requestPolicy")
REQUEST_POLICY_FIELDS = field_set("default", "validValues", "validRange")
VALID_RANGE_FIELDS = field_set("min", "max", "step")
COUNTER_CONSUMPTION_FIELDS = field_set("counterSet", "counters")
COUNTER_FIELDS = field_set("value")
COUNTER_SET_FIELDS = field_set("name", "counters")
TAINT_FIELDS = field_set("key", "value", "effect", "timeAdded")
TAINT_RULE_SPEC_FIELDS = field_set("deviceSelector", "taint")
TAINT_RULE_SELECTOR_FIELDS = field_set("deviceClassName", "driver", "pool", "device", "selectors")
