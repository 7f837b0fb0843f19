"""Rows per hour and per model, worked out by hand on a three-hour history.

Times in minutes from the window start; the starvation timeout is the default 1 h.

| pod | tenant | created | bound / failed | got | preferred | request tiers |
|---|---|---|---|---|---|---|
| a1 | a | 0 | bound 10 | H100 | H100 | first choice |
| e1 | a | 0 | bound 5 | L40S | L40S | first choice (two requests) |
| d1 | b | 0 | bound 0 | L4 (device plugin) | - | - |
| c1 | a | 20 | failed 70 | - | - | - |
| a2 | a | 30 | bound 90 | A100 | H100 | fallback, regretted |
| b1 | b | 50 | bound 130 | A100 | H100 | fallback, not regretted |
| b2 | b | 100 | still pending at 180 | - | - | - |

Each test runs on the PodLife rows (the reference functions) and on the lifecycle's columns.
"""

from __future__ import annotations

import dataclasses

import pytest

from audit.metrics.breakdown import regret_breakdown, wait_breakdown
from audit.metrics.columns import PodColumns
from audit.metrics.lifecycle import Lifecycle, PodLife
from audit.metrics.window import Window
from audit.policy import parse_policy
from tests.metrics.eventlog import MIN, policy_doc

WINDOW = Window(0, 180 * MIN)
HOURS = ["1970-01-01T00:00:00.000Z", "1970-01-01T01:00:00.000Z", "1970-01-01T02:00:00.000Z"]


def _pod(name: str, tenant: str, created: int, bound: int | None = None, failed: int | None = None, *,
         got: str = "", preferred: str = "", tiers: tuple[int, ...] = (), regretted: bool = False,
         track: str = "dra") -> PodLife:
    ms = {k: None if v is None else v * MIN for k, v in (("bound", bound), ("failed", failed))}
    return PodLife("c1", tenant, name, name, tenant, track, created * MIN, ms["bound"], ms["failed"],
                   ms["bound"] if got else None, None, bool(tiers), tiers, preferred, got, 1 if got else 0,
                   1.0 if got else 0.0, regretted)


PODS = [
    _pod("a1", "a", 0, 10, got="H100", preferred="H100", tiers=(0,)),
    _pod("e1", "a", 0, 5, got="L40S", preferred="L40S", tiers=(0, 0)),
    _pod("d1", "b", 0, 0, got="L4", track="device-plugin"),
    _pod("c1", "a", 20, failed=70),
    _pod("a2", "a", 30, 90, got="A100", preferred="H100", tiers=(1,), regretted=True),
    _pod("b1", "b", 50, 130, got="A100", preferred="H100", tiers=(1,)),
    _pod("b2", "b", 100),
]


def _life(evaluation: str) -> Lifecycle:
    policy = parse_policy(policy_doc("1", {"a": 1, "b": 1}))
    life = Lifecycle("c1", PODS, [(0, policy)], [(0, 8.0)], [], WINDOW.until_ms)
    return dataclasses.replace(life, columns=PodColumns.of(PODS).view()) if evaluation == "columns" else life


EVALUATIONS = pytest.mark.parametrize("evaluation", ["rows", "columns"])
WAIT_FIELDS = ("pods_started", "wait_p50_s", "wait_p95_s", "wait_p99_s", "pending_at_end", "failed", "starving_pods",
               "longest_wait_s")
REGRET_FIELDS = ("pods_with_preference", "first_choice_rate", "fallbacks", "regretted", "regret_rate")


def _table(rows: list[dict], key: str, fields: tuple[str, ...]) -> list[tuple]:
    return [(r[key], *(r[f] for f in fields)) for r in rows]


@EVALUATIONS
def test_waits_per_hour_count_each_pod_in_the_hour_it_started_pended_or_failed(evaluation: str) -> None:
    assert _table(wait_breakdown(_life(evaluation), WINDOW, "hour"), "hour", WAIT_FIELDS) == [
        # started e1 5 min, d1 0, a1 10 (p50 the 2nd of 3); pending at 60: a2, b1, c1 (longest c1 40 min)
        (HOURS[0], 3, 300.0, 600.0, 600.0, 3, 0, 0, 2400.0),
        # started a2 after exactly 60 min (not over the timeout); pending at 120: b1 70 min (starving), b2;
        # c1 failed after 50 min
        (HOURS[1], 1, 3600.0, 3600.0, 3600.0, 2, 1, 1, 4200.0),
        # started b1 after 80 min and b2 pending for 80 min at 180: both starving
        (HOURS[2], 1, 4800.0, 4800.0, 4800.0, 1, 0, 2, 4800.0),
    ]


