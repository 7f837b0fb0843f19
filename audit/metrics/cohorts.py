"""Migration cohorts: the decision records of each track × claim-template version, side by side.

``/v1/stats/migration`` and the Migration dashboard give one row per cohort: a track (``dra`` or
``device-plugin``) and the claim-template version its records carry (``template_version``; empty
when they carry none, as device-plugin pods, which have no claim, do). Unlike the pod families
above, these figures count decision records, not pods: a pod decided five times (four retries,
then an allocation) is five decisions, each with the wait it had when it was decided (``wait_ms``:
decision time − pod creation), so a cohort's waits include how long pods had waited at attempts
that did not allocate, and a pod retried often weighs more than one allocated at once. ``waits``
counts each pod once, with its wait to its first bind in the window: that is the figure to
compare how long pods waited. The rows are counted by the store over the records the request's
filter selects (a tenant caller's own) with since ≤ decision time < until, a record delivered
twice counting once. The promote / hold / rollback verdict beside them compares pods
(``audit.migration``), not these figures.
"""

from __future__ import annotations

from audit.metrics.definition import Definition

_COUNTS = "decision record (each attempt, not each pod)"
_POP = "decision records of the cohort (track × template_version) within the filter, every attempt of every pod"
_ALLOCATED = "the cohort's decision records with outcome allocated"
_REF = "audit.store.aggregates.migration_stats"  # by name: audit.metrics is below the store
_WAIT = ("the wait the record carries (decision time − pod creation), over every record of the cohort, "
         "allocated or not")
DEFINITIONS = (
    Definition("decisions", "cohorts", _COUNTS, "decisions", _POP, "count", _REF),
    Definition("allocated", "cohorts", _COUNTS, "decisions", _POP, "count of records with outcome allocated", _REF),
    Definition("success_rate", "cohorts", _COUNTS, "ratio (null when no decision)", _POP,
               "allocated / decisions: a pod's unallocated attempts before its allocation count against it", _REF),
    Definition("fallback_rate", "cohorts", _COUNTS, "ratio (null when nothing was allocated)", _ALLOCATED,
               "records where some request got a later subrequest than its first / allocated", _REF),
    Definition("wait_p50_ms", "cohorts", _COUNTS, "milliseconds (null when no decision)", _POP,
               f"nearest-rank 50th percentile (the ⌈0.5·n⌉-th smallest of n) of {_WAIT}", _REF),
    Definition("wait_p95_ms", "cohorts", _COUNTS, "milliseconds (null when no decision)", _POP,
               f"nearest-rank 95th percentile (the ⌈0.95·n⌉-th smallest of n) of {_WAIT}", _REF),
)
