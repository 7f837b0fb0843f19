"""Decision rows: the counts of decision records under the window's per-pod figures.

The ``rows`` of ``/v1/stats/fallback`` and ``/v1/stats/overview`` (one per combination of the
``group_by`` values: tenant, allocated model, preferred model, hour, cluster, track, policy
version, outcome), of ``/v1/stats/fairness`` (one per tenant, or per hour × tenant) and of
``/v1/stats/fallback?group_by=reason[,preferred]`` (one per reason code, or per preferred model ×
reason code) and of ``/v1/stats/health`` (one per hour, or per device model or hour × model: the
device verdicts of the health reason codes in every tier of the records, and per hour the retries
by retry class and the terminal failures). Like the migration ``cohorts``, and unlike the pod families above, they count
decision records, not pods: a pod decided five times (four unschedulable attempts, then an
allocation) is five decisions, four of them unschedulable, and a pod bound to its fallback, then
evicted and bound to it again, is two fallback decisions but one pod that fell back. The per-pod
``fallbacks`` given beside the rows of ``/v1/stats/fallback`` (``fallback`` above) counts each pod
once, only DRA pods whose claims offer alternatives, by when it was first bound; the rows'
``fallback_decisions`` counts every allocated record with the fallback flag, of any track, by when
it was decided. A record counts in the hour of its decision time.

The rows are counted by the store over the records the request's filter selects (a tenant caller's
own, every other tenant folded into one ``(others)`` row; a reason row, a tenant caller's own only)
with since ≤ decision time < until, a record delivered twice counting once. An outcome other than
allocated and unschedulable (deferred, preempted, error) counts in ``decisions`` only.
"""

from __future__ import annotations

from audit.metrics.definition import Definition

_COUNTS = "decision record (each attempt, not each pod)"
_POP = "decision records of the row's group within the filter, every attempt of every pod"
_ALLOCATED = "the group's decision records with outcome allocated"
# by name: audit.metrics is below the store and the API that count them
_FALLBACK = "audit.store.aggregates.fallback_stats"
_FAIRNESS = "audit.api.stats.fairness.usage_by_model"
_REASONS = "audit.api.stats.fallback.skip_reasons"
_HOURLY_HEALTH = "audit.store.aggregates.health_stats"
_HEALTH = f"{_HOURLY_HEALTH}, audit.api.stats.health.health_by_model"
_VERDICT = "device verdict (one device's reason in one tier of one decision record)"
_ALL_TIERS = "every tier of the decision records within the filter, the tier chosen included"
FALLBACK_ROW = ("decisions", "allocated", "fallback_decisions", "fallback_rate", "unschedulable")
FAIRNESS_ROW = ("decisions", "allocated", "devices_allocated")
REASON_ROW = ("devices",)
HEALTH_VERDICTS = ("unhealthy", "binding_conflict", "stale_slice")
HEALTH_ROW = ("decisions", "retries", "terminal_failures", *HEALTH_VERDICTS)  # per hour
HEALTH_MODEL_ROW = HEALTH_VERDICTS  # per device model, or hour × model
VERDICT_MEANINGS = (
    ("unhealthy", "an untolerated taint the policy marks as health was on the device"),
    ("binding_conflict", "at bind time another claim had taken the device"),
    ("stale_slice", "at bind time the device's slice had moved to another generation"),
)
DEFINITIONS = (
    Definition("decisions", "decision_rows", _COUNTS, "decisions", _POP, "count",
               f"{_FALLBACK}, {_FAIRNESS}"),
    Definition("allocated", "decision_rows", _COUNTS, "decisions", _POP, "count of records with outcome allocated",
               f"{_FALLBACK}, {_FAIRNESS}"),
    Definition("fallback_decisions", "decision_rows", _COUNTS, "decisions", _ALLOCATED,
               "count of allocated records where some request got a later subrequest than its first (the record's "
               "fallback flag); not the per-pod `fallbacks`", _FALLBACK),
    Definition("fallback_rate", "decision_rows", _COUNTS, "ratio (null when nothing was allocated)", _ALLOCATED,
               "fallback_decisions / allocated: a pod allocated again after a release weighs once per allocation",
               _FALLBACK),
    Definition("unschedulable", "decision_rows", _COUNTS, "decisions", _POP,
               "count of records with outcome unschedulable: a pod retried until it fits counts each failed attempt",
               _FALLBACK),
    Definition("devices_allocated", "decision_rows", _COUNTS, "devices", _ALLOCATED,
               "sum of the DRA devices each allocated record names: a device allocated, released and allocated "
               "again counts twice; a device-plugin record names no device (its GPUs are a count on a node) and "
               "adds 0; no duration (device-hours, both tracks, are the per-pod `device_hours`)", _FAIRNESS),
    Definition("devices", "decision_rows",
               "device verdict (one device's reason in one tier of one decision record)", "device verdicts",
               "the tiers of their preferred model, other than the tier chosen, of the decision records within the "
               "filter that name a preferred model and were not allocated it (fallbacks, and attempts that "
               "allocated nothing)",
               "sum per reason code (selected excluded) of the devices the tier's evidence gives that reason: a "
               "device counts once per decision and tier that evaluated it", _REASONS),
    Definition("retries", "decision_rows", _COUNTS, "decisions per retry class", _POP,
               "count per retry class of records whose attempt is retried (a retry class other than terminal, "
               "outcome not error): a pod that fails twice before it fits counts twice", _HOURLY_HEALTH),
    Definition("terminal_failures", "decision_rows", _COUNTS, "decisions", _POP,
               "count of records with retry class terminal or outcome error: the attempts after which the pod is "
               "not tried again", _HOURLY_HEALTH),
    *(Definition(code, "decision_rows", _VERDICT, "device verdicts", _ALL_TIERS,
                 f"sum of the devices the tiers' evidence gives the reason {code} ({why}): a device counts once "
                 "per decision and tier that evaluated it, so this counts evaluations, not devices", _HEALTH)
      for code, why in VERDICT_MEANINGS),
)