@EVALUATIONS
def test_waits_per_model_put_every_pod_in_the_row_of_what_it_got(evaluation: str) -> None:
    assert _table(wait_breakdown(_life(evaluation), WINDOW, "model"), "model", WAIT_FIELDS) == [
        ("(none)", 0, None, None, None, 1, 1, 1, 4800.0),  # b2 pending 80 min (starving), c1 failed
        ("A100", 2, 3600.0, 4800.0, 4800.0, 0, 0, 1, 0.0),  # a2 60 min, b1 80 min (starving)
        ("H100", 1, 600.0, 600.0, 600.0, 0, 0, 0, 0.0),
        ("L4", 1, 0.0, 0.0, 0.0, 0, 0, 0, 0.0),
        ("L40S", 1, 300.0, 300.0, 300.0, 0, 0, 0, 0.0),
    ]


@EVALUATIONS
def test_a_tenant_sees_rows_of_its_own_pods_only(evaluation: str) -> None:
    assert _table(wait_breakdown(_life(evaluation), WINDOW, "model", scope="a"), "model", WAIT_FIELDS) == [
        ("(none)", 0, None, None, None, 0, 1, 0, 3000.0),  # c1 failed after 50 min
        ("A100", 1, 3600.0, 3600.0, 3600.0, 0, 0, 0, 0.0),
        ("H100", 1, 600.0, 600.0, 600.0, 0, 0, 0, 0.0),
        ("L40S", 1, 300.0, 300.0, 300.0, 0, 0, 0, 0.0),
    ]
    assert _table(regret_breakdown(_life(evaluation), WINDOW, "hour", scope="b"), "hour", REGRET_FIELDS) == [
        (HOURS[0], 0, None, 0, 0, None), (HOURS[1], 0, None, 0, 0, None), (HOURS[2], 1, 0.0, 1, 0, 0.0)]


@EVALUATIONS
def test_an_hour_with_no_pod_started_has_null_wait_percentiles(evaluation: str) -> None:
    """b's pods: d1 started at once (a wait of 0 s), none started in the second hour (no wait to
    rank: null, not 0 s), b1 in the third."""
    assert _table(wait_breakdown(_life(evaluation), WINDOW, "hour", scope="b"), "hour", WAIT_FIELDS) == [
        (HOURS[0], 1, 0.0, 0.0, 0.0, 1, 0, 0, 600.0),  # pending at 60: b1 10 min
        (HOURS[1], 0, None, None, None, 2, 0, 1, 4200.0),  # pending at 120: b1 70 min (starving), b2 20 min
        (HOURS[2], 1, 4800.0, 4800.0, 4800.0, 1, 0, 2, 4800.0),  # b1 80 min, b2 pending 80 min: both starving
    ]


@EVALUATIONS
def test_regret_per_hour_counts_a_pod_in_the_hour_it_was_bound(evaluation: str) -> None:
    assert _table(regret_breakdown(_life(evaluation), WINDOW, "hour"), "hour", REGRET_FIELDS) == [
        (HOURS[0], 2, 1.0, 0, 0, None),  # a1, e1 first choice; d1 is a device-plugin pod
        (HOURS[1], 1, 0.0, 1, 1, 1.0),  # a2 regretted
        (HOURS[2], 1, 0.0, 1, 0, 0.0),  # b1 not
    ]


@EVALUATIONS
def test_regret_per_model_goes_by_the_preferred_model(evaluation: str) -> None:
    assert _table(regret_breakdown(_life(evaluation), WINDOW, "model"), "preferred", REGRET_FIELDS) == [
        ("H100", 3, 1 / 3, 2, 1, 0.5),  # a1 first choice; a2, b1 fell back to A100; a2 regretted
        ("L40S", 1, 1.0, 0, 0, None),
    ]
