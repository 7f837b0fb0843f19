"""The OTLP attribute schema of a ClaimTrail decision: span names, attribute keys, event names.

Exporter (``audit.telemetry``) and receiver (``ingest.otlp``) both read their names from here, and
``docs/otlp.md`` documents the same table for scheduler-plugin authors. Kubernetes identity uses
the OpenTelemetry ``k8s.*`` semantic-convention keys; everything ClaimTrail-specific lives under
the single prefix ``claimtrail.`` (custom attribute names are namespaced, as the semantic
conventions registry recommends for custom use).
"""

from __future__ import annotations

PREFIX = "claimtrail."

# One trace per decision: the root span is the pod's attempt from its creation to the end of the
# decision, with a child span for the wait before it and one per tier, named after the tier's
# model ("dra.allocate.tier H100"), so explorers list and tell them apart.
ROOT_SPAN = "dra.allocate"
TIER_SPAN = "dra.allocate.tier"
WAIT_SPAN = "dra.wait"
# Per-device verdicts travel as log records (OTEP 4430: events as span-correlated logs, no
# 128-events-per-span limit), as span events for trace-only backends, or both; a decision may
# also be sent as a log record of its own.
VERDICT_EVENT = "claimtrail.device_verdict"
DECISION_EVENT = "claimtrail.decision"
INSTRUMENTATION_SCOPE = "claimtrail.audit"

# k8s semantic conventions (resource/span attributes from the k8s registry)
K8S_CLUSTER = "k8s.cluster.name"
K8S_NAMESPACE = "k8s.namespace.name"
K8S_POD_NAME = "k8s.pod.name"
K8S_POD_UID = "k8s.pod.uid"
K8S_NODE = "k8s.node.name"
K8S_POD_LABEL_PREFIX = "k8s.pod.label."

# Root span (decision) attributes
RECORD = PREFIX + "record"  # canonical JSON of the whole DecisionRecord: what the receiver rebuilds
REDACTED = PREFIX + "redacted"  # record paths changed by redaction before export
DECISION_ID = PREFIX + "decision_id"
SCHEMA_VERSION = PREFIX + "schema_version"
SEQ = PREFIX + "seq"
ATTEMPT = PREFIX + "attempt"
TENANT = PREFIX + "tenant"
OUTCOME = PREFIX + "outcome"
PREFERRED_MODEL = PREFIX + "preferred_model"
ALLOCATED_MODEL = PREFIX + "allocated_model"
TIER_INDEX = PREFIX + "tier_index"
FALLBACK = PREFIX + "fallback"
POLICY_VERSION = PREFIX + "policy_version"
POLICY_DIGEST = PREFIX + "policy_digest"
INPUT_DIGEST = PREFIX + "input_digest"
OUTPUT_DIGEST = PREFIX + "output_digest"
RETRY_CLASS = PREFIX + "retry_class"
BACKOFF_MS = PREFIX + "backoff_ms"
WAIT_MS = PREFIX + "wait_ms"
STEPS = PREFIX + "steps"
DURATION_US = PREFIX + "duration_us"
TRACK = PREFIX + "track"
TEMPLATE_VERSION = PREFIX + "template_version"
ENGINE_VERSION = PREFIX + "engine_version"
MESSAGE = PREFIX + "message"
CLAIMS = PREFIX + "claims"
CLAIM_UIDS = PREFIX + "claim_uids"
PREFERENCE = PREFIX + "preference"
DEVICES = PREFIX + "devices"
BLOCKERS = PREFIX + "blockers"
VERDICTS_EXPORTED = PREFIX + "verdicts.exported"
VERDICTS_DROPPED = PREFIX + "verdicts.dropped"
WHY_URL = PREFIX + "why_url"  # the audit API's "why" answer for this decision

# Span link attributes (root span -> the same pod's previous attempt)
LINK_KIND = PREFIX + "link.kind"  # "previous_attempt"
LINK_ATTEMPT = PREFIX + "link.attempt"
PREVIOUS_ATTEMPT = "previous_attempt"

# Tier span attributes
TIER_REQUEST = PREFIX + "tier.request"
TIER_MODEL = PREFIX + "tier.model"
TIER_CONSIDERED = PREFIX + "tier.considered"
TIER_NODES_EVALUATED = PREFIX + "tier.nodes_evaluated"
TIER_REASON_PREFIX = PREFIX + "tier.reason."  # + reason code -> int count
TIER_VERDICTS_DROPPED = PREFIX + "tier.verdicts.dropped"
TIER_RESULT = PREFIX + "tier.result"  # one of TIER_RESULTS
TIER_BLOCKERS = PREFIX + "tier.blockers"  # blocker codes of this tier
TIER_BLOCKER_PREFIX = PREFIX + "tier.blocker."  # + code + "." + parameter -> its value
TIER_SELECTED = "selected"
TIER_EXHAUSTED = "exhausted"
TIER_NOT_TRIED = "not_tried"
TIER_RESULTS = (TIER_SELECTED, TIER_EXHAUSTED, TIER_NOT_TRIED)
# the tier span also carries DECISION_ID and TIER_INDEX; the wait span DECISION_ID and WAIT_MS

# Verdict log record attributes (plus DECISION_ID and TIER_INDEX)
VERDICT_DEVICE = PREFIX + "device"
VERDICT_NODE = PREFIX + "device.node"
VERDICT_REASON = PREFIX + "reason"
VERDICT_SOURCE = PREFIX + "verdict.source"  # "exemplar" (kept in the record) or "replay"/"engine"
VERDICT_DETAIL_PREFIX = PREFIX + "detail."  # + parameter name -> string

# Root attributes a receiver cross-checks against the decoded record (a mismatch is malformed).
CROSS_CHECKED = {
    DECISION_ID: "decision_id",
    OUTCOME: "outcome",
    OUTPUT_DIGEST: "output_digest",
    INPUT_DIGEST: "input_digest",
}
# Root attributes of the record's unsigned columns, which a receiver reads as they are sent (an
# int, or the decimal text of one past int64) and checks against the column's range and the record.
UINT_CHECKED = {
    SCHEMA_VERSION: "schema_version",
    SEQ: "seq",
    ATTEMPT: "attempt",
    BACKOFF_MS: "backoff_ms",
    WAIT_MS: "wait_ms",
    STEPS: "steps",
    DURATION_US: "duration_us",
}
