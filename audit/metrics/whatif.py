"""What-if: a window decided again under another policy, beside the recorded one.

``claimtrail replay --policy`` and ``POST /v1/replay`` with a counterfactual policy show two
columns, *recorded* and *counterfactual*. Each column is the figures above, computed by their
reference functions (``fairness_report``, ``fallback_report``, ``wait_breakdown``) over a pod
lifecycle folded from that side's event log: the recorded history up to the window's end, or the
same history up to the window's start followed by the events the counterfactual run wrote. The
recorded column is therefore what ``/v1/stats/fairness``, ``/v1/stats/fallback`` and the
``simulate`` summary give for the same window. Shown per side: ``jain_whole`` and
``jain_contention``; per tenant ``pods_started``, ``wait_p50_s``, ``wait_p95_s``,
``pending_at_end``, ``failed``, ``pods_with_preference``, ``first_choice_rate``, ``fallbacks``,
``h100_eq_hours`` and ``entitlement_h100_eq_hours``; per tenant and models got, the
``pods_started`` of ``breakdown``'s ``model`` rows. A tenant with no pod started shows its wait
percentiles as null, and one with no pod with alternatives its first-choice rate as null.
Regret is not shown: a counterfactual has no history after the window's end to judge it by.

The figures below exist only for a what-if: they count decision records and what the
counterfactual run itself checked, not pods.
"""

from __future__ import annotations

from audit.metrics.definition import Definition

DEFINITIONS = (
    Definition("decisions", "whatif", "decision record", "decisions",
               "decision records of the window (every attempt of every pod, both tracks)",
               "count of records with since ≤ time < until: the recorded ones, or those the counterfactual run wrote",
               "audit.replay.whatif.deltas"),
    Definition("quota_violations", "whatif", "allocation", "allocations",
               "claim allocations of the window (recorded), or allocations the counterfactual run placed",
               "count of (allocation, model) where the tenant then held more of the model than nominal + "
               "borrowing limit of the policy in force; must be 0 on both sides",
               "audit.replay.counterfactual.quota_violations"),
    Definition("unknown_durations", "whatif", "pod", "pods",
               "pods running at the window's start, or placed by the counterfactual run, whose running time the "
               "recorded history does not give (they ran past the window's end, failed or never ran there)",
               "count; each holds its devices to the window's end", "audit.replay.counterfactual.Counterfactual"),
)
