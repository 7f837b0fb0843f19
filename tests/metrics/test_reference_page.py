"""docs/metrics.md is generated from the definitions in audit/metrics and must be current."""

from __future__ import annotations

from pathlib import Path

from audit.metrics.catalog import DEFINITIONS, render_reference

PAGE = Path(__file__).resolve().parents[2] / "docs" / "metrics.md"


def test_the_reference_page_is_current() -> None:
    assert PAGE.read_text(encoding="utf-8") == render_reference(), (
        "docs/metrics.md is stale: run `python -m audit.metrics.catalog > docs/metrics.md`")


def test_every_api_figure_has_one_definition() -> None:
    # a field name can be a figure of two surfaces (a what-if's and a migration cohort's decisions),
    # each defined once, in the family of its surface
    keys = [(d.family, d.name) for d in DEFINITIONS]
    assert len(keys) == len(set(keys))
    names = [d.name for d in DEFINITIONS]
    fairness_row = {"device_hours", "h100_eq_hours", "entitlement_h100_eq_hours", "pods_started", "wait_p50_s",
                    "wait_p95_s", "wait_p99_s", "pending_at_end", "failed", "starving_pods", "longest_wait_s"}
    contract = fairness_row | {"jain_whole", "jain_contention", "contention_windows", "pods_with_preference",
                               "first_choice_rate", "fallbacks", "regretted", "regret_rate", "paths"}
    assert contract <= set(names)
    cohort_row = {"decisions", "allocated", "success_rate", "fallback_rate", "wait_p50_ms", "wait_p95_ms"}
    assert {d.name for d in DEFINITIONS if d.family == "cohorts"} == cohort_row
    # the rows of /v1/stats/fallback, /overview and /fairness and the skip reasons count decision records
    decision_row = {"decisions", "allocated", "fallback_decisions", "fallback_rate", "unschedulable",
                    "devices_allocated", "devices", "retries", "terminal_failures", "unhealthy", "binding_conflict",
                    "stale_slice"}
    assert {d.name for d in DEFINITIONS if d.family == "decision_rows"} == decision_row
